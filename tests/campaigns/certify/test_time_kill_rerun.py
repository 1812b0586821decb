"""A time kill's rerun line reproduces the trial: it strikes at the world event the kill
landed after, not at the same wall-clock offset (which lands elsewhere on another run)."""

from __future__ import annotations

import threading
import types
from typing import Any, cast

from harness.checkers import judge
from harness.faults import spec as fault_spec
from harness.nemesis import world_trigger
from harness.record import history, recorder
from harness.trial import runner
from harness.world import hooks, ledger
from tests.checkers import builders

TIME_KILL = "kill@time:+0.01s"
WAIT_S = 10.0


class _Launcher:
    """No live worker: a time kill strikes every live one (none) and starts a fresh one."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.workers = types.SimpleNamespace(alive=lambda: [])

    def start(self) -> None:
        self.started.set()


def _struck_history() -> history.TrialHistory:
    """A live WorldTrigger: a tool effect, then the run's first model answer (which arms the
    time kill), then the kill; nothing else happens in the world before it strikes."""
    world = types.SimpleNamespace(
        hooks=hooks.WorldHooks(),
        model_url="http://127.0.0.1:1/v1",
        tools_url="http://127.0.0.1:2",
        tools_endpoint="http://127.0.0.1:2",
        reply_url="http://127.0.0.1:3",
    )
    launcher = _Launcher()
    record = recorder.Recorder()
    steps = [fault_spec.parse(TIME_KILL)]
    trigger = world_trigger.WorldTrigger(
        cast(Any, world), steps, run_key=builders.RUN_KEY, recorder=record,
        launcher=cast(Any, launcher), policy=lambda hit: None,
    ).install()  # fmt: skip
    try:
        effect = ledger.ToolEffect(seq=4, tool="lookup_order", key="k", arguments={}, request_seq=3)
        world.hooks.tool_effect_applied(effect)
        answer = ledger.ModelRequest(
            seq=7, run_key=builders.RUN_KEY, turn=0, messages=[], status_code=200
        )
        world.hooks.model_answered(answer)
        assert launcher.started.wait(WAIT_S), "the time kill never struck"
    finally:
        trigger.close()
    return builders.Trial().build().model_copy(update={"plan": steps, "events": record.events()})


def test_a_time_kill_records_the_world_event_it_landed_after() -> None:
    trial = _struck_history()
    hit = next(h for h in trial.boundary_hits() if h.point == "time:+0.01s")
    assert hit.detail == {"after_world_point": "world:model.answered#1", "after_ledger_seq": 7}
    (fault,) = trial.faults()
    assert fault.step == "kill@time:+0.01s#1" and fault.ok
    assert fault.note.endswith("landed after world:model.answered#1 (world ledger seq 7)"), (
        fault.note
    )


def test_the_trigger_records_what_each_world_hit_stands_for() -> None:
    hits = {h.point: h for h in _struck_history().boundary_hits()}
    assert hits["world:tool.effect"].stands_for == "tool.returned"
    assert hits["world:model.answered"].stands_for == "model.returned"
    assert hits["time:+0.01s"].stands_for is None  # a time point stands for no boundary


def test_the_rerun_line_strikes_at_that_world_event_and_the_label_keeps_the_time() -> None:
    trial = _struck_history()
    spec = runner.TrialSpec.under(trial.scenario, [TIME_KILL], engine_ref="e.yaml")
    assert spec.label == "kill@time:+0.01s#1"  # the record keeps the wall-clock point
    assert runner.repro_command(spec, trial=trial).startswith(
        "crashcert run --engine e.yaml --scenario refund "
        "--fault 'kill@world:model.answered#1' --seed 0  # "
    )


def test_a_time_kill_that_never_struck_reruns_as_planned() -> None:
    spec = runner.TrialSpec.under(builders.refund_scenario(), [TIME_KILL])
    assert "--fault 'kill@time:+0.01s#1'" in runner.repro_command(spec, trial=builders.clean())


def _time_killed(*, after_terminal_s: float) -> history.TrialHistory:
    """A clean run and a time kill that struck `after_terminal_s` after the run was first
    seen terminal (negative: before)."""
    trial = builders.clean()
    assert trial.finished_at is not None
    step = fault_spec.parse("kill@time:+0.50s")
    struck = history.FaultApplied(
        seq=10_000, t=trial.finished_at + after_terminal_s, action="kill", planned=step,
        struck_at=fault_spec.PointRef(point=step.point, occurrence=1), worker_id="w-1",
    )  # fmt: skip
    return trial.model_copy(update={"plan": [step], "events": [*trial.events, struck]})


def test_a_time_kill_after_the_run_was_terminal_is_not_applied() -> None:
    results, verdict = judge.judge(_time_killed(after_terminal_s=0.165))
    applied = next(r for r in results if r.invariant == "plan.applied")
    assert applied.verdict.value == "INCONCLUSIVE", applied
    assert "after the run was seen terminal" in " ".join(applied.evidence)
    assert verdict.value == "INCONCLUSIVE"  # never a PASS: the kill tested nothing


def test_a_time_kill_before_the_end_is_applied() -> None:
    results, _ = judge.judge(_time_killed(after_terminal_s=-0.2))
    assert next(r for r in results if r.invariant == "plan.applied").verdict.value == "PASS"


def test_a_rerun_at_a_world_point_says_it_is_a_different_trial() -> None:
    trial = _struck_history()
    spec = runner.TrialSpec.under(trial.scenario, [TIME_KILL], engine_ref="e.yaml")
    line = runner.repro_command(spec, trial=trial)
    assert line.endswith(
        "# a different trial: kill@time:+0.01s#1 landed after world:model.answered#1; "
        "this strikes at it"
    ), line
