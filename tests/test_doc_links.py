"""Every relative link in the README, docs/, harness/'s own documents and the framework
examples' READMEs points at a file or folder of this repository, so the map leads somewhere
when a page moves."""

from __future__ import annotations

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[1]
DOCUMENTS = sorted(
    [
        REPO / "README.md",
        *(REPO / "docs").glob("*.md"),
        *(REPO / "harness").glob("*.md"),
        *(REPO / "tests" / "contract").glob("*/README.md"),
    ]
)
# [text](target) and [text](target "title"); images too. Code spans are cut out first.
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE = re.compile(r"```.*?```|`[^`\n]*`", flags=re.DOTALL)


def relative_links(text: str) -> list[str]:
    return [
        target
        for target in LINK.findall(CODE.sub("", text))
        if not re.match(r"[a-z][a-z0-9+.-]*:|#", target)  # https:, mailto:, #anchor
    ]


def test_the_link_finder_sees_what_a_reader_clicks() -> None:
    text = (
        '[a](docs/a.md) [b](../b.md#part) ![c](img/c.png "title") [web](https://x.org/y) '
        "[here](#invariants) `[code](not/a/link.md)`\n```\n[block](no/link.md)\n```"
    )
    assert relative_links(text) == ["docs/a.md", "../b.md#part", "img/c.png"]


def test_every_relative_link_resolves() -> None:
    assert REPO / "README.md" in DOCUMENTS and len(DOCUMENTS) > 3
    broken = [
        f"{document.relative_to(REPO)}: {target}"
        for document in DOCUMENTS
        for target in relative_links(document.read_text(encoding="utf-8"))
        if not (document.parent / target.split("#", 1)[0]).exists()
    ]
    assert not broken, broken


def test_every_page_of_docs_is_reached_from_the_readme() -> None:
    readme = relative_links((REPO / "README.md").read_text(encoding="utf-8"))
    reached = {(REPO / target.split("#", 1)[0]).resolve() for target in readme}
    unreached = [p.name for p in sorted((REPO / "docs").glob("*.md")) if p.resolve() not in reached]
    assert not unreached, f"docs/ pages the README does not link: {unreached}"
