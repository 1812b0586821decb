"""`python -m reference_engine <command>`: migrate, worker, reconcile, submit, status,
export, cancel, purge, approve, reject. Configuration comes from the environment (config.py).

Startup stays cheap: only `worker` imports the model client (and with it `openai`).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
from typing import Any

from reference_engine import checkpoint as checkpoint_module
from reference_engine import commands, connection, errors, maintenance, migrations, reads
from reference_engine import config as config_module
from reference_engine import inputs as inputs_module
from reference_engine import report as report_module

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="reference_engine", description=__doc__)
    parser.add_argument("--database-url", help="overrides DATABASE_URL")
    parser.add_argument(
        "--release",
        choices=checkpoint_module.RELEASES,
        default="current",
        help="run as this release: `next` is the version the harness's upgrade fault "
        "resumes runs with (checkpoint format 2, migration sql/next/004)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("migrate", help="apply pending schema migrations")
    worker = commands.add_parser("worker", help="claim and run runs until SIGTERM")
    worker.add_argument("--once", action="store_true", help="exit when nothing is claimable")
    reconcile = commands.add_parser("reconcile", help="recover expired leases, apply retention")
    reconcile.add_argument("--once", action="store_true", help="one pass, then exit")
    submit = commands.add_parser("submit", help='store a RunInput; prints {"run_id": ...}')
    submit.add_argument("--input", required=True, help="a RunInput JSON file, or - for stdin")
    for name, helptext in (
        ("status", "print the RunReport JSON"),
        ("export", "print the run's rows from every table"),
        ("cancel", "cancel a run (at once if nobody holds it)"),
        ("purge", "delete a finished run and every record of it (retention)"),
    ):
        commands.add_parser(name, help=helptext).add_argument("run_id")
    for name in ("approve", "reject"):
        decide = commands.add_parser(name, help=f"{name} a tool call awaiting approval")
        decide.add_argument(
            "command_id", help="the engine's tool call id, or with --run the model's"
        )
        decide.add_argument("--run", help="the run whose call (by the model's id) to decide")
    return parser


# Built once, at import: in the fork server for its workers (preload.py), where building it
# in each forked worker cost ~2.5 ms of CPU, most of it copy-on-write faults.
PARSER = _parser()


def _print(value: Any) -> None:
    sys.stdout.write(json.dumps(value, separators=(",", ":"), sort_keys=False) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    args = PARSER.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    try:
        settings = config_module.from_env(database_url=args.database_url)
        checkpoint_module.use_release(args.release)
        return _dispatch(args, settings)
    except errors.ConfigError as error:
        print(f"reference_engine: {error}", file=sys.stderr)
        return EXIT_USAGE
    except errors.EngineError as error:
        print(f"reference_engine: {error}", file=sys.stderr)
        return EXIT_ERROR


def _dispatch(args: argparse.Namespace, settings: config_module.Settings) -> int:
    if args.command == "worker":
        from reference_engine import worker as worker_module  # heavy: openai, httpx

        engine_worker = worker_module.Worker(settings)
        engine_worker.install_signals()
        return engine_worker.run(once=args.once)
    db = connection.Connector(
        settings.database_url, application_name=f"reference_engine {args.command}"
    )
    redact = settings.redact
    try:
        if args.command == "migrate":
            _print({"applied": migrations.migrate(db, release=args.release)})
        elif args.command == "reconcile":
            _reconcile(db, settings, once=args.once)
        elif args.command == "submit":
            text = sys.stdin.read() if args.input == "-" else _read(args.input)
            run_id, created = commands.create_run(db, inputs_module.parse(text), redact=redact)
            _print({"run_id": run_id, "created": created})
        elif args.command == "status":
            _print(report_module.build(reads.load(db, args.run_id)))
        elif args.command == "export":
            _print(reads.export(db, args.run_id))
        elif args.command == "purge":
            _print({"run_id": args.run_id, "result": commands.purge_run(db, args.run_id)})
        elif args.command == "cancel":
            result = commands.request_cancel(db, args.run_id, redact=redact)
            _print({"run_id": args.run_id, "result": result})
        elif args.command in ("approve", "reject"):
            approve = args.command == "approve"
            command_id = args.command_id
            if args.run:
                command_id = commands.command_id_of(db, args.run, command_id)
            result = commands.decide_approval(db, command_id, approve=approve, redact=redact)
            _print({"command_id": args.command_id, "result": result})
    finally:
        db.close()
    return EXIT_OK


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as error:
        raise errors.InvalidInput(f"cannot read {path}: {error}") from None


def _reconcile(db: connection.Connector, settings: config_module.Settings, *, once: bool) -> None:
    stop = threading.Event()
    totals = {"reconciled": 0, "checkpoints_expired": 0}
    while True:
        try:
            changed = maintenance.reconcile(
                db, redact=settings.redact, backoff_ms=settings.backoff_ms
            )
            totals["reconciled"] += len(changed)
            # retention in bounded batches, so one pass never holds locks for long
            while (expired := maintenance.expire_history(db, retention_s=settings.retention_s)) > 0:
                totals["checkpoints_expired"] += expired
                if once:
                    continue
                break
        except (errors.DatabaseUnavailable, errors.RetryableConflict) as error:
            if once:
                raise
            print(f"reference_engine reconcile: {error}", file=sys.stderr)
        if once:
            _print(totals)
            return
        try:
            stop.wait(settings.poll_ms * 10 / 1000.0)
        except KeyboardInterrupt:
            return
