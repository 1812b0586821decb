"""Timeline building blocks that need no browser."""

from __future__ import annotations

import json

from harness.report import timeline
from tests.checkers import builders
from tests.report.timeline import test_timeline_browser as pages


def test_evidence_seq_mentions() -> None:
    assert timeline.evidence_seqs("turn 1: 2 model calls answered (seq 4, 9), allowed 1") == [4, 9]
    assert timeline.evidence_seqs("request seq [12, 13] carried no key") == [12, 13]
    assert timeline.evidence_seqs("model request seq 7 (turn 2): late") == [7]
    assert timeline.evidence_seqs("nothing here 42") == []


def test_lanes_put_each_record_in_its_lane() -> None:
    lanes = {lane["id"]: lane for lane in timeline.lanes(pages.duplicate_refund())}
    assert [e["label"] for e in lanes["worker:w-1"]["events"] if "fault" in e["classes"]] == [
        "kill (kill@tool.returned#2)"
    ]
    assert any("exited" in e["classes"] for e in lanes["worker:w-1"]["events"])
    assert [e["label"] for e in lanes["model"]["events"]] == [
        "model turn 0",
        "model turn 1",
        "model turn 2",
    ]
    assert "postgres" not in lanes  # no server fault, no empty lane for it


def test_page_is_self_contained() -> None:
    page = timeline.trial_page(pages.view(builders.clean()))
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page and "<link" not in page and "src=" not in page
    # The JSON travels inside the page and cannot close its script element early.
    data = page.split('class="trial-data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(data)["lanes"]
