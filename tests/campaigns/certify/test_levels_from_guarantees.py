"""A level rests on the fault classes that can break its invariants (harness/checkers/levels.py):
a certificate over a subset of them is capped and says what was missing. Judged on recorded
trial results: the required trials come from a literal baseline, as a live certify derives them."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

from harness import checkers
from harness.campaigns import cert_trial, certify, coverage
from harness.checkers import frontier, levels, verdict
from harness.faults import spec as fault_spec
from harness.shards import merge_certify
from tests.campaigns import recorded_checks
from tests.checkers import builders, test_check_frontier

LATE_WORKER_BREAKS = ("tool.at_most_once", "lease.fencing", "model.once_after_decision")


FRONTIER = recorded_checks.FRONTIER


def _trial(mode: str, label: str, fault: str, failing: tuple[str, ...] = ()) -> Any:
    results = [
        {
            "invariant": name,
            "verdict": "FAIL" if name in failing else "PASS",
            **recorded_checks.fields(name),
        }
        for name in checkers.INVARIANTS
    ]
    plan = [] if fault == "baseline" else [label]
    if plan:
        results.append({"invariant": "plan.applied", "verdict": "PASS", "summary": "s"})
    record = {
        "scenario": "refund", "label": label, "plan": plan, "mode": mode,
        "fault_class": "baseline" if not plan else f"{fault}@boundary",
        "verdict": "FAIL" if failing else "PASS", "repro": "crashcert run ...",
        "invariants": results,
    }  # fmt: skip
    return merge_certify.RecordedTrial.of(record, "/nonexistent")


def _certificate(ran: Mapping[str, tuple[str, ...]]) -> certify.Certification:
    """A boundary certification of refund whose trials are every required trial of the
    classes in `ran`, each failing the invariants `ran` names for its class."""
    required = coverage.required_of("boundary", builders.clean())
    trials = [_trial("boundary", "baseline", "baseline")]
    trials += [
        _trial("boundary", item.label, item.fault, ran[item.fault])
        for item in required
        if item.fault in ran
    ]
    return certify.Certification(
        engine="e", engine_ref="e.yaml", modes=["boundary"], trials=trials, required=required
    )


def test_every_named_class_is_in_the_catalog_and_every_invariant_can_be_broken_by_a_kill() -> None:
    assert set(levels.REQUIRED_CLASSES) <= set(fault_spec.MATRIX)
    for invariant in checkers.INVARIANTS:
        assert invariant in levels.BREAKS, invariant
        assert "kill" in levels.breaks(invariant)
        assert set(levels.breaks(invariant)) <= set(levels.REQUIRED_CLASSES)
    assert "pause" in levels.breaks("lease.fencing")
    assert levels.breaks("run.single_submit") == ("kill", "submit_twice")
    assert levels.breaks("an.invariant.added.later") == levels.REQUIRED_CLASSES


def test_where_each_class_is_required() -> None:
    assert levels.required_at("kill", "run.finished")
    assert not levels.required_at("pause", "run.finished")  # no lease is held there
    assert levels.required_at("commit_lost", "tools.pending:before_commit")
    assert not levels.required_at("commit_lost", "tools.pending")
    assert levels.required_at("tool_cut", "tool.started")
    assert not levels.required_at("tool_cut", "reply.sending")  # the engine calls no tool there
    assert levels.required_at("sink_cut", "reply.sending")
    assert levels.required_at("response_lost", "world:tool.effect")
    assert levels.required_at("submit_twice", "run")


def test_levels_ask_for_their_fault_model() -> None:
    assert levels.required_classes(levels.Level.AT_LEAST_ONCE) == ("kill",)
    assert levels.required_classes(levels.Level.CRASH_SAFE) == ("kill", "submit_twice")
    assert set(levels.required_classes(levels.Level.FULL)) == set(levels.REQUIRED_CLASSES)
    # --quick can never print FULL: FULL asks for classes it does not run
    assert set(levels.required_classes(levels.Level.FULL)) - set(levels.QUICK_CLASSES)


def test_kills_alone_never_earn_full_and_say_what_full_needs() -> None:
    cert = _certificate({"kill": ()})
    assert cert.evidence_level is levels.Level.FULL  # every trial that ran passed
    assert cert.level is levels.Level.AT_LEAST_ONCE  # CRASH-SAFE needs the resubmits too
    assert cert.title == (
        "AT-LEAST-ONCE (FULL needs pause, commit_lost, commit_dropped, response_lost, "
        "submit_twice, tool_cut, model_cut, sink_cut not run)"
    )
    assert cert.faults_run == ["kill"]
    assert cert.coverage["kill"].text() == "35/35"
    assert cert.coverage["pause"].text() == "0/33"


def test_a_certificate_of_crashes_and_resubmits_is_crash_safe_at_most() -> None:
    cert = _certificate({"kill": (), "submit_twice": ()})
    assert cert.level is levels.Level.CRASH_SAFE
    assert cert.title.startswith("CRASH-SAFE (FULL needs pause, commit_lost")


def test_a_resubmit_that_starts_a_second_run_loses_crash_safe() -> None:
    cert = _certificate({"kill": (), "submit_twice": ("run.single_submit",)})
    assert cert.level is levels.Level.AT_LEAST_ONCE
    assert "run.single_submit" not in cert.held


def test_an_engine_full_under_kills_and_broken_under_pause_is_below_full() -> None:
    # skip_lease_check (tests/quality/engines/) as a plain certify sees it: every kill
    # passes, every pause lets a late worker repeat the refund and commit after its lease.
    every = {fault: () for fault in levels.REQUIRED_CLASSES}
    assert _certificate(every).level is levels.Level.FULL
    cert = _certificate({**every, "pause": LATE_WORKER_BREAKS})
    assert levels.rank(cert.level) < levels.rank(levels.Level.FULL)
    assert cert.level is levels.Level.AT_LEAST_ONCE
    assert cert.title == "AT-LEAST-ONCE"  # the evidence decides: nothing to add


def test_one_required_trial_missing_caps_the_level() -> None:
    every = {fault: () for fault in levels.REQUIRED_CLASSES}
    cert = _certificate(every)
    cert.trials = [t for t in cert.trials if t.label != "pause@tools.pending#1"]
    assert cert.level is levels.Level.CRASH_SAFE
    assert cert.title == "CRASH-SAFE (FULL needs pause struck 32/33)"


@pytest.mark.parametrize("rendering", ["json", "markdown", "table"])
def test_every_rendering_names_the_classes_and_the_coverage(rendering: str) -> None:
    cert = _certificate({"kill": ()})
    if rendering == "json":
        document = certify.to_json(cert)
        assert document["title"] == cert.title and document["faults_run"] == ["kill"]
        assert document["coverage"]["by_scenario"]["boundary:refund"]["pause"] == "0/33"
        assert "crashcert-AT--LEAST--ONCE%20%28kill%29-orange" in document["badge"]
        return
    text = (
        certify.to_markdown(cert)
        if rendering == "markdown"
        else "\n".join(certify.coverage_lines(cert))
    )
    assert "faults run: kill" in text
    assert "coverage boundary:refund: 35/116: kill 35/35, pause 0/33" in text


def test_a_plain_certify_plans_what_the_top_level_asks_for_and_quick_less() -> None:
    classes, select = certify._plan_for("boundary", None, None, quick=False)
    assert classes == list(levels.REQUIRED_CLASSES) and select is not None
    assert not select([fault_spec.parse("tool_cut@reply.sending#1")])
    assert select([fault_spec.parse("tool_cut@tool.started#1")])
    quick, _ = certify._plan_for("boundary", None, None, quick=True)
    assert quick == list(levels.QUICK_CLASSES)
    # explicit faults or points keep their meaning: what they name, everywhere it applies
    assert certify._plan_for("boundary", None, ["tool.started"], quick=False) == (["kill"], None)
    assert certify._plan_for("boundary", ["pause"], None, quick=False) == (["pause"], None)


def test_a_frontier_read_only_from_the_engines_own_hits_is_self_reported() -> None:
    every = {fault: () for fault in levels.REQUIRED_CLASSES}
    cert = _certificate(every)
    baseline = cert.trials[0]
    assert isinstance(baseline, merge_certify.RecordedTrial)
    reported = [r for r in baseline.checks() if r.invariant != FRONTIER]
    reported.append(frontier.check(builders.clean()))  # hits only: detail.frontier_version
    cert.trials[0] = dataclasses.replace(baseline, results=tuple(reported))
    assert cert.verdict_of(FRONTIER).value == "PASS"
    assert cert.self_reported == {FRONTIER: 1}
    assert cert.level is levels.Level.CRASH_SAFE
    assert "frontier.monotonic (self-reported)" in certify.to_markdown(cert)
    assert certify.to_json(cert)["invariants"][FRONTIER]["self_reported"] is True


def test_a_frontier_checked_against_the_checkpoints_table_is_not() -> None:
    trial = builders.clean_trial()
    trial.engine_tables = {"checkpoints": test_check_frontier.CLEAN_ROWS}
    result = frontier.check(trial.build())
    assert result.verdict.value == "PASS"
    assert result.durable is True  # the field certify reads
    assert frontier.check(builders.clean()).durable is False  # hits only


def test_self_reported_reads_the_durable_field_not_the_summary_wording() -> None:
    """Certify once matched the words 'checkpoint rows from v' in the summary: a summary
    that says so without a judged table counted as durable, and a durable PASS worded
    otherwise as self-reported."""

    def counted(**fields: Any) -> cert_trial.Counted:
        result = verdict.CheckResult(invariant=FRONTIER, verdict=verdict.Verdict.PASS, **fields)
        return merge_certify.RecordedTrial(
            mode="boundary", fault_class="baseline", record={}, results=(result,), directory="/x"
        )

    worded = counted(summary="4 checkpoint rows from v1 to v4, each step an allowed transition")
    assert worded.self_reported(FRONTIER)  # the words alone prove nothing durable
    assert not counted(summary="judged the exported table", durable=True).self_reported(FRONTIER)
    assert counted(summary="5 committed hits from v1 to v5", durable=False).self_reported(FRONTIER)
