"""In-process form of migrate/submit/status/export for harnesses written in Python.

Same behaviour as the CLI commands; each call opens and closes its own connection.
"""

from __future__ import annotations

import json
from typing import Any

from reference_engine import inputs
from reference_engine import report as report_module
from reference_engine import store as store_module


def _store(dsn: str) -> store_module.Store:
    return store_module.Store(dsn, application_name="reference_engine adapter")


def migrate(dsn: str) -> list[str]:
    store = _store(dsn)
    try:
        return store.migrate()
    finally:
        store.close()


def submit(dsn: str, run_input: dict[str, Any]) -> str:
    parsed = inputs.parse(json.dumps(run_input))
    store = _store(dsn)
    try:
        return store.create_run(parsed)[0]
    finally:
        store.close()


def report(dsn: str, run_id: str) -> dict[str, Any]:
    store = _store(dsn)
    try:
        return report_module.build(store.load(run_id))
    finally:
        store.close()


def export(dsn: str, run_id: str) -> dict[str, list[dict[str, Any]]]:
    store = _store(dsn)
    try:
        return store.export(run_id)
    finally:
        store.close()
