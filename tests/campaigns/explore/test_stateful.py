"""A Hypothesis state machine drives reference-engine workers through faults on a real Lab.

Several workers (real processes, each behind its own Toxiproxy proxy) serve several refund
runs of one world at once. Hypothesis interleaves submissions, worker starts, kills,
pauses and resumes, database cuts and heals, and moments for the world to move. After
every step nothing may have happened twice outside the engine (no refund, no reply); at
the end, once everything is healed, every run must reach `succeeded` with one reply and
exactly one refund, or none when its engine ended the refund `outcome_unknown`. Workers
report no boundaries here: faults land wherever the workers happen to be, as in
production.
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
import uuid
from typing import Any

import hypothesis
import pytest
from hypothesis import stateful
from hypothesis import strategies as st

from harness.lab import launcher, processes, shared
from harness.record import recorder
from harness.scenario import schema
from harness.trial import runner as trial
from harness.world import world as world_module
from tests import fix_proxy

pytestmark = [pytest.mark.matrix, pytest.mark.postgres, pytest.mark.toxiproxy]

SCENARIO = schema.find("refund")
REFUND = "refund_order"
UNKNOWN = "outcome_unknown"
MAX_RUNS = 4
MAX_WORKERS = 3
# A moment for the world to move: until its ledgers grow, at most this long. Three leases
# (300 ms) and more: a run that can move moves well within it (a recovery takes one lease);
# one that cannot (every worker paused or cut) is as still at 1 s as at 3 s, which a CI
# run's examples spent waiting, up to 7 times in one example.
MOVE_TIMEOUT_S = 1.0
# After the last heal: the scenario's deadline per run, generously, on a loaded machine.
SETTLE_TIMEOUT_S = SCENARIO.deadline_s * 3
EXAMPLES = int(os.environ.get("CRASHCERT_STATEFUL_EXAMPLES", "4"))
STEPS = int(os.environ.get("CRASHCERT_STATEFUL_STEPS", "10"))
PICK = st.integers(min_value=0, max_value=MAX_WORKERS * 4)


class Rig:
    """One database, one world, workers behind their own proxies (the parts of a trial)."""

    def __init__(self, lab: shared.Lab, directory: pathlib.Path) -> None:
        self.lab = lab
        self.name = f"cc_sm_{uuid.uuid4().hex[:10]}"
        self.dsn = lab.clone_database(self.name)
        self.world = world_module.World(SCENARIO)
        self.world.start()
        self.proxies: dict[str, Any] = {}
        self.launcher = launcher.Launcher(
            lab.engine,
            world_env=self.world.env(),
            control_path=None,
            dsn_for_worker=self._dsn_for,
            log_dir=directory / self.name,
            recorder=recorder.Recorder(self.world.counter),
            trial_id=self.name,
        )
        self.cut: set[str] = set()
        self.runs: dict[str, str] = {}  # run id -> run key
        self.steps: list[str] = []  # what the machine did, for failure messages

    def _dsn_for(self, worker_id: str) -> str:
        assert self.lab.toxiproxy is not None
        proxy = self.lab.toxiproxy.create(
            f"{self.name}-{worker_id}", upstream=f"{self.lab.pg.host}:{self.lab.pg.port}"
        )
        self.proxies[worker_id] = proxy
        return str(proxy.dsn_through(self.dsn))

    def submit(self) -> None:
        key = f"{SCENARIO.name}-{uuid.uuid4().hex[:8]}"
        self.steps.append(f"submit {key}")
        self.runs[self.lab.engine.submit(self.dsn, trial.build_input(SCENARIO, key))] = key

    def live(self, *, paused: bool | None = None) -> list[processes.Worker]:
        workers = self.launcher.workers.alive()
        return [w for w in workers if paused is None or w.paused == paused]

    def heal_all(self) -> None:
        for worker in self.live(paused=True):
            worker.resume()
        for worker_id in sorted(self.cut):
            self.proxies[worker_id].enable()
        self.cut.clear()
        if not self.live():
            self.launcher.start()

    def all_terminal(self) -> bool:
        return all(self.lab.engine.report(self.dsn, run_id).terminal for run_id in list(self.runs))

    def close(self) -> None:
        try:
            self.launcher.close()
        finally:
            self.world.stop()
            for proxy in self.proxies.values():
                proxy.delete()
            self.lab.drop_database(self.name)


def pick(workers: list[processes.Worker], index: int) -> processes.Worker:
    return workers[index % len(workers)]


class EngineUnderFaults(stateful.RuleBasedStateMachine):
    def __init__(self, lab: shared.Lab, directory: pathlib.Path) -> None:
        super().__init__()
        self.rig = Rig(lab, directory)

    @stateful.initialize()
    def first_run_and_two_workers(self) -> None:
        self.rig.submit()
        self.rig.launcher.start()
        self.rig.launcher.start()

    @stateful.precondition(lambda self: len(self.rig.runs) < MAX_RUNS)
    @stateful.rule()
    def submit(self) -> None:
        self.rig.submit()

    @stateful.precondition(lambda self: len(self.rig.live()) < MAX_WORKERS)
    @stateful.rule()
    def start_worker(self) -> None:
        worker = self.rig.launcher.start()
        self.rig.steps.append(f"start {worker.worker_id}")

    @stateful.precondition(lambda self: bool(self.rig.live()))
    @stateful.rule(index=PICK)
    def kill(self, index: int) -> None:
        worker = pick(self.rig.live(), index)
        self.rig.steps.append(f"kill {worker.worker_id}")
        worker.kill()

    @stateful.precondition(lambda self: bool(self.rig.live(paused=False)))
    @stateful.rule(index=PICK)
    def pause(self, index: int) -> None:
        worker = pick(self.rig.live(paused=False), index)
        self.rig.steps.append(f"pause {worker.worker_id}")
        worker.pause()

    @stateful.precondition(lambda self: bool(self.rig.live(paused=True)))
    @stateful.rule(index=PICK)
    def resume(self, index: int) -> None:
        worker = pick(self.rig.live(paused=True), index)
        self.rig.steps.append(f"resume {worker.worker_id}")
        worker.resume()

    @stateful.precondition(
        lambda self: any(w.worker_id not in self.rig.cut for w in self.rig.live())
    )
    @stateful.rule(index=PICK)
    def cut_database(self, index: int) -> None:
        worker = pick([w for w in self.rig.live() if w.worker_id not in self.rig.cut], index)
        self.rig.steps.append(f"cut {worker.worker_id}")
        self.rig.proxies[worker.worker_id].disable()
        self.rig.cut.add(worker.worker_id)

    @stateful.precondition(lambda self: bool(self.rig.cut))
    @stateful.rule(index=PICK)
    def heal_database(self, index: int) -> None:
        worker_id = sorted(self.rig.cut)[index % len(self.rig.cut)]
        self.rig.steps.append(f"heal {worker_id}")
        self.rig.proxies[worker_id].enable()
        self.rig.cut.discard(worker_id)

    @stateful.rule()
    def let_the_world_move(self) -> None:
        before = len(self.rig.world.snapshot().entries())
        moved = processes.wait_until(
            lambda: len(self.rig.world.snapshot().entries()) > before,
            timeout=MOVE_TIMEOUT_S,
            interval=0.05,
        )
        self.rig.steps.append("world moved" if moved else "world still")

    @stateful.invariant()
    def nothing_happened_twice(self) -> None:
        snapshot = self.rig.world.snapshot()
        effects = collections.Counter(
            json.dumps(effect.arguments, sort_keys=True) for effect in snapshot.tool_effects(REFUND)
        )
        twice = {arguments: n for arguments, n in effects.items() if n > 1}
        assert not twice, f"non-replayable {REFUND} applied more than once: {twice}"
        deliveries = collections.Counter(d.run_id for d in snapshot.deliveries())
        again = {run_id: n for run_id, n in deliveries.items() if n > 1}
        assert not again, f"reply delivered more than once: {again}"

    def teardown(self) -> None:
        try:
            self.rig.heal_all()
            settled = processes.wait_until(
                self.rig.all_terminal, timeout=SETTLE_TIMEOUT_S, interval=0.2
            )
            reports = {
                run_id: self.rig.lab.engine.report(self.rig.dsn, run_id) for run_id in self.rig.runs
            }
            statuses = {run_id: report.status for run_id, report in reports.items()}
            print(f"{'; '.join(self.rig.steps)} -> {sorted(statuses.values())}")
            late = f"not every run terminal {SETTLE_TIMEOUT_S:.0f}s after healing"
            steps = f"after {'; '.join(self.rig.steps)}"
            assert settled, f"{late}: {statuses}, {steps}"
            assert set(statuses.values()) == {"succeeded"}, f"{statuses}, {steps}"
            snapshot = self.rig.world.snapshot()
            refunds = collections.Counter(
                effect.arguments["order_id"] for effect in snapshot.tool_effects(REFUND)
            )
            # Exactly one refund per run, unless the engine ended the refund
            # outcome_unknown: a worker cut or paused after recording the call as started,
            # before its request left, cannot be told from one whose request is in flight,
            # so the contract never sends it again (CONTRACT.md s. 7, "Decided questions").
            for run_id, key in self.rig.runs.items():
                unknown = any(
                    call.name == REFUND and call.state == UNKNOWN
                    for call in reports[run_id].tool_calls
                )
                wanted = range(2) if unknown else range(1, 2)
                assert refunds[f"ord-{key}"] in wanted, (
                    f"refunds {dict(refunds)}, {steps}; {_what_the_world_saw(snapshot, reports)}"
                )
            delivered = collections.Counter(d.run_id for d in snapshot.deliveries())
            assert dict(delivered) == dict.fromkeys(self.rig.runs, 1), f"{delivered}, {steps}"
        finally:
            self.rig.close()


def _what_the_world_saw(snapshot: world_module.WorldSnapshot, reports: dict[str, Any]) -> str:
    """The refund's requests and queries as the world answered them, requests refused as
    foreign, and each run's tool calls as its engine reports them: once a CI run ended
    `succeeded` with no refund in the world, and the message alone had to say why."""
    requests = [
        f"seq {r.seq} key {r.key} -> {r.status_code} {r.outcome}"
        for r in snapshot.tool_requests(REFUND)
    ]
    queries = [f"seq {q.seq} key {q.key} found={q.found}" for q in snapshot.tool_queries()]
    calls = {
        run_id: [(call.name, call.key, call.state) for call in report.tool_calls]
        for run_id, report in reports.items()
    }
    return (
        f"refund requests {requests}; queries {queries}; foreign {snapshot.foreign}; "
        f"reported calls {calls}"
    )


def test_reference_engine_under_interleaved_faults(
    base_lab: shared.Lab, tmp_path: pathlib.Path
) -> None:
    if base_lab.toxiproxy is None:
        fix_proxy.unavailable(base_lab.toxiproxy_note)
    stateful.run_state_machine_as_test(
        lambda: EngineUnderFaults(base_lab, tmp_path),  # type: ignore[arg-type]  # any factory
        settings=hypothesis.settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            database=None,
            derandomize=True,
            # Every example is real processes and a real database: report, do not shrink.
            phases=(hypothesis.Phase.explicit, hypothesis.Phase.generate),
            suppress_health_check=list(hypothesis.HealthCheck),
        ),
    )
