"""GitHub Actions output: the step summary appended to $GITHUB_STEP_SUMMARY (counts per
scenario, each trial that did not pass with its rerun line) and one annotation per such trial,
its title and message escaped as GitHub's toolkit does; nothing outside GitHub."""

from __future__ import annotations

import io
import pathlib

from harness.checkers import verdict
from harness.report import github

V = verdict.Verdict


def record(scenario: str, label: str, value: V, **extra: object) -> dict[str, object]:
    return {
        "scenario": scenario,
        "label": label,
        "verdict": value.value,
        "repro": f"crashcert run --scenario {scenario} --fault '{label}' --seed 0",
        "invariants": [
            {"invariant": "model.count", "verdict": "PASS", "summary": "held"},
            {"invariant": "reply.single_delivery", "verdict": value.value, "summary": "2 sent"},
        ],
        **extra,
    }


RECORDS = [
    record("refund", "baseline", V.PASS),
    record("refund", "kill@tool.started:before_commit#1", V.FAIL),
    record("refund", "kill@reply.sent#1", V.PASS),
    record("email_send", "baseline", V.PASS),
    record("email_send", "kill@time:+1.5s", V.INCONCLUSIVE),
    record("email_send", "kill@tools.pending#1", V.ERROR),
]


def test_the_summary_is_appended_with_counts_and_rerun_lines(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "summary.md"
    path.write_text("earlier step\n")
    environ = {github.SUMMARY_VARIABLE: str(path)}
    trials = github.from_records(RECORDS)
    github.publish("crashcert matrix: FAIL", ["6 trials"], trials, environ=environ)
    text = path.read_text()
    assert text.startswith("earlier step\n## crashcert matrix: FAIL\n")  # appended, not replaced
    lines = text.splitlines()
    assert "| refund | FAIL | 3 | 2 | 1 | 0 | 0 |" in lines  # P F I E
    assert "| email_send | FAIL | 3 | 1 | 0 | 1 | 1 |" not in lines
    assert "| email_send | ERROR | 3 | 1 | 0 | 1 | 1 |" in lines
    assert "### Trials that did not pass (3)" in lines
    for item in RECORDS:
        if item["verdict"] != "PASS":
            head = f"- **{item['verdict']}** {item['scenario']} `{item['label']}`"
            assert f"{head}: reply.single_delivery: 2 sent" in lines
            assert f"  {item['repro']}" in lines
    assert "kill@reply.sent#1" not in text  # a PASS is counted, not listed


def test_one_annotation_per_trial_that_did_not_pass() -> None:
    out = io.StringIO()
    environ = {"GITHUB_ACTIONS": "true"}
    github.publish("t", [], github.from_records(RECORDS), environ=environ, out=out)
    lines = out.getvalue().splitlines()
    assert lines == [
        "::error title=crashcert refund kill@tool.started%3Abefore_commit#1::"
        "crashcert run --scenario refund --fault 'kill@tool.started:before_commit#1' --seed 0"
        "%0AFAIL reply.single_delivery: 2 sent",
        "::warning title=crashcert email_send kill@time%3A+1.5s::"
        "crashcert run --scenario email_send --fault 'kill@time:+1.5s' --seed 0"
        "%0AINCONCLUSIVE reply.single_delivery: 2 sent",
        "::error title=crashcert email_send kill@tools.pending#1::"
        "crashcert run --scenario email_send --fault 'kill@tools.pending#1' --seed 0"
        "%0AERROR reply.single_delivery: 2 sent",
    ]


def test_escaping_follows_githubs_toolkit() -> None:
    assert github.escape_data("50% done\r\nnext: a,b") == "50%25 done%0D%0Anext: a,b"
    assert github.escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    trial = github.Trial("s,1", "kill@x:y", V.FAIL, "run --x '100%'\nsecond", why="")
    assert github.annotation(trial) == (
        "::error title=crashcert s%2C1 kill@x%3Ay::run --x '100%25'%0Asecond"
    )


def test_nothing_is_written_outside_github() -> None:
    out = io.StringIO()
    for environ in ({}, {"CI": "true"}, {github.SUMMARY_VARIABLE: "", "GITHUB_ACTIONS": "1"}):
        github.publish("t", [], github.from_records(RECORDS), environ=environ, out=out)
    assert out.getvalue() == ""


def test_certify_records_name_their_mode() -> None:
    records = [record("refund", "baseline", V.PASS, mode="blackbox")]
    [trial] = github.from_records(records, mode=True)
    assert trial.label == "baseline (blackbox)"
    [plain] = github.from_records(records)
    assert plain.label == "baseline"
