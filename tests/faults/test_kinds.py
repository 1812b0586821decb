"""Every fault class of the catalog is carried out in exactly one place, and a fault that
cannot strike is recorded as not applied (so plan.applied makes the trial INCONCLUSIVE)."""

from __future__ import annotations

import threading
from typing import Any

from harness import errors
from harness.faults import spec
from harness.nemesis import kinds, nemesis
from harness.record import history, recorder


def test_every_catalog_class_is_carried_out_in_exactly_one_place() -> None:
    places = {
        name: [
            where
            for where, names in (
                ("nemesis", set(kinds.KINDS)),
                ("world", kinds.IN_WORLD),
                ("run", kinds.PER_RUN),
            )
            if name in names
        ]
        for name in spec.CATALOG
    }
    assert {name: where for name, where in places.items() if len(where) != 1} == {}
    assert set(kinds.KINDS) <= set(spec.CATALOG)


def test_the_world_link_kinds_follow_the_catalog() -> None:
    for name, service in spec.LINKS.items():
        kind = kinds.KINDS[name]
        assert getattr(kind, "service", None) == service


class _Workers:
    def __init__(self, worker: Any) -> None:
        self._worker = worker

    def by_pid(self, pid: int | None) -> Any:
        return self._worker if pid == 7 else None

    def by_id(self, worker_id: str | None) -> Any:
        return None


class _Launcher:
    def __init__(self, worker: Any) -> None:
        self.workers = _Workers(worker)


def _nemesis(plan: list[spec.FaultStep], rec: recorder.Recorder, worker: Any) -> nemesis.Nemesis:
    return nemesis.Nemesis(
        plan,
        launcher=_Launcher(worker),  # type: ignore[arg-type]
        recorder=rec,
        proxies=None,  # no Toxiproxy: a link fault cannot strike
        pg=None,  # type: ignore[arg-type]
        lease_s=0.3,
        world_links=None,
    )


def _hit(point: str, pid: int) -> history.BoundaryHit:
    return history.BoundaryHit(point=point, occurrence=1, run_id="r", worker_id="w1", pid=pid)


def test_a_link_fault_without_a_proxy_is_recorded_as_not_applied() -> None:
    rec = recorder.Recorder()
    plan = [spec.parse("db_cut@tool.started#1"), spec.parse("tool_cut@tool.started#1")]
    _nemesis(plan, rec, worker=object()).on_hit(_hit("tool.started", pid=7))
    faults = [e for e in rec.events() if isinstance(e, history.FaultApplied)]
    assert [(f.action, f.ok, f.note) for f in faults] == [
        ("db_cut", False, "no Toxiproxy proxy"),
        ("tool_cut", False, "no Toxiproxy proxy"),
    ]


def test_a_fault_reported_by_a_stranger_is_not_applied() -> None:
    rec = recorder.Recorder()
    _nemesis([spec.parse("kill@tool.started#1")], rec, worker=object()).on_hit(
        _hit("tool.started", pid=99)
    )
    (fault,) = [e for e in rec.events() if isinstance(e, history.FaultApplied)]
    assert (fault.action, fault.ok, fault.note) == ("kill", False, "no worker of ours reported it")


class _Pg:
    def __init__(self) -> None:
        self.stopped = 0

    def stop_immediate(self) -> None:
        self.stopped += 1

    def start(self) -> None:
        self.stopped -= 1


def test_a_shared_server_fault_strikes_without_a_worker_and_a_worker_fault_does_not() -> None:
    # The catalog says which classes strike a shared server (FaultClass.shared): those need
    # no worker of ours, every other class does.
    rec, pg = recorder.Recorder(), _Pg()
    strikes = nemesis.Nemesis(
        [],
        launcher=_Launcher(None),
        recorder=rec,
        proxies=None,
        pg=pg,
        lease_s=60.0,  # type: ignore[arg-type]
    )
    stranger = _hit("time:+1.00s", pid=99)
    strikes.strike(spec.FaultStep(action="pg_restart", point="time:+1.00s"), stranger)
    strikes.strike(spec.FaultStep(action="kill", point="time:+1.00s"), stranger)
    assert pg.stopped == 1
    strikes.close()  # the outage heals
    faults = [(e.action, e.ok) for e in rec.events() if isinstance(e, history.FaultApplied)]
    assert faults == [("pg_restart", True), ("kill", False), ("pg_start", True)]
    assert pg.stopped == 0
    assert spec.SHARED == {"pg_restart", "pg_failover", "server_restart"}
    assert spec.SHARED_ENDINGS == {"pg_start", "server_start"}


class _UpWorker:
    def __init__(self, pid: int) -> None:
        self.pid = self.pgid = pid
        self.worker_id = f"w{pid}"
        self.killed = False

    def kill(self) -> None:
        self.killed = True


class _UpWorkers:
    def __init__(self, workers: list[_UpWorker]) -> None:
        self.list = workers

    def by_pid(self, pid: int | None) -> Any:
        return next((w for w in self.list if w.pid == pid), None)

    def by_id(self, worker_id: str | None) -> Any:
        return None

    def alive(self) -> list[_UpWorker]:
        return [w for w in self.list if not w.killed]


class _UpLauncher:
    """A launcher as the upgrade kind sees it; `next_version` False: the engine names none."""

    def __init__(self, *, next_version: bool, migration_fails: bool = False) -> None:
        self.workers = _UpWorkers([_UpWorker(7), _UpWorker(8)])
        self.next_version, self.migration_fails = next_version, migration_fails
        self.upgraded_on: str | None = None

    def can_upgrade(self) -> bool:
        return self.next_version

    def upgrade(self, dsn: str | None) -> str:
        if self.migration_fails:
            raise errors.CrashcertError("engine x: upgrade migrate exited 1: boom")
        self.upgraded_on = dsn
        return "next version's migration ran"

    def start(self) -> _UpWorker:
        worker = _UpWorker(100 + len(self.workers.list))
        self.workers.list.append(worker)
        return worker


class _UpTools:
    def __init__(self) -> None:
        self.releases: list[str] = []

    def upgrade(self, release: str) -> list[Any]:
        self.releases.append(release)
        return []


def _upgrade(launcher: _UpLauncher, tools: _UpTools) -> list[tuple[str, bool]]:
    rec = recorder.Recorder()
    nemesis.Nemesis(
        [spec.parse("upgrade@tool.returned#1")],
        launcher=launcher,  # type: ignore[arg-type]
        recorder=rec,
        proxies=None,
        pg=None,  # type: ignore[arg-type]
        lease_s=0.3,
        dsn="postgresql://trial",
        world_tools=tools,
    ).on_hit(_hit("tool.returned", pid=7))
    faults = [e for e in rec.events() if isinstance(e, history.FaultApplied)]
    assert all(f.planned == spec.parse("upgrade@tool.returned#1") for f in faults)
    return [(f.action, f.ok) for f in faults]


def test_an_upgrade_kills_version_n_migrates_redeploys_and_restarts_the_pool() -> None:
    launcher, tools = _UpLauncher(next_version=True), _UpTools()
    # The kill is recorded as a kill (the checkers judge the held worker dead), then what
    # the upgrade did.
    assert _upgrade(launcher, tools) == [("kill", True), ("upgraded", True)]
    first, standby, *started = launcher.workers.list
    assert first.killed and standby.killed  # no worker of version N adopts the run
    assert launcher.upgraded_on == "postgresql://trial"
    assert tools.releases == ["next"]
    assert len(started) == 2 and not any(w.killed for w in started)


def test_an_engine_without_a_next_version_is_not_upgraded_nor_killed() -> None:
    launcher, tools = _UpLauncher(next_version=False), _UpTools()
    assert _upgrade(launcher, tools) == [("upgrade", False)]
    assert not any(w.killed for w in launcher.workers.list)
    assert tools.releases == []


def test_a_failed_migration_starts_no_worker_of_either_version() -> None:
    launcher, tools = _UpLauncher(next_version=True, migration_fails=True), _UpTools()
    assert _upgrade(launcher, tools) == [("kill", True), ("upgraded", False)]
    assert len(launcher.workers.list) == 2 and tools.releases == []


class _Process:
    def __init__(self, pid: int) -> None:
        self.pid, self.worker_id = pid, "w1"


class _TwinLauncher:
    """Worker 7 holds the run; `start` makes its twin, pid 8, under the same id."""

    def __init__(self) -> None:
        self.held = _Process(7)
        self.workers = _Workers(self.held)
        self.started: list[str | None] = []

    def start(self, worker_id: str | None = None) -> _Process:
        self.started.append(worker_id)
        return _Process(8)


def test_dup_owner_holds_the_twins_first_move_until_the_held_worker_reported_again() -> None:
    # The control channel records each hit, then runs the policy on that worker's thread.
    rec, launcher = recorder.Recorder(), _TwinLauncher()
    strikes = nemesis.Nemesis(
        [spec.parse("dup_owner@tools.pending#1")],
        launcher=launcher,  # type: ignore[arg-type]
        recorder=rec,
        proxies=None,
        pg=None,  # type: ignore[arg-type]
        lease_s=30.0,  # long: every wait below ends by a hit, never by its timeout
    )

    def report(point: str, pid: int) -> history.BoundaryHit:
        hit = rec.append(_hit(point, pid=pid))
        assert isinstance(hit, history.BoundaryHit)
        return hit

    held = threading.Thread(target=strikes.on_hit, args=(report("tools.pending", 7),))
    held.start()
    report("run.claimed", 8)  # the twin's claim is not its move
    strikes.on_hit(report("tool.started:before_commit", 8))  # nor a COMMIT still to come
    move = report("tool.started", 8)
    seen_by_twin: list[list[history.Event]] = []

    def twin() -> None:
        strikes.on_hit(move)
        seen_by_twin.append(rec.events())

    twin_thread = threading.Thread(target=twin)
    twin_thread.start()
    held.join(timeout=20)
    assert not held.is_alive()  # the held worker went on once the twin moved
    (fault,) = [e for e in rec.events() if isinstance(e, history.FaultApplied)]
    assert (fault.action, fault.ok, launcher.started) == ("dup_owner", True, ["w1"])
    assert "moved first (tool.started" in fault.note
    again = report("tool.returned", 7)
    twin_thread.join(timeout=20)
    assert not twin_thread.is_alive()
    # the twin was answered only once the held worker had reported again
    assert again in seen_by_twin[0]


def test_postgres_back_is_called_once_the_last_stop_of_the_plan_healed() -> None:
    """A trial that restarts Postgres runs alone until this says so (harness/lab/gate.py):
    not while a restart is unhealed, nor while the plan still has one to strike."""
    rec, pg = recorder.Recorder(), _Pg()
    back, started = threading.Event(), threading.Event()
    start = pg.start
    pg.start = lambda: (start(), started.set())  # type: ignore[method-assign]
    plan = [spec.parse("pg_restart@tool.started#1"), spec.parse("pg_restart@tool.started#2")]
    strikes = nemesis.Nemesis(
        plan,
        launcher=_Launcher(None),  # type: ignore[arg-type]
        recorder=rec,
        proxies=None,
        pg=pg,  # type: ignore[arg-type]
        lease_s=0.02,  # a restart heals after a few leases
        postgres_back=back.set,
    )
    strikes.on_hit(_hit("tool.started", pid=7))
    assert pg.stopped == 1 and not back.is_set()
    assert started.wait(5) and pg.stopped == 0  # the first restart healed by its timer
    assert not back.wait(0.1)  # the second restart is still to come
    second = _hit("tool.started", pid=7).model_copy(update={"occurrence": 2})
    strikes.on_hit(second)
    assert pg.stopped == 1
    assert back.wait(5) and pg.stopped == 0
    strikes.close()
