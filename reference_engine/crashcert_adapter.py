"""The reference engine's in-process adapter (harness/CONTRACT.md, section 5).

The same operations as `python -m reference_engine migrate | submit | status | export`,
as functions the harness can call without starting a Python process for each. Workers
still run as separate processes through the `worker` command. Plain data in and out: the
engine does not import the harness.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from reference_engine import inputs as inputs_module
from reference_engine import report as report_module
from reference_engine import store as store_module


@contextlib.contextmanager
def _store(dsn: str) -> Iterator[store_module.Store]:
    store = store_module.Store(dsn, redact=False, application_name="reference_engine adapter")
    try:
        yield store
    finally:
        store.close()


def migrate(dsn: str) -> None:
    with _store(dsn) as store:
        store.migrate()


def submit(dsn: str, run_input: dict[str, Any]) -> str:
    with _store(dsn) as store:
        run_id, _ = store.create_run(inputs_module.parse(json.dumps(run_input)))
        return run_id


def report(dsn: str, run_id: str) -> dict[str, Any]:
    with _store(dsn) as store:
        return report_module.build(store.load(run_id))


def export(dsn: str, run_id: str) -> dict[str, Any]:
    with _store(dsn) as store:
        return json.loads(json.dumps(store.export(run_id), default=str))
