"""Engine worker processes: started in their own process group, killed as a group.

Every worker the harness starts is tracked here until it is confirmed dead and reaped;
`WorkerSet.close()` leaves no process behind (children included), whatever happened.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence

import psutil

from harness import errors
from harness.lab import containment as containment_module
from harness.lab import reaper, spawner
from harness.lab.postgres import dsn as pg_dsn

DEATH_TIMEOUT_S = 5.0
TERM_GRACE_S = 2.0
# Lines the harness writes into a worker's log (start, signals, exit), so a log says what
# happened to its worker even when the engine itself printed nothing.
NOTE_PREFIX = "[crashcert] "


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


class Worker:
    def __init__(
        self,
        worker_id: str,
        command: Sequence[str],
        *,
        env: Mapping[str, str],
        log_dir: pathlib.Path,
        cwd: str | None = None,
        forkserver: spawner.ForkServer | None = None,
        containment: containment_module.Containment | None = None,
    ) -> None:
        self.worker_id = worker_id
        log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        # absolute: the fork server opens it from the engine's working directory
        self.log_path = log_dir.absolute() / f"{worker_id}.log"
        # 0600: a log names the run key and may print the world's secret URLs.
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        self._log = os.fdopen(os.open(self.log_path, flags, 0o600), "ab")
        module = spawner.module_command(command) if forkserver else None
        how = "forked from the warm server" if forkserver and module else "exec'd"
        procs = containment.procs_file if containment is not None else None
        if procs is not None:
            how += f", in cgroup {pathlib.Path(procs).parent}"
        self.note(f"worker {worker_id}: {pg_dsn.redact_argv(list(command))} ({how}, cwd {cwd})")
        self.process: subprocess.Popen[bytes] | spawner.ForkedProcess
        if forkserver is not None and module is not None:
            pid = forkserver.spawn(
                module[0],
                module[1],
                env=env,
                cwd=cwd or os.getcwd(),
                log=str(self.log_path),
                cgroup_procs=procs,
            )
            self.process = spawner.ForkedProcess(forkserver, pid)
        else:
            self.process = self._exec(command, env, cwd, containment)
        self.pid = self.process.pid
        if containment is not None:
            containment.track(self.pid)
        self.pgid = self.pid
        self.note(f"started as pid {self.pid}")
        # Ctrl-C, SIGTERM or an exception in the harness must not leave workers behind.
        self._reaper_key = reaper.register(self._kill_at_exit)
        self.killed = False
        self.paused = False
        self.replaced = False  # a crashed worker the harness already replaced
        # Descendants seen while alive, so a kill can confirm they are gone too.
        self._known: dict[int, psutil.Process] = {}
        self._lock = threading.Lock()

    def _exec(
        self,
        command: Sequence[str],
        env: Mapping[str, str],
        cwd: str | None,
        containment: containment_module.Containment | None,
    ) -> subprocess.Popen[bytes]:
        argv = list(command)
        if containment is not None and containment.procs_file is not None:
            if not _found(argv[0], env, cwd):
                # The cgroup's shell would exec it and exit 127: refuse it as exec would.
                self._log.close()
                raise errors.CrashcertError(
                    f"cannot start worker {argv}: no executable {argv[0]!r} found"
                )
            argv = containment.command(argv)
        try:
            return subprocess.Popen(
                argv,
                env=dict(env),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: a kill takes its children too
            )
        except OSError as error:
            self._log.close()
            raise errors.CrashcertError(f"cannot start worker {list(command)}: {error}") from None

    def note(self, text: str) -> None:
        """One timestamped harness line in this worker's log (never raises)."""
        if self._log.closed:
            return
        stamp = (
            time.strftime("%H:%M:%S", time.localtime()) + f".{time.time_ns() // 10**6 % 1000:03d}"
        )
        try:
            self._log.write(f"{NOTE_PREFIX}{stamp} {text}\n".encode())
            self._log.flush()
        except OSError:
            pass

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.process.poll()

    def _remember_descendants(self) -> None:
        try:
            parent = psutil.Process(self.pid)
            for child in parent.children(recursive=True):
                self._known[child.pid] = child
        except psutil.Error:
            pass

    def _signal_group(self, signum: int) -> None:
        try:
            os.killpg(self.pgid, signum)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """SIGKILL the whole group and confirm every process of it is dead."""
        with self._lock:
            self._remember_descendants()
            self.killed = True
            self.note(f"SIGKILL to process group {self.pgid}")
            self._signal_group(signal.SIGKILL)
            self.reap(timeout=DEATH_TIMEOUT_S)

    def pause(self) -> None:
        with self._lock:
            self.note(f"SIGSTOP to process group {self.pgid} (paused)")
            self._signal_group(signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        with self._lock:
            self.note(f"SIGCONT to process group {self.pgid} (resumed)")
            self._signal_group(signal.SIGCONT)
            self.paused = False

    def request_stop(self) -> None:
        """SIGTERM without waiting (terminate() waits)."""
        with self._lock:
            self._sigterm()

    def _sigterm(self) -> None:
        if self.alive:
            self._remember_descendants()
            if self.paused:
                self._signal_group(signal.SIGCONT)  # a stopped process cannot act on TERM
            self.note(f"SIGTERM to process group {self.pgid} (stop)")
            self._signal_group(signal.SIGTERM)

    def terminate(self) -> None:
        """SIGTERM (graceful), SIGKILL after a grace period."""
        with self._lock:
            if self.alive:
                self._sigterm()
                try:
                    self.process.wait(TERM_GRACE_S)
                except subprocess.TimeoutExpired:
                    self.note(f"still alive {TERM_GRACE_S}s after SIGTERM: SIGKILL")
                    self._signal_group(signal.SIGKILL)
            self.reap(timeout=DEATH_TIMEOUT_S)

    def _kill_at_exit(self) -> None:
        self._signal_group(signal.SIGCONT)
        self._signal_group(signal.SIGKILL)

    def reap(self, *, timeout: float) -> None:
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired as error:
            raise errors.EnvironmentProblem(
                f"worker {self.worker_id} (pid {self.pid}) did not die within {timeout}s"
            ) from error
        # Children that escaped the group (they should not) are killed by pid.
        _, alive = psutil.wait_procs(list(self._known.values()), timeout=0)
        for process in alive:
            try:
                process.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(alive, timeout=timeout)
        reaper.unregister(self._reaper_key)
        if not self._log.closed:
            self.note(f"pid {self.pid} {describe_exit(self.process.poll())}")
            self._log.close()


class WorkerSet:
    """All workers of one trial."""

    def __init__(self) -> None:
        self._workers: dict[str, Worker] = {}
        self._by_pid: dict[int, Worker] = {}
        self._lock = threading.Lock()

    def add(self, worker: Worker) -> Worker:
        with self._lock:
            self._workers[worker.worker_id] = worker
            self._by_pid[worker.pid] = worker
        return worker

    def by_id(self, worker_id: str | None) -> Worker | None:
        with self._lock:
            return self._workers.get(worker_id or "")

    def by_pid(self, pid: int | None) -> Worker | None:
        with self._lock:
            return self._by_pid.get(pid or -1)

    def all(self) -> list[Worker]:
        """Every worker ever started, also one whose id a restart reused."""
        with self._lock:
            return list(self._by_pid.values())

    def alive(self) -> list[Worker]:
        return [worker for worker in self.all() if worker.alive]

    def close(self) -> None:
        """SIGTERM every worker at once (their grace periods overlap), then reap each."""
        workers = self.all()
        for worker in workers:
            worker.request_stop()
        for worker in workers:
            try:
                worker.terminate()
            except errors.EnvironmentProblem:
                worker.kill()


def _found(program: str, env: Mapping[str, str], cwd: str | None) -> bool:
    """Whether exec would find `program`: a path (from `cwd`), or a name on the env's PATH."""
    if os.sep in program:
        return os.access(os.path.join(cwd or os.getcwd(), program), os.X_OK)
    return shutil.which(program, path=env.get("PATH", os.defpath)) is not None


def wait_until(predicate: object, *, timeout: float, interval: float = 0.02) -> bool:
    """Poll a condition with a deadline (for conditions no one signals)."""
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
