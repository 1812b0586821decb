"""The one list of the faults the nemesis carries out, by catalog class (harness/faults/spec.py).

Every class of the catalog is carried out in exactly one place: here (a worker held at a
boundary), in the world (`response_lost`, `stream_cut`: the world answers, so the world
breaks the answer, harness/nemesis/world_trigger.py), or by the runner once per run
(`submit_twice`, harness/record/resubmit.py). tests/faults/test_kinds.py holds them to it.
"""

from __future__ import annotations

from harness.faults import spec
from harness.nemesis import links, process, shared_world, strike
from harness.nemesis import store as store_kinds
from harness.nemesis import upgrade as upgrade_kinds

KINDS: dict[str, strike.FaultKind] = {
    "kill": process.Kill(),
    "term": process.Term(),
    "dup_owner": process.DupOwner(),
    "upgrade": upgrade_kinds.Upgrade(),
    "pause": process.Pause(),
    "db_cut": links.DbCut(),
    "commit_lost": links.HeldCommit("downstream"),
    "commit_dropped": links.HeldCommit("upstream"),
    "latency": links.Latency(),
    "pg_restart": shared_world.PgRestart(),
    "pg_failover": shared_world.PgFailover(),
    "clock_skew": shared_world.ClockSkew(),
    **links.world_links(),
    "store_cut": store_kinds.StoreCut(),
    "store_response_lost": store_kinds.StoreResponseLost(),
    "server_restart": store_kinds.ServerRestart(),
}

# Classes carried out elsewhere, and where.
IN_WORLD = spec.IN_WORLD
PER_RUN = frozenset(name for name, fault in spec.CATALOG.items() if fault.per_run)
