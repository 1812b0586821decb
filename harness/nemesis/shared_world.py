"""Faults on what every worker shares: the Postgres server, and a worker's wall clock."""

from __future__ import annotations

from harness.contract import boundaries
from harness.faults import spec
from harness.lab import failover as failover_module
from harness.nemesis import strike as strike_module

# clock_skew without offset_s: an hour behind, far beyond any lease. A clock behind makes
# a lease judged by it look live long after the database let it lapse.
DEFAULT_CLOCK_SKEW_S = -3600


class PgRestart(strike_module.Kind):
    """`pg_ctl stop -m immediate` under every connection; heal: start Postgres."""

    def apply(self, strike: strike_module.Strike) -> strike_module.Heal:
        pg = strike.parts.pg
        pg.stop_immediate()
        strike.record("pg_restart", ok=True, note="pg_ctl stop -m immediate")

        def heal() -> None:
            pg.start()
            strike.record("pg_start", ok=True, note="Postgres accepts connections")

        return heal


class ClockSkew(strike_module.Kind):
    """The worker's wall clock jumps by `offset_s` (libfaketime reads its offset file,
    harness/lab/faketime.py) and stays off: nothing heals it."""

    def apply(self, strike: strike_module.Strike) -> None:
        offset = float(strike.step.params.get("offset_s", DEFAULT_CLOCK_SKEW_S))
        worker_id = strike.hit.worker_id
        clocks = strike.parts.clocks
        if clocks is None or not clocks.skew(worker_id, offset):
            raise strike_module.NotApplied("no skewable clock (libfaketime)")
        note = f"wall clock of {worker_id} shifted by {offset:+g}s (monotonic untouched)"
        strike.record(strike.step.action, ok=True, note=note)


class PgFailover(strike_module.Kind):
    """The trial's streaming standby promoted, every link pointed at it, the primary
    stopped hard (harness/lab/failover.py). Asynchronous (`sync=0`): WAL shipping is paused
    at the point's `:before_commit` twin (at the point itself where it has none), so the
    commits acknowledged from then on are lost; the record names them. Nothing heals it."""

    def arm_point(self, step: spec.FaultStep) -> str | None:
        if failover_module.synchronous(step) or step.point not in boundaries.BEFORE_COMMIT:
            return None
        return step.point + boundaries.BEFORE_COMMIT_SUFFIX

    def arm(self, strike: strike_module.Strike) -> None:
        failover = _standby(strike)
        failover.pause_shipping(strike.hit.seq)

    def apply(self, strike: strike_module.Strike) -> None:
        failover = _standby(strike)
        if strike.parts.proxies is None or failover.promoted:
            raise strike_module.NotApplied("no worker proxy to repoint, or already promoted")
        sync = failover_module.synchronous(strike.step)
        if sync != failover.sync:
            raise strike_module.NotApplied("the standby replicates the other way (sync=)")
        if not sync and failover.paused_at is None:
            failover.pause_shipping(strike.hit.seq)
        observed = failover.fail_over()
        strike.parts.proxies.repoint(*failover.address)
        lost = _acknowledged_since(strike, failover.paused_at) if observed["behind"] else []
        observed.update(sync=sync, lost=lost)
        how = "synchronous" if sync else "asynchronous"
        flushed, received = observed["primary_flushed_lsn"], observed["standby_received_lsn"]
        note = (
            f"standby promoted ({how} replication), every link repointed; primary flushed "
            f"{flushed}, standby received {received}"
        )
        if not sync:
            note += "; acknowledged and lost: " + (", ".join(lost) or "nothing")
        strike.record(strike.step.action, ok=True, note=note, observed=observed)


def _standby(strike: strike_module.Strike) -> failover_module.Failover:
    failover = strike.parts.failover
    if failover is None:
        raise strike_module.NotApplied(
            "no standby: pg_failover needs the embedded cluster and Toxiproxy"
        )
    return failover


def _acknowledged_since(strike: strike_module.Strike, seq: int | None) -> list[str]:
    """Commit points reported after WAL shipping paused (the struck one included): the
    engine was told these transitions committed, and the promoted standby never saw them."""
    if seq is None:
        return []
    return [
        f"{hit.point}#{hit.occurrence}"
        for hit in strike.parts.recorder.boundary_hits()
        if seq < hit.seq <= strike.hit.seq
        and boundaries.base_name(hit.point) in boundaries.BEFORE_COMMIT
        and not hit.point.endswith(boundaries.BEFORE_COMMIT_SUFFIX)
    ]
