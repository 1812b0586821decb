"""Broken variant of the reference engine: the outcomes of a parallel batch count only once
the whole batch has settled. A claim that finds a batch partly settled (its worker died
between siblings) runs the batch again from its first call, siblings that already
finished included (earendil-works/pi#7053, anthropics/claude-code#31330).

    python tests/quality/engines/rerun_settled_siblings.py worker
    (see rerun_settled_siblings.yaml)
"""

from __future__ import annotations

import collections.abc
import sys

from reference_engine import cli, leases
from reference_engine import state as state_module
from tests.quality.engines import rerun


def settled_siblings(
    run: state_module.RunState, lease: leases.Lease
) -> collections.abc.Iterable[state_module.ToolCall]:
    batch = rerun.current_round(run)
    if all(call.settled for call in batch):
        return []
    # BROKEN: an unfinished batch has no results yet, so its settled siblings run again
    return [call for call in batch if call.settled]


def install() -> None:
    rerun.patch_claims(settled_siblings)


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
