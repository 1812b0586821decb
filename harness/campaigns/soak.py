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
from harness.lab import database_links, shared
from harness.lab import launcher as launcher_module
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
FAULT_KINDS = ("kill", "pause", "db_cut")
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
    try:
        run_ids = {key: engine.submit(dsn, runner.build_input(scenario, key)) for key in keys}
        for _ in range(workers):
            launcher.start()
        _storm(
            lab,
            launcher,
            proxies,
            rng,
            counts,
            storm_s=storm_s,
            pg_restarts=pg_restarts,
            lease_s=engine.lease_ms / 1000.0,
        )
        reports = _settle(engine, dsn, run_ids, launcher, settle_s=settle_s)
    finally:
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


def _storm(
    lab: shared.Lab,
    launcher: launcher_module.Launcher,
    proxies: Any,
    rng: random.Random,
    counts: dict[str, int],
    *,
    storm_s: float,
    pg_restarts: int,
    lease_s: float,
) -> None:
    """Seeded faults for `storm_s` seconds; Postgres restarts at evenly spaced moments."""
    start = time.monotonic()
    restart_at = [start + storm_s * (i + 1) / (pg_restarts + 1) for i in range(pg_restarts)]
    heals: list[threading.Timer] = []
    while time.monotonic() - start < storm_s:
        if restart_at and time.monotonic() >= restart_at[0]:
            restart_at.pop(0)
            lab.pg.stop_immediate()
            counts["pg_restart"] += 1
            time.sleep(rng.uniform(0.2, 1.0))  # the outage itself is the fault
            lab.pg.start()
        alive = launcher.workers.alive()
        kind = rng.choice(FAULT_KINDS)
        if alive:
            worker = rng.choice(alive)
            if kind == "kill":
                worker.kill()
                launcher.start()
            elif kind == "pause" and not worker.paused:
                worker.pause()
                heals.append(_later(rng.uniform(1.5, 3.0) * lease_s, worker.resume))
            elif kind == "db_cut" and worker.worker_id in proxies.by_worker:
                proxy = proxies.by_worker[worker.worker_id]
                proxy.disable()
                heals.append(_later(rng.uniform(0.5, 2.0) * lease_s, proxy.enable))
            counts[kind] += 1
        time.sleep(rng.uniform(0.2, 1.0))  # the storm's pace, from the seed
    for _ in restart_at:  # restarts the storm's pace left for its very end
        lab.pg.stop_immediate()
        counts["pg_restart"] += 1
        lab.pg.start()
    for timer in heals:  # every fault heals before the reckoning
        timer.join()
    for worker in launcher.workers.alive():
        if worker.paused:
            worker.resume()


def _later(delay_s: float, action: Any) -> threading.Timer:
    timer = threading.Timer(delay_s, action)
    timer.daemon = True
    timer.start()
    return timer


def _settle(
    engine: Any,
    dsn: str,
    run_ids: dict[str, str],
    launcher: launcher_module.Launcher,
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
        runner._restart_crashed_workers(launcher)
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
