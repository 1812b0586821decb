"""Broken variant of the reference engine: a repeated submit is taken for a new request.
When a run with the submitted run key exists, it creates a second run (under a fresh
internal key) instead of answering the run it has: a client retry after a lost
acknowledgement runs the whole agent again, and replies again (issue 15, submit_twice).

Only submit is broken; the workers are the reference engine's. The harness calls submit
in process (python_adapter below), so it is a function of this module, not a patch of
reference_engine (the reference engine's adapter shares the harness's process).

    python tests/quality/engines/second_run_on_resubmit.py submit --input -   (the CLI form)
"""

from __future__ import annotations

import json
import sys
import uuid
from typing import Any

from reference_engine import adapter, cli, commands, connection, inputs

migrate = adapter.migrate
report = adapter.report
export = adapter.export


def create_run(
    db: connection.Connector, run_input: inputs.RunInput, *, redact: bool = False
) -> tuple[str, bool]:
    run_id, created = _create_run(db, run_input, redact=redact)
    if created:
        return run_id, created
    # BROKEN: the key is known, yet the repeated submit becomes a run of its own
    fresh = run_input.model_copy(update={"run_key": f"{run_input.run_key}.{uuid.uuid4().hex[:8]}"})
    return _create_run(db, fresh, redact=redact)


_create_run = commands.create_run


def submit(dsn: str, run_input: dict[str, Any]) -> str:
    db = connection.Connector(dsn, application_name="second_run_on_resubmit adapter")
    try:
        return create_run(db, inputs.parse(json.dumps(run_input)))[0]
    finally:
        db.close()


def install() -> None:
    commands.create_run = create_run


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
