"""A streaming standby of an embedded cluster, and what a failover reads off both servers.

`pg_failover` (harness/lab/failover.py) needs a second server that a promotion can make
the primary: the same binaries, filled by `pg_basebackup` from the primary, run as the same
unprivileged account on a private directory and a free port, fsync on. A base backup copies
the roles, so the superuser's password is the primary's; it reaches pg_basebackup and the
walreceiver through a 0600 passfile in the standby's private directory, never a command
line. The initdb default pg_hba.conf already admits replication over SCRAM on loopback.

The standby streams through an address the caller gives (a Toxiproxy proxy), so the lab
can pause WAL shipping without touching either server: what the primary acknowledged
after that is on the primary alone, which an asynchronous failover then loses.
"""

from __future__ import annotations

import os
import pathlib
import tempfile
import time

from harness import errors
from harness.lab.postgres import admin, embedded, server

APPLICATION_NAME = "crashcert_standby"
STREAMING_TIMEOUT_S = 30
CATCH_UP_TIMEOUT_S = 10
BASEBACKUP_TIMEOUT_S = 120
PASSFILE = "replication.pgpass"
POLL_S = 0.02

_REPLICA = "SELECT count(*) FROM pg_stat_replication WHERE application_name = %s AND "
_STREAMING = _REPLICA + "state = 'streaming'"
_SYNC = _REPLICA + "sync_state = 'sync'"
_CAUGHT_UP = _REPLICA + "flush_lsn >= %s::pg_lsn"
_FLUSHED = "SELECT pg_current_wal_flush_lsn()::text"
_RECEIVED = "SELECT coalesce(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::text"


def create(
    primary: embedded.EmbeddedServer, *, upstream: tuple[str, int]
) -> embedded.EmbeddedServer:
    """A hot standby of `primary`, streaming from `upstream` (host, port) and started; the
    caller closes it. Raises EnvironmentProblem when it cannot be made."""
    account = primary._account
    root = pathlib.Path(tempfile.mkdtemp(prefix="crashcert-standby-"))
    root.chmod(0o700)
    if account is not None:
        os.chown(root, account.uid, account.gid)
    standby = embedded.EmbeddedServer(
        bindir=primary._bindir, account=account, root=root, password=primary._password
    )
    try:
        standby._start_watchdog()
        passfile = root / PASSFILE
        standby._write_private(passfile, f"*:*:*:{server.SUPERUSER}:{primary._password}\n")
        backup = [
            str(primary._bindir / "pg_basebackup"),
            "-D",
            str(standby.datadir),
            "-d",
            _conninfo(primary.host, primary.port, passfile),
            "-X",
            "stream",
            "-c",
            "fast",
            "--no-password",
        ]
        result = standby._run(backup, timeout_s=BASEBACKUP_TIMEOUT_S)
        if result.returncode != 0:
            raise errors.EnvironmentProblem(
                f"pg_basebackup failed ({result.returncode}): {result.stdout[-2000:]}"
            )
        # ALTER SYSTEM settings of the primary (a synchronous standby's name) are not the
        # standby's: promoted, it would wait for a standby of its own forever.
        with open(standby.datadir / "postgresql.auto.conf", "w") as auto:
            auto.write("# crashcert standby: no ALTER SYSTEM settings of the primary\n")
        standby._write_private(standby.datadir / "standby.signal", "")
        host, port = upstream
        conninfo = _conninfo(host, port, passfile) + f" application_name={APPLICATION_NAME}"
        standby._configure(
            {
                "primary_conninfo": f"'{conninfo}'",
                "hot_standby": "on",
                "synchronous_standby_names": "''",
                "wal_receiver_status_interval": "1s",
            }
        )
        standby._first_start()
        _wait(primary.dsn, _STREAMING, (APPLICATION_NAME,), STREAMING_TIMEOUT_S, "streaming")
    except BaseException:
        standby.close()
        raise
    return standby


def require_sync(primary: server.Server, *, on: bool) -> None:
    """Synchronous replication to the standby (every COMMIT waits for its flush there), or
    none; `on` returns once the standby is the synchronous one."""
    with admin.connect(primary.dsn) as conn:
        if on:
            conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{APPLICATION_NAME}'")
        else:
            conn.execute("ALTER SYSTEM RESET synchronous_standby_names")
        conn.execute("SELECT pg_reload_conf()")
    if on:
        _wait(primary.dsn, _SYNC, (APPLICATION_NAME,), STREAMING_TIMEOUT_S, "synchronous")


def flushed(primary: server.Server) -> str:
    """The primary's WAL flush position: what it acknowledged is at or before it."""
    return str(_one(primary.dsn, _FLUSHED, ()))


def wait_caught_up(primary: server.Server, lsn: str) -> None:
    """Until the standby flushed the primary's WAL up to `lsn`."""
    _wait(primary.dsn, _CAUGHT_UP, (APPLICATION_NAME, lsn), CATCH_UP_TIMEOUT_S, f"at {lsn}")


def received(standby: server.Server) -> str:
    """The standby's last WAL received (what a promotion replays to)."""
    return str(_one(standby.dsn, _RECEIVED, ()))


def behind(received_lsn: str, flushed_lsn: str) -> bool:
    """Whether the primary had flushed WAL the standby never received."""
    return flushed_lsn != received_lsn and bool(_lsn(flushed_lsn) > _lsn(received_lsn))


def _lsn(text: str) -> int:
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) + int(low, 16)


def _conninfo(host: str, port: int, passfile: pathlib.Path) -> str:
    return f"host={host} port={port} user={server.SUPERUSER} passfile={passfile}"


def _one(dsn: str, query: str, params: tuple[object, ...]) -> object:
    with admin.connect(dsn) as conn:
        row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


def _wait(dsn: str, query: str, params: tuple[object, ...], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _one(dsn, query, params):
            return
        time.sleep(POLL_S)
    raise errors.EnvironmentProblem(f"the standby was not {what} within {timeout_s:.0f} s")
