"""A throwaway PostgreSQL cluster the harness creates, crashes, restarts and removes.

Layout: one private directory (mkdtemp, mode 0700, owned by the server account) holding
`data/` (the cluster), `postgres.log` and the Unix socket. TCP on 127.0.0.1, a free port,
fsync on: the nemesis crashes this server and committed data must survive like it would in
production. Every connection, TCP or socket, needs a password (SCRAM-SHA-256): any local user
can reach the loopback port, and a superuser can run programs as the server account (COPY ...
TO PROGRAM). The password is random per cluster, lives in this process and in the DSNs it
hands out; the cluster stores only its verifier (scram.py: one iteration, enough for a random
password), which reaches initdb through a 0600 file in the private directory, deleted at once.

Cleanup is certain: `close()` at the end of `with`, at exit and on SIGTERM/SIGHUP (reaper);
Ctrl-C unwinds `with` blocks as KeyboardInterrupt. pg_ctl starts the postmaster in its own
session, so a terminal's Ctrl-C never reaches Postgres directly.

If the harness is SIGKILLed, nothing in it runs; a watchdog process (watchdog.py, one per
cluster, started before initdb) holds the read end of a pipe only the harness can write to.
When the pipe reaches EOF without a `disarm`, the watchdog runs `pg_ctl stop -m immediate`
(SIGKILL by PID as a fallback) and removes the directory, within about a second. Caveats:
a harness that fork()s without exec shares the pipe, so the watchdog waits for those children
too; a SIGKILLed watchdog protects nothing (its session keeps it away from group signals).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

from harness import errors
from harness.lab import reaper
from harness.lab.postgres import accounts, admin, binaries, dsn, pristine, scram, server

HOST = "127.0.0.1"
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30
INITDB_TIMEOUT_S = 120
PORT_ATTEMPTS = 3
LOG_TAIL_CHARS = 2000
AUTH_METHOD = "scram-sha-256"
PASSWORD_BYTES = 32  # secrets.token_urlsafe: about 43 characters, none that need quoting
PWFILE_NAME = "superuser.pwfile"
POLL_S = 0.005  # waiting for a start, stop or promotion: pg_ctl itself looks every 100 ms

# Quick but durable-correct: fsync, synchronous_commit and full_page_writes stay on; what is
# turned down only costs memory or background work, never durability.
DEFAULT_SETTINGS: dict[str, str] = {
    "listen_addresses": f"'{HOST}'",
    "max_connections": "200",
    "shared_buffers": "32MB",
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "max_wal_size": "1GB",
    "autovacuum": "off",
    # Dynamic shared memory as files inside the data directory: nothing left in /dev/shm.
    "dynamic_shared_memory_type": "mmap",
    "logging_collector": "off",
    "log_min_messages": "warning",
    "timezone": "'UTC'",
}


class EmbeddedServer:
    """A cluster in a private temporary directory. Use `create()`; then `close()` it."""

    def __init__(
        self,
        *,
        bindir: pathlib.Path,
        account: accounts.Account | None,
        root: pathlib.Path,
        password: str | None = None,  # a standby's: the primary's, copied with its roles
    ) -> None:
        self._bindir = bindir
        self._account = account
        self.root = root
        self.datadir = root / "data"
        self.log_path = root / "postgres.log"
        self._port = 0
        self._password = password or secrets.token_urlsafe(PASSWORD_BYTES)
        self._closed = False
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._watchdog_fd: int | None = None
        self._reaper_key = reaper.register(self.close)

    # -- Server protocol -------------------------------------------------------------------

    @property
    def host(self) -> str:
        return HOST

    @property
    def port(self) -> int:
        return self._port

    @property
    def dsn(self) -> str:
        return self.database_dsn(server.ADMIN_DATABASE)

    def database_dsn(self, name: str) -> str:
        return dsn.make(
            host=HOST,
            port=self._port,
            dbname=name,
            user=server.SUPERUSER,
            password=self._password,
        )

    def stop_immediate(self) -> None:
        """`pg_ctl stop -m immediate`: backends die without a checkpoint, like a crash."""
        if not self.is_running():
            raise errors.CrashcertError(f"cannot stop PostgreSQL at {self.root}: not running")
        result = self._pg_ctl("stop", "-m", "immediate", wait=False, timeout_s=STOP_TIMEOUT_S)
        if result.returncode != 0 or not self._poll(lambda: not self.is_running(), STOP_TIMEOUT_S):
            raise errors.EnvironmentProblem(
                f"pg_ctl stop -m immediate failed ({result.returncode}): {result.stdout}"
                f"{self._log_tail()}"
            )

    def start(self) -> None:
        """Start on the same port and data directory; return when it accepts connections."""
        if self._closed:
            raise errors.CrashcertError("cannot start a closed embedded PostgreSQL")
        if self.is_running():
            return
        args = ["-l", str(self.log_path), "-t", str(START_TIMEOUT_S), "-o", f"-p {self._port}"]
        starter = subprocess.Popen(self._pg_ctl_command("start", *args, wait=True), **self._spawn)
        # pg_ctl -w looks every 100 ms; a connection answers the moment the server is up.
        # pg_ctl still tells a start that failed (a taken port) from one not yet done.
        deadline = time.monotonic() + START_TIMEOUT_S
        while not admin.accepts_connections(self.dsn):
            returncode = starter.poll()
            if (returncode not in (None, 0)) or time.monotonic() > deadline:
                output = starter.communicate()[0] if returncode is not None else ""
                starter.kill()
                raise errors.EnvironmentProblem(
                    f"PostgreSQL did not start on {HOST}:{self._port} (pg_ctl exit "
                    f"{returncode}): {output.strip()}{self._log_tail()}"
                )
            time.sleep(POLL_S)
        threading.Thread(target=starter.communicate, daemon=True).start()  # reaps pg_ctl

    def promote(self) -> None:
        """`pg_ctl promote`: a standby ends recovery and takes writes (standby.py); returns
        once it does."""
        with admin.connect(self.dsn) as conn:
            result = self._pg_ctl("promote", wait=False, timeout_s=STOP_TIMEOUT_S)
            promoted = result.returncode == 0 and self._poll(
                lambda: conn.execute("SELECT NOT pg_is_in_recovery()").fetchone() == (True,),
                START_TIMEOUT_S,
            )
        if not promoted:
            raise errors.EnvironmentProblem(
                f"pg_ctl promote failed ({result.returncode}): {result.stdout}{self._log_tail()}"
            )

    def is_running(self) -> bool:
        pid = self.postmaster_pid()
        return pid is not None and _alive(pid)

    def close(self) -> None:
        """Stop (immediately: the data is thrown away), remove the directory, end the watchdog.

        Idempotent and safe to run again from a signal handler part-way through.
        """
        if self._closed:
            return
        if self.datadir.exists():
            self._kill_postmaster()
        shutil.rmtree(self.root, ignore_errors=True)
        self._disarm_watchdog()
        reaper.unregister(self._reaper_key)
        self._closed = True

    # -- details ---------------------------------------------------------------------------

    @property
    def watchdog_pid(self) -> int | None:
        return None if self._watchdog is None else self._watchdog.pid

    def postmaster_pid(self) -> int | None:
        """PID from postmaster.pid, if the file is there (it outlives a SIGKILLed postmaster)."""
        try:
            with open(self.datadir / "postmaster.pid") as f:
                return int(f.readline().strip())
        except (OSError, ValueError):
            return None

    def _initdb_args(self) -> list[str]:
        return [
            "-U",
            server.SUPERUSER,
            f"--auth-local={AUTH_METHOD}",
            f"--auth-host={AUTH_METHOD}",
            "-E",
            "UTF8",
            "--locale=C",
        ]

    def _make_datadir(self) -> None:
        """A copy of the machine's pristine data directory with a password of its own, or
        initdb (kept as the pristine copy for the next cluster) when there is none."""
        cache_key = pristine.key(self._bindir, self._initdb_args())
        owner = None if self._account is None else (self._account.uid, self._account.gid)
        if pristine.copy_into(self.datadir, cache_key, owner=owner):
            self._set_password()
            return
        self._initdb()
        pristine.keep(self.datadir, cache_key)

    def _initdb(self) -> None:
        pwfile = self.root / PWFILE_NAME
        self._write_private(pwfile, scram.verifier(self._password) + "\n")
        cmd = [
            str(self._bindir / "initdb"),
            "-D",
            str(self.datadir),
            f"--pwfile={pwfile}",
            *self._initdb_args(),
        ]
        try:
            result = self._run(cmd, timeout_s=INITDB_TIMEOUT_S)
        finally:
            pwfile.unlink(missing_ok=True)
        if result.returncode != 0:
            raise errors.EnvironmentProblem(f"initdb failed ({result.returncode}): {result.stdout}")

    def _set_password(self) -> None:
        """This cluster's own superuser password, set in single-user mode (no listener, no
        authentication) before the server first starts; the statement goes on stdin, never
        on a command line."""
        statement = f"ALTER ROLE {server.SUPERUSER} PASSWORD '{scram.verifier(self._password)}'\n"
        # exit_on_error: a failed statement ends the backend with a non-zero code.
        cmd = [str(self._bindir / "postgres"), "--single", "-c", "exit_on_error=on"]
        cmd += ["-D", str(self.datadir), "postgres"]
        result = self._run(cmd, timeout_s=INITDB_TIMEOUT_S, stdin=statement)
        if result.returncode != 0:
            raise errors.EnvironmentProblem(
                f"setting the copied cluster's password failed ({result.returncode}): "
                f"{result.stdout[-LOG_TAIL_CHARS:]}"
            )

    def _write_private(self, path: pathlib.Path, text: str) -> None:
        """A new file only its owner reads: the server account, which must read it."""
        # O_EXCL: never write into a file (or through a link) someone else put there first.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            if self._account is not None:
                os.fchown(fd, self._account.uid, self._account.gid)
            os.write(fd, text.encode())
        finally:
            os.close(fd)

    def _configure(self, settings: dict[str, str]) -> None:
        merged = {**DEFAULT_SETTINGS, "unix_socket_directories": f"'{self.root}'", **settings}
        lines = ["", "# crashcert embedded cluster"]
        lines += [f"{key} = {value}" for key, value in merged.items()]
        # Appending keeps the file's owner (the server account) even when we are root.
        with open(self.datadir / "postgresql.conf", "a") as f:
            f.write("\n".join(lines) + "\n")

    def _first_start(self) -> None:
        """Start on a free port; another process may grab it first, so try a few."""
        for attempt in range(PORT_ATTEMPTS):
            self._port = free_port()
            try:
                self.start()
                return
            except errors.EnvironmentProblem:
                if attempt == PORT_ATTEMPTS - 1 or not port_taken(self._port):
                    raise

    def _pg_ctl(
        self, *args: str, timeout_s: float, wait: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return self._run(self._pg_ctl_command(*args, wait=wait), timeout_s=timeout_s)

    def _pg_ctl_command(self, *args: str, wait: bool) -> list[str]:
        flag = "-w" if wait else "-W"
        return [
            str(self._bindir / "pg_ctl"),
            args[0],
            "-D",
            str(self.datadir),
            flag,
            "-s",
            *args[1:],
        ]

    @property
    def _spawn(self) -> dict[str, Any]:
        """How pg_ctl and initdb run: as the server account, in a clean environment."""
        return {
            "stdin": subprocess.DEVNULL,
            "stdout": subprocess.PIPE,
            "stderr": subprocess.STDOUT,
            "text": True,
            "cwd": self.root,
            "env": _server_env(),
            **accounts.run_kwargs(self._account),
        }

    @staticmethod
    def _poll(done: Callable[[], bool], timeout_s: float) -> bool:
        """Whether `done()` came true within `timeout_s`, asked every POLL_S."""
        deadline = time.monotonic() + timeout_s
        while not done():
            if time.monotonic() > deadline:
                return False
            time.sleep(POLL_S)
        return True

    def _run(
        self, cmd: list[str], *, timeout_s: float, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        spawn = self._spawn
        if stdin is not None:
            spawn["stdin"] = None  # run() makes it a pipe for `input`
        try:
            return subprocess.run(cmd, input=stdin, timeout=timeout_s, check=False, **spawn)
        except subprocess.TimeoutExpired as exc:
            raise errors.EnvironmentProblem(
                f"{pathlib.Path(cmd[0]).name} did not finish within {timeout_s:.0f} s"
            ) from exc

    def _kill_postmaster(self) -> None:
        pid = self.postmaster_pid()
        if pid is None or not _alive(pid):
            return
        with contextlib.suppress(errors.CrashcertError):
            self._pg_ctl("stop", "-m", "immediate", wait=False, timeout_s=STOP_TIMEOUT_S)
        if self._poll(lambda: not _alive(pid), STOP_TIMEOUT_S):
            return
        # pg_ctl failed us: kill the postmaster and its backends by PID.
        with contextlib.suppress(psutil.Error):
            postmaster = psutil.Process(pid)
            victims = [postmaster, *postmaster.children(recursive=True)]
            for proc in victims:
                with contextlib.suppress(psutil.Error):
                    proc.kill()
            psutil.wait_procs(victims, timeout=STOP_TIMEOUT_S)

    def _start_watchdog(self) -> None:
        read_fd, write_fd = os.pipe()  # both close-on-exec: no other child inherits them
        cmd = [
            sys.executable,
            "-I",
            "-S",
            str(pathlib.Path(__file__).with_name("watchdog.py")),
            "--fd",
            str(read_fd),
            "--pg-ctl",
            str(self._bindir / "pg_ctl"),
            "--datadir",
            str(self.datadir),
            "--remove",
            str(self.root),
        ]
        if self._account is not None:
            cmd += ["--uid", str(self._account.uid), "--gid", str(self._account.gid)]
        try:
            self._watchdog = subprocess.Popen(
                cmd,
                pass_fds=(read_fd,),
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                cwd="/",
            )
        finally:
            os.close(read_fd)
        self._watchdog_fd = write_fd

    def _disarm_watchdog(self) -> None:
        if self._watchdog_fd is not None:
            with contextlib.suppress(OSError):
                os.write(self._watchdog_fd, b"disarm")
            with contextlib.suppress(OSError):
                os.close(self._watchdog_fd)
            self._watchdog_fd = None
        if self._watchdog is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._watchdog.wait(timeout=STOP_TIMEOUT_S)
            self._watchdog = None

    def _log_tail(self) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return f"\n--- {self.log_path} (tail) ---\n{text[-LOG_TAIL_CHARS:]}"


def create(
    *, bindir: pathlib.Path | None = None, settings: dict[str, str] | None = None
) -> EmbeddedServer:
    """initdb + start a new private cluster. The caller must `close()` it (reaper backs it up)."""
    bindir = bindir or binaries.find_bindir()
    account = accounts.server_account()
    root = pathlib.Path(tempfile.mkdtemp(prefix="crashcert-pg-"))
    os.chmod(root, 0o700)
    if account is not None:
        os.chown(root, account.uid, account.gid)
    embedded = EmbeddedServer(bindir=bindir, account=account, root=root)
    try:
        embedded._start_watchdog()
        embedded._make_datadir()
        embedded._configure(settings or {})
        embedded._first_start()
    except BaseException:
        embedded.close()
        raise
    return embedded


def free_port() -> int:
    """A TCP port free on the loopback right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def port_taken(port: int) -> bool:
    """Whether some process holds `port` on the loopback (we cannot bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return True
    return False


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _server_env() -> dict[str, str]:
    # A clean environment: the caller's PG* variables must not redirect pg_ctl or initdb.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    return env
