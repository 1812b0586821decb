"""Faults on what every worker shares: the Postgres server, and a worker's wall clock."""

from __future__ import annotations

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
