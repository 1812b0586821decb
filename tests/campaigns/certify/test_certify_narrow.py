"""`crashcert certify`'s table in an 80-column CI log (not a terminal): every invariant named
in full with its verdict, its counts per fault class, and the trials where it failed; a wide
terminal keeps the invariant x fault class grid."""

from __future__ import annotations

import pathlib
import re

import rich.console

from harness import checkers
from harness.campaigns import certify
from harness.checkers import verdict as verdict_module
from harness.faults import spec as fault_spec
from harness.planning import plan
from harness.record import history
from harness.scenario import schema as scenario
from harness.trial import runner

V = verdict_module.Verdict
NAMES = ["refund", "approval_rejected_with_a_long_scenario_name"]
POINTS = ["kill@tools.pending#1", "kill@tool.started:before_commit#1", "kill@world:tool.effect#1"]
# Which invariant fails in which trial: (mode, scenario, fault) -> (invariant, verdict).
BROKEN = {
    ("boundary", NAMES[1], POINTS[1]): ("reply.single_delivery", V.FAIL),
    ("blackbox", NAMES[0], POINTS[2]): ("reply.single_delivery", V.FAIL),
    ("blackbox", NAMES[1], POINTS[2]): ("run.liveness", V.ERROR),
}


def trial(mode: certify.Mode, name: str, fault: str | None) -> certify.CertTrial:
    found = scenario.find("refund").model_copy(update={"name": name})
    steps = [fault_spec.parse(fault)] if fault else []
    broken = BROKEN.get((mode, name, fault or ""))
    results = [
        verdict_module.CheckResult(
            invariant=invariant,
            verdict=broken[1] if broken and broken[0] == invariant else V.PASS,
            summary="two deliveries" if broken and broken[0] == invariant else "held",
        )
        for invariant in checkers.INVARIANTS
    ]
    outcome = runner.TrialOutcome(
        spec=runner.TrialSpec(
            scenario=found, plan=steps, label=plan.plan_label(steps) or "baseline"
        ),
        history=history.TrialHistory(trial_id="t", engine="e", scenario=found, run_key="k"),
        results=results,
        verdict=verdict_module.combine(results),
        directory=pathlib.Path(f"/tmp/{name}"),
        repro=f"crashcert run --scenario {name}",
    )
    return certify.CertTrial(mode, outcome)


def certificate() -> certify.Certification:
    trials: list[certify.Trial] = [
        trial(mode, name, fault)
        for mode in ("boundary", "blackbox")
        for name in NAMES
        for fault in [None, *(POINTS[:2] if mode == "boundary" else POINTS[2:])]
    ]
    return certify.Certification(
        engine="e", engine_ref="e.yaml", modes=["boundary", "blackbox"], trials=trials
    )


def rendered(console: rich.console.Console) -> list[str]:
    certify.print_certification(certificate(), console=console)
    return console.export_text().splitlines()


def notes_of(lines: list[str], invariant: str) -> list[str]:
    [index] = [i for i, line in enumerate(lines) if line.split()[1:2] == [invariant]]
    notes = []
    for line in lines[index + 1 :]:
        if not line.startswith("    "):
            break
        notes.append(line.strip())
    return notes


def test_an_80_column_log_names_every_invariant_its_verdict_and_the_failing_trials() -> None:
    lines = rendered(rich.console.Console(record=True, width=80, force_terminal=False))
    assert not any("…" in line for line in lines)
    expected = {invariant: V.PASS for invariant in checkers.INVARIANTS}
    expected["reply.single_delivery"] = V.FAIL
    expected["run.liveness"] = V.ERROR
    for invariant, value in expected.items():
        rows = [line for line in lines if re.match(rf"[A-Z]+ +{re.escape(invariant)} ", line)]
        assert [row.split()[0] for row in rows] == [value.value], invariant
        notes = " ".join(notes_of(lines, invariant))
        for name in ("boundary:baseline", "boundary:kill@boundary", "blackbox:kill@world"):
            # every fault class, whole, with its counts, under a row that did not pass
            assert (name in notes) is (value is not V.PASS), invariant
    single = notes_of(lines, "reply.single_delivery")
    assert all(len(line) + 4 <= 80 or ", " not in line for line in single)  # wrapped
    joined = " ".join(single)
    assert f"[boundary] {NAMES[1]} kill@tool.started:before_commit#1" in joined
    assert f"[blackbox] {NAMES[0]} kill@world:tool.effect#1" in joined
    assert "boundary:kill@boundary F1 P3" in joined
    liveness = " ".join(notes_of(lines, "run.liveness"))
    assert f"ERROR in: [blackbox] {NAMES[1]} kill@world:tool.effect#1" in liveness


def test_a_wide_terminal_keeps_the_grid() -> None:
    console = rich.console.Console(record=True, width=200, force_terminal=True, color_system=None)
    lines = rendered(console)
    header = next(line for line in lines if line.startswith("┃ invariant "))
    cells = [cell.strip() for cell in header.strip("┃ ").split("┃")]
    assert cells[:2] == ["invariant", "overall"]
    assert not any(re.match(r"[A-Z]+ +reply\.single_delivery ", line) for line in lines)
