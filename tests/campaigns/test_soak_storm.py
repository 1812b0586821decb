"""The soak's storm strikes through the nemesis, with the catalog's storm classes, each at
a time point of the storm (no real worker or Postgres here: tests/campaigns/test_soak.py)."""

from __future__ import annotations

import random
import time
import types
from typing import Any, cast

from harness import errors
from harness.campaigns import soak
from harness.faults import spec
from harness.nemesis import kinds, nemesis
from harness.record import history, recorder


def test_the_storm_strikes_the_catalogs_storm_classes() -> None:
    assert soak.FAULT_KINDS == spec.STORM == ("kill", "pause", "db_cut")
    assert all(name in kinds.KINDS and name not in spec.SHARED for name in soak.FAULT_KINDS)
    assert soak.PG_RESTART in kinds.KINDS and soak.PG_STARTED == "pg_start"


def test_a_healing_fault_lasts_a_seeded_time_in_its_own_param() -> None:
    rng = random.Random(3)
    pause = soak._lasting("pause", rng, 2.0)
    cut = soak._lasting("db_cut", rng, 2.0)
    assert set(pause) == {"resume_after_s"} and 3.0 <= pause["resume_after_s"] <= 6.0
    assert set(cut) == {"heal_after_s"} and 1.0 <= cut["heal_after_s"] <= 4.0
    assert soak._lasting("kill", rng, 2.0) == {}


class _Nemesis:
    def __init__(self) -> None:
        self.struck: list[tuple[spec.FaultStep, history.BoundaryHit]] = []

    def strike(self, step: spec.FaultStep, hit: history.BoundaryHit) -> None:
        self.struck.append((step, hit))


def test_a_strike_is_recorded_at_its_moment_and_carried_out_by_the_nemesis() -> None:
    rec, fake = recorder.Recorder(), _Nemesis()
    storm = soak._Storm(cast(Any, fake), rec, random.Random(0), {"kill": 0}, lease_s=1.0)
    worker = types.SimpleNamespace(worker_id="w-2", pid=4242)
    hit = storm.strike("kill", worker, {})
    storm.calm = lambda: None  # type: ignore[method-assign]
    for thread in storm.threads:
        thread.join()
    ((step, given),) = fake.struck
    assert given == hit and rec.boundary_hits() == [hit]
    assert (hit.worker_id, hit.pid, hit.stands_for) == ("w-2", 4242, None)
    assert hit.point.startswith("time:+") and step.point == hit.point
    assert (step.action, step.params) == ("kill", {})
    assert storm.counts == {"kill": 1}


def _no(_: object) -> None:
    return None


class _Pg:
    def __init__(self) -> None:
        self.up = True

    def stop_immediate(self) -> None:
        self.up = False

    def start(self) -> None:
        self.up = True


def test_a_postgres_restart_returns_once_postgres_is_up_again() -> None:
    rec, pg = recorder.Recorder(), _Pg()
    nobody = types.SimpleNamespace(workers=types.SimpleNamespace(by_pid=_no, by_id=_no))
    real = nemesis.Nemesis(
        [], launcher=cast(Any, nobody), recorder=rec, proxies=None, pg=cast(Any, pg), lease_s=60.0
    )
    storm = soak._Storm(real, rec, random.Random(0), {"pg_restart": 0}, lease_s=60.0)
    storm.restart_postgres(0.05)
    assert pg.up
    faults = [e.action for e in rec.events() if isinstance(e, history.FaultApplied)]
    assert faults == ["pg_restart", "pg_start"]
    assert storm.counts == {"pg_restart": 1}


def test_a_postgres_restart_that_failed_is_not_waited_for() -> None:
    rec = recorder.Recorder()
    nobody = types.SimpleNamespace(workers=types.SimpleNamespace(by_pid=_no, by_id=_no))
    real = nemesis.Nemesis(
        [], launcher=cast(Any, nobody), recorder=rec, proxies=None, pg=cast(Any, _Broken()),
        lease_s=60.0,
    )  # fmt: skip
    storm = soak._Storm(real, rec, random.Random(0), {"pg_restart": 0}, lease_s=60.0)
    started = time.monotonic()
    storm.restart_postgres(0.05)
    assert time.monotonic() - started < 5.0
    (fault,) = [e for e in rec.events() if isinstance(e, history.FaultApplied)]
    assert (fault.action, fault.ok) == ("pg_restart", False)


class _Broken:
    def stop_immediate(self) -> None:
        raise errors.CrashcertError("pg_ctl failed")
