"""Soak: many runs over several workers under a seeded storm of faults, then a reckoning.

Hundreds of runs of one scenario go through a pool of workers while a seeded schedule
kills workers, pauses them past their lease, cuts their database link and restarts
Postgres (at least twice). When the storm has passed and every fault has healed, each run
must be terminal, and the world must show no non-replayable effect twice, no reply
delivered twice, and every budget within its limit. Each run is judged by the same
checkers as a trial, on the part of the world's ledgers that belongs to it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import pathlib
import random
import threading
import time
import uuid
from typing import Any

from harness import checkers, errors
from harness.checkers import verdict as verdict_module
from harness.contract import run_report
from harness.engines import blackbox as blackbox_engine
from harness.faults import spec
from harness.lab import database_links, shared
from harness.lab import launcher as launcher_module
from harness.nemesis import nemesis
from harness.record import history
from harness.record import recorder as recorder_module
from harness.scenario import schema
from harness.trial import runner
from harness.world import ledger
from harness.world import world as world_module

log = logging.getLogger(__name__)

# What a soak can judge per run without boundary reports (workers report none here).
SOAK_INVARIANTS = (
    "tool.at_most_once",
    "tool.same_key",
    "budget.not_restored",
    "reply.single_delivery",
    "transcript.intact",
)
# What the storm strikes at random (the catalog's `storm` classes), and on a schedule.
FAULT_KINDS = spec.STORM
PG_RESTART = "pg_restart"
PG_STARTED = spec.CATALOG[PG_RESTART].ended_by
# How long a storm's fault that heals lasts, in leases: a pause past the lease (another
# worker adopts the run), a database cut around it.
LASTS_LEASES = {"pause": (1.5, 3.0), "db_cut": (0.5, 2.0)}
# Run keys carry a five-digit index: with more runs one key would be a prefix of another.
DEFAULT_SETTLE_S = 120.0  # after the storm: how long runs may take to finish
MAX_RUNS = 100_000
MAX_WORKERS = 64  # each is a process with its own Toxiproxy link
MAX_STORM_S = 24 * 3600.0
MAX_SETTLE_S = 24 * 3600.0
MAX_PG_RESTARTS = 100


@dataclasses.dataclass
class SoakResult:
    seed: int
    runs: int
    workers: int
    wall_s: float
    faults: dict[str, int]
    statuses: dict[str, int]
    stuck: list[str]
    failures: list[str]

    @property
    def verdict(self) -> verdict_module.Verdict:
        if self.failures or self.stuck:
            return verdict_module.Verdict.FAIL
        return verdict_module.Verdict.PASS

    def summary(self) -> str:
        return json.dumps(dataclasses.asdict(self) | {"verdict": self.verdict.value}, indent=2)


def run_soak(
    lab: shared.Lab,
    scenario: schema.Scenario,
    *,
    runs: int = 500,
    workers: int = 4,
    seed: int = 0,
    storm_s: float = 60.0,
    pg_restarts: int = 2,
    settle_s: float = DEFAULT_SETTLE_S,
    out_dir: pathlib.Path,
) -> SoakResult:
    check_options(
        runs=runs, workers=workers, storm_s=storm_s, pg_restarts=pg_restarts, settle_s=settle_s
    )
    rng = random.Random(seed)
    engine = lab.engine
    soak_id = f"soak{seed}-{uuid.uuid4().hex[:6]}"
    database = f"cc_{soak_id}"
    dsn = lab.clone_database(database)
    started = time.monotonic()
    counts = {kind: 0 for kind in (*FAULT_KINDS, "pg_restart")}
    world = world_module.World(scenario)
    world.start()
    recorder = recorder_module.Recorder(world.counter)
    proxies = database_links.DatabaseLinks(lab, dsn, prefix=database)
    launcher = launcher_module.Launcher(
        engine,
        world_env=world.env(),
        control_path=None,  # no boundary is held: the storm is driven by the clock
        dsn_for_worker=proxies.dsn_for,
        log_dir=out_dir / soak_id / "workers",
        recorder=recorder,
        trial_id=soak_id,
        forkserver=lab.forkserver,
    )
    # Fixed width: no run key is a prefix of another (the world attributes by substring).
    keys = [f"{scenario.name}-{soak_id}-r{index:05d}" for index in range(runs)]
    # The trial's nemesis, with no plan: the storm tells it what to strike and when.
    storm = nemesis.Nemesis(
        [],
        launcher=launcher,
        recorder=recorder,
        proxies=proxies,
        pg=lab.pg,
        lease_s=engine.lease_ms / 1000.0,
        dsn=dsn,
    )
    try:
        run_ids = {key: engine.submit(dsn, runner.build_input(scenario, key)) for key in keys}
        pool = _Pool(launcher, workers)
        pool.fill()
        _storm(
            _Storm(storm, recorder, rng, counts, lease_s=engine.lease_ms / 1000.0),
            pool,
            storm_s=storm_s,
            pg_restarts=pg_restarts,
        )
        reports = _settle(engine, dsn, run_ids, pool, settle_s=settle_s)
    finally:
        storm.close()
        launcher.close()
        world.stop()
        proxies.close()
    snapshot = world.snapshot()
    failures: list[str] = []
    for key, run_id in run_ids.items():
        trial = _run_history(scenario, key, run_id, reports.get(run_id), snapshot, engine.name)
        for result in checkers.check_all(trial, only=SOAK_INVARIANTS):
            if result.verdict is not verdict_module.Verdict.PASS:
                failures.append(
                    f"{key}: {result.invariant} {result.verdict.value}: {result.summary}"
                )
    statuses: dict[str, int] = {}
    for report in reports.values():
        statuses[report.status] = statuses.get(report.status, 0) + 1
    stuck = [key for key, run_id in run_ids.items() if not _terminal(reports.get(run_id))]
    blackbox_engine.done_with(engine, dsn)
    lab.drop_database(database)
    return SoakResult(
        seed=seed,
        runs=runs,
        workers=workers,
        wall_s=round(time.monotonic() - started, 1),
        faults=counts,
        statuses=statuses,
        stuck=stuck,
        failures=failures,
    )


def check_options(
    *, runs: int, workers: int, storm_s: float, pg_restarts: int, settle_s: float
) -> None:
    """Refuse a soak that would test nothing (no runs, no storm) or never end."""
    counts = {
        "runs": (runs, 1, MAX_RUNS),
        "workers": (workers, 1, MAX_WORKERS),
        "pg_restarts": (pg_restarts, 0, MAX_PG_RESTARTS),
    }
    for name, (value, low, high) in counts.items():
        if not low <= value <= high:
            raise errors.CrashcertError(f"soak: {name} must be from {low} to {high}, got {value}")
    durations = {"storm_s": (storm_s, MAX_STORM_S), "settle_s": (settle_s, MAX_SETTLE_S)}
    for name, (seconds, longest) in durations.items():
        if not (math.isfinite(seconds) and 0 < seconds <= longest):
            raise errors.CrashcertError(
                f"soak: {name} must be above 0 and at most {longest:g} seconds, got {seconds:g}"
            )


def _terminal(report: run_report.RunReport | None) -> bool:
    return report is not None and report.terminal


@dataclasses.dataclass
class _Pool:
    """The workers a supervisor keeps running: one that died (killed or crashed) is
    replaced, a paused one is still there."""

    launcher: launcher_module.Launcher
    size: int

    def fill(self) -> None:
        for _ in range(self.size - len(self.launcher.workers.alive())):
            self.launcher.start()


@dataclasses.dataclass
class _Storm:
    """Strikes through the nemesis, each at the moment it strikes (`time:+S.SSs` into the
    storm), each on its own thread: a pause holds its thread until it resumes, the storm
    goes on."""

    nemesis: nemesis.Nemesis
    recorder: recorder_module.Recorder
    rng: random.Random
    counts: dict[str, int]
    lease_s: float
    started: float = dataclasses.field(default_factory=time.monotonic)
    threads: list[threading.Thread] = dataclasses.field(default_factory=list)

    def strike(self, action: str, worker: Any, params: dict[str, Any]) -> history.BoundaryHit:
        point = f"time:+{time.monotonic() - self.started:.2f}s"
        hit = self.recorder.append(
            history.BoundaryHit(
                point=point,
                occurrence=1,
                run_id=None,
                worker_id=worker.worker_id if worker else None,
                pid=worker.pid if worker else None,
            )
        )
        assert isinstance(hit, history.BoundaryHit)
        step = spec.FaultStep(action=action, point=point, params=params)
        thread = threading.Thread(target=self.nemesis.strike, args=(step, hit), daemon=True)
        self.threads.append(thread)
        thread.start()
        self.counts[action] += 1
        return hit

    def restart_postgres(self, outage_s: float) -> None:
        """Postgres down for `outage_s` (the outage itself is the fault); the storm waits
        until it is up again."""
        struck = self.strike(PG_RESTART, None, {"heal_after_s": outage_s}).seq
        self.threads[-1].join()
        deadline = time.monotonic() + outage_s + nemesis.HEAL_WAIT_S
        while time.monotonic() < deadline:
            records = self._faults_since(struck)
            if PG_STARTED in records or records.get(PG_RESTART) is not True:
                return  # up again, or it never went down (recorded not applied)
            time.sleep(0.05)

    def _faults_since(self, seq: int) -> dict[str, bool]:
        """Fault records after `seq`: action -> applied."""
        return {
            event.action: event.ok
            for event in self.recorder.events()
            if isinstance(event, history.FaultApplied) and event.seq > seq
        }

    def calm(self) -> None:
        """Every fault heals before the reckoning: pauses resume, cuts and outages heal."""
        for thread in self.threads:
            thread.join()
        self.nemesis.close()


def _lasting(kind: str, rng: random.Random, lease_s: float) -> dict[str, Any]:
    """How long a fault that heals lasts, seeded (in leases, LASTS_LEASES), as the param of
    its class that says when it ends (`resume_after_s`, `heal_after_s`)."""
    if kind not in LASTS_LEASES:
        return {}
    (name,) = [param for param in spec.CATALOG[kind].params if param.endswith("_after_s")]
    return {name: rng.uniform(*LASTS_LEASES[kind]) * lease_s}


def _storm(storm: _Storm, pool: _Pool, *, storm_s: float, pg_restarts: int) -> None:
    """Seeded faults for `storm_s` seconds; Postgres restarts at evenly spaced moments."""
    rng, lease_s = storm.rng, storm.lease_s
    start = time.monotonic()
    restart_at = [start + storm_s * (i + 1) / (pg_restarts + 1) for i in range(pg_restarts)]
    while time.monotonic() - start < storm_s:
        if restart_at and time.monotonic() >= restart_at[0]:
            restart_at.pop(0)
            storm.restart_postgres(rng.uniform(0.2, 1.0))
        pool.fill()
        alive = pool.launcher.workers.alive()
        kind = rng.choice(FAULT_KINDS)
        if alive:
            worker = rng.choice(alive)
            if not (kind == "pause" and worker.paused):  # a paused worker stays paused
                storm.strike(kind, worker, _lasting(kind, rng, lease_s))
        time.sleep(rng.uniform(0.2, 1.0))  # the storm's pace, from the seed
    for _ in restart_at:  # restarts the storm's pace left for its very end
        storm.restart_postgres(0.0)
    storm.calm()


def _settle(
    engine: Any,
    dsn: str,
    run_ids: dict[str, str],
    pool: _Pool,
    *,
    settle_s: float,
) -> dict[str, run_report.RunReport]:
    """After the storm: wait until every run is terminal (or the settle time is over)."""
    deadline = time.monotonic() + settle_s
    reports: dict[str, run_report.RunReport] = {}
    while True:
        open_runs = [rid for rid in run_ids.values() if not _terminal(reports.get(rid))]
        for run_id in open_runs:
            reports[run_id] = engine.report(dsn, run_id)
        pool.fill()  # a worker that crashed is replaced, as a supervisor would
        if all(_terminal(reports.get(rid)) for rid in run_ids.values()):
            return reports
        if time.monotonic() >= deadline:
            return reports
        time.sleep(0.5)


def _run_history(
    scenario: schema.Scenario,
    run_key: str,
    run_id: str,
    report: run_report.RunReport | None,
    snapshot: world_module.WorldSnapshot,
    engine: str,
) -> history.TrialHistory:
    """The part of the world's ledgers that belongs to one run (its key is in its arguments)."""
    my_keys = {
        (e.tool, e.key)
        for e in snapshot.tools
        if isinstance(e, ledger.ToolRequest) and run_key in json.dumps(e.arguments)
    }

    def mine(entry: ledger.Entry) -> bool:
        if isinstance(entry, ledger.ModelRequest):
            return entry.run_key == run_key
        if isinstance(entry, ledger.ToolQuery):
            return (entry.tool, entry.key) in my_keys
        if isinstance(entry, ledger.ToolRedeploy):  # the world's, so every run's
            return True
        if isinstance(entry, ledger.ReplyDelivery | ledger.ReplyRequest):
            return entry.run_id == run_id
        if isinstance(entry, ledger.ReplyQuery):
            return False
        return run_key in json.dumps(getattr(entry, "arguments", None))

    return history.TrialHistory(
        trial_id=run_key,
        engine=engine,
        scenario=scenario,
        run_key=run_key,
        run_id=run_id,
        model=[e for e in snapshot.model if mine(e)],
        tools=[e for e in snapshot.tools if mine(e)],
        sink=[e for e in snapshot.sink if mine(e)],
        reports=[report] if report else [],
    )
