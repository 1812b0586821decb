"""Broken variant of the reference engine: it reads every run's max_attempts as unlimited,
so a run that fails on every attempt is retried for ever instead of dead-lettered.

    python tests/quality/engines/ignore_max_attempts.py worker   (see ignore_max_attempts.yaml)
"""

from __future__ import annotations

import functools
import sys

from reference_engine import cli, sqlfile

_queries = sqlfile.queries
UNLIMITED = "attempts, 1000000 AS max_attempts"


@functools.cache
def queries() -> dict[str, str]:
    patched = dict(_queries())
    # BROKEN: the worker's view of the run never runs out of attempts
    for name in ("load_run", "lock_run", "expired_leases"):
        patched[name] = patched[name].replace("attempts, max_attempts", UNLIMITED)
    patched["claim_run"] = patched["claim_run"].replace("AND attempts < max_attempts", "")
    patched["exhausted_pending"] = patched["exhausted_pending"].replace(
        "attempts >= max_attempts", "false"
    )
    return patched


def install() -> None:
    sqlfile.queries = queries


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
