"""In-process form of migrate/submit/status/export (and the operator commands approve,
reject, cancel) for harnesses written in Python.

Same behaviour as the CLI commands; each call opens and closes its own connection.
"""

from __future__ import annotations

import json
from typing import Any

from reference_engine import commands, connection, inputs, migrations, reads
from reference_engine import report as report_module


def _connect(dsn: str) -> connection.Connector:
    return connection.Connector(dsn, application_name="reference_engine adapter")


def migrate(dsn: str) -> list[str]:
    db = _connect(dsn)
    try:
        return migrations.migrate(db)
    finally:
        db.close()


def submit(dsn: str, run_input: dict[str, Any]) -> str:
    parsed = inputs.parse(json.dumps(run_input))
    db = _connect(dsn)
    try:
        return commands.create_run(db, parsed)[0]
    finally:
        db.close()


def report(dsn: str, run_id: str) -> dict[str, Any]:
    db = _connect(dsn)
    try:
        return report_module.build(reads.load(db, run_id))
    finally:
        db.close()


def export(dsn: str, run_id: str) -> dict[str, list[dict[str, Any]]]:
    db = _connect(dsn)
    try:
        return reads.export(db, run_id)
    finally:
        db.close()


def approve(dsn: str, run_id: str, tool_call_id: str) -> str:
    return _decide(dsn, run_id, tool_call_id, approve=True)


def reject(dsn: str, run_id: str, tool_call_id: str) -> str:
    return _decide(dsn, run_id, tool_call_id, approve=False)


def _decide(dsn: str, run_id: str, tool_call_id: str, *, approve: bool) -> str:
    db = _connect(dsn)
    try:
        command_id = commands.command_id_of(db, run_id, tool_call_id)
        return commands.decide_approval(db, command_id, approve=approve)
    finally:
        db.close()


def cancel(dsn: str, run_id: str) -> str:
    db = _connect(dsn)
    try:
        return commands.request_cancel(db, run_id)
    finally:
        db.close()
