"""An engine that sends no idempotency key: its report may leave `key` out, and tool.same_key
says so in one line, never as a key "" named for many calls; a key missing on one attempt
and a changed key are told apart."""

from __future__ import annotations

from harness.checkers import tools
from harness.contract import run_report
from harness.record import history
from harness.world import ledger
from tests.checkers import builders


def _keyless(report_key: str | None) -> history.TrialHistory:
    """The clean refund run, no request carrying a key; the report names `report_key`."""
    trial = builders.clean_trial().build()
    entries = [
        entry.model_copy(update={"key": None}) if isinstance(entry, ledger.ToolRequest) else entry
        for entry in trial.tools
    ]
    reports = [
        report.model_copy(
            update={
                "tool_calls": [c.model_copy(update={"key": report_key}) for c in report.tool_calls]
            }
        )
        for report in trial.reports
    ]
    return trial.model_copy(update={"tools": entries, "reports": reports})


def test_a_report_may_leave_the_key_out() -> None:
    report = run_report.RunReport.model_validate(
        {
            "run_id": "r", "status": "succeeded", "frontier": {"phase": None, "version": 0},
            "tool_calls": [{"id": "c", "name": "t", "state": "succeeded", "turn": 0}],
            "delivery": {"state": "none"},
        }
    )  # fmt: skip
    assert report.tool_calls[0].key is None


def test_no_key_sent_is_one_line_and_an_empty_key_is_no_key() -> None:
    for named in ("", None):
        result = tools.check_same_key(_keyless(named))
        assert result.verdict.value == "FAIL"
        assert result.summary.startswith("no idempotency key sent: 2 tool request(s) carried none")
        lines = [result.summary, *result.evidence]
        assert not [line for line in lines if "key ''" in line or "named by the engine" in line]
        assert len([line for line in lines if "no idempotency key" in line]) == 2  # summary + 1


def test_a_changed_key_is_not_a_missing_one() -> None:
    trial = builders.clean_trial()
    trial.tool_request("call_lookup", key="key-fresh", outcome="failed_before_effect")
    result = tools.check_same_key(trial.build())
    assert "different keys" in result.summary and "no idempotency key" not in result.summary
