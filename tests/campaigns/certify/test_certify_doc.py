"""docs/frameworks.md's dated table is rewritten from certificates, rows in, prose kept:
what ci/certify_frameworks.sh runs after its certifications."""

from __future__ import annotations

import pathlib

import pytest

from harness.campaigns import certify
from harness.report import certify_doc, certify_table
from tests.campaigns.certify.test_certify_table import _certificate

REPO = pathlib.Path(__file__).resolve().parents[3]


def test_the_rows_certify_writes_replace_the_table_between_the_markers(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cert = _certificate()
    (tmp_path / "a.md").write_text(certify.to_markdown(cert))
    (tmp_path / "b.md").write_text("# a certificate whose certify broke: no table\n")
    doc = tmp_path / "frameworks.md"
    doc.write_text(
        f"# prose\n\n{certify_doc.START}\n| framework | old |\n| stale row |\n"
        f"{certify_doc.END}\n\nafter\n"
    )
    assert certify_doc.main([str(doc), str(tmp_path / "a.md"), str(tmp_path / "b.md")]) == 0
    text = doc.read_text()
    rows = certify_table.rows(cert)
    expected = "\n".join([certify_table.HEADER, *rows])
    assert text == f"# prose\n\n{certify_doc.START}\n{expected}\n{certify_doc.END}\n\nafter\n"
    assert capsys.readouterr().out == expected + "\n"


def test_no_rows_leave_the_document_as_it_was(tmp_path: pathlib.Path) -> None:
    doc = tmp_path / "frameworks.md"
    doc.write_text(f"{certify_doc.START}\nkept\n{certify_doc.END}\n")
    (tmp_path / "empty.md").write_text("nothing\n")
    assert certify_doc.main([str(doc), str(tmp_path / "empty.md")]) == 1
    assert doc.read_text() == f"{certify_doc.START}\nkept\n{certify_doc.END}\n"
    with pytest.raises(ValueError, match="markers"):
        certify_doc.splice("no markers", ["| row |"])


def test_the_frameworks_page_holds_the_table_between_its_markers() -> None:
    """The markers the script writes between are where the page shows its table, under the
    header certify writes today."""
    text = (REPO / "docs" / "frameworks.md").read_text()
    inside = text.split(certify_doc.START, 1)[1].split(certify_doc.END, 1)[0]
    assert inside.startswith(f"\n{certify_table.HEADER}\n")
    rows = certify_doc.rows_of(f"{certify_doc.SECTION}\n{inside}")
    assert rows and certify_doc.splice(text, rows) == text
    assert "certify_doc docs/frameworks.md" in (REPO / "ci" / "certify_frameworks.sh").read_text()


def test_a_certificate_written_before_the_rests_on_column_joins_the_table() -> None:
    # A certify of before the column: its level's classes are put after the level, so its
    # row has the header's cells; the old header and rule are left out like the new ones.
    old = (
        f"{certify_doc.SECTION}\n\n{certify_doc.OLD_HEADER}\n|---|---|---|---|---|---|---|---|---|---|\n"
        "| Restate Python SDK | 1.3.0 | restate_naive | blackbox | AT-LEAST-ONCE | kill, "
        "response_lost | 14/14 | `tool.at_most_once` FAIL: x | 2026-12-02 | 0.1.0 |\n"
        "| F | 1 | capped | blackbox | NONE (CRASH-SAFE needs kill not run) | - | 0/1 | - "
        "| d | v |\n"
    )
    naive, capped = certify_doc.rows_of(old)
    assert naive == (
        "| Restate Python SDK | 1.3.0 | restate_naive | blackbox | AT-LEAST-ONCE | kill | kill, "
        "response_lost | 14/14 | `tool.at_most_once` FAIL: x | 2026-12-02 | 0.1.0 |"
    )
    assert capped.startswith(
        "| F | 1 | capped | blackbox | NONE (CRASH-SAFE needs kill not run) | - | - |"
    )
    columns = certify_table.HEADER.splitlines()[0].count("|")
    assert naive.count("|") == capped.count("|") == columns
