"""In-process form of migrate/submit/status/export (and the operator commands approve,
reject, cancel) for harnesses written in Python.

Same behaviour as the CLI commands. A harness asks many times per run (submit, a report
now and then, the export), so each database keeps one connection across calls (a new SCRAM
connection costs ~9 ms of both sides' CPU) until `forget(dsn)`; a call that loses it
reconnects on the next one, as the worker does. Calls on one database take turns.
"""

from __future__ import annotations

import collections.abc
import contextlib
import json
import threading
from typing import Any

from reference_engine import commands, connection, errors, inputs, migrations, reads
from reference_engine import report as report_module

_kept: dict[str, tuple[connection.Connector, threading.Lock]] = {}
_kept_lock = threading.Lock()


@contextlib.contextmanager
def _connect(dsn: str) -> collections.abc.Iterator[connection.Connector]:
    with _kept_lock:
        if dsn not in _kept:
            db = connection.Connector(dsn, application_name="reference_engine adapter")
            _kept[dsn] = (db, threading.Lock())
        db, turn = _kept[dsn]
    with turn:
        try:
            yield db
        except BaseException:
            db.close()  # its state is unknown after a failure: the next call reconnects
            raise


def forget(dsn: str) -> None:
    """Close the connection kept for `dsn` (the harness is done with that database)."""
    with _kept_lock:
        kept = _kept.pop(dsn, None)
    if kept is not None:
        db, turn = kept
        with turn:
            db.close()


def migrate(dsn: str) -> list[str]:
    db = connection.Connector(dsn, application_name="reference_engine adapter")
    try:
        return migrations.migrate(db)
    finally:
        db.close()


def submit(dsn: str, run_input: dict[str, Any]) -> str:
    parsed = inputs.parse(json.dumps(run_input))
    with _connect(dsn) as db:
        return commands.create_run(db, parsed)[0]


def _read(dsn: str, read: collections.abc.Callable[[connection.Connector], Any]) -> Any:
    """A read on the kept connection, asked once more on a fresh one when the kept one had
    died (a restarted server): a database that is up answers, one that is down still fails."""
    try:
        with _connect(dsn) as db:
            return read(db)
    except errors.DatabaseUnavailable:
        with _connect(dsn) as db:
            return read(db)


def report(dsn: str, run_id: str) -> dict[str, Any]:
    return _read(dsn, lambda db: report_module.build(reads.load(db, run_id)))


def export(dsn: str, run_id: str) -> dict[str, list[dict[str, Any]]]:
    return _read(dsn, lambda db: reads.export(db, run_id))


def approve(dsn: str, run_id: str, tool_call_id: str) -> str:
    return _decide(dsn, run_id, tool_call_id, approve=True)


def reject(dsn: str, run_id: str, tool_call_id: str) -> str:
    return _decide(dsn, run_id, tool_call_id, approve=False)


def _decide(dsn: str, run_id: str, tool_call_id: str, *, approve: bool) -> str:
    with _connect(dsn) as db:
        command_id = commands.command_id_of(db, run_id, tool_call_id)
        return commands.decide_approval(db, command_id, approve=approve)


def cancel(dsn: str, run_id: str) -> str:
    with _connect(dsn) as db:
        return commands.request_cancel(db, run_id)
