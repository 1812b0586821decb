"""What the fork server imports for the reference engine's workers (reference_engine/preload.py)
must be all that `python -m reference_engine worker` imports before its first step: anything
else is imported, and its pages copied, in every forked worker of every trial."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import json, sys
import reference_engine.preload
before = set(sys.modules)
from reference_engine import cli, worker
args = cli.PARSER.parse_args(["worker"])
from reference_engine import sqlfile
print(json.dumps({
    "imported after": sorted(set(sys.modules) - before),
    "command": args.command,
    "queries parsed": sqlfile.queries.cache_info().currsize,
}))
"""


@pytest.mark.processes
def test_the_worker_command_imports_nothing_the_fork_server_did_not() -> None:
    """In a fresh interpreter: this test process has imported everything already."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    seen = json.loads(done.stdout)
    assert seen == {"imported after": [], "command": "worker", "queries parsed": 1}
