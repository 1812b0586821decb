"""Boundary reports for an engine under crashcert (harness/CONTRACT.md section 2).

One file, standard library only: import it (it comes with crashcert) or copy it into your
engine. With CRASHCERT_CONTROL set, each report writes one JSON line on a per-process
AF_UNIX connection and blocks until the harness answers `{"action":"continue"}`; the
harness may kill or stop the process instead. If the harness is gone the process exits
at once (code 70): carrying on unobserved would make the trial meaningless. Unset, every
report is a no-op, so the calls can stay in production code.

    import crashcert_probe as probe

    probe.report("run.claimed", run_id)
    with probe.committing("tools.pending", run_id, turn=2):
        connection.commit()          # reported before (…:before_commit) and after

Code already inside a framework's own transaction (a checkpointer method that commits when
it returns) cannot wrap the COMMIT; it reports the twin from inside, after its statements
ran, and the boundary once the framework's call returned:

    probe.before_commit("tools.pending", run_id)   # inside the transaction, COMMIT next
    ...                                            # the framework commits
    probe.report("tools.pending", run_id)          # after the commit returned

The boundary is what the commit makes durable (harness/CONTRACT.md, "Certifying a
framework").
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

EXIT_HARNESS_GONE = 70
BEFORE_COMMIT = ":before_commit"


class Reporter:
    def __init__(self, path: str | None, *, worker_id: str) -> None:
        self.path = path
        self.worker_id = worker_id
        self._sock: socket.socket | None = None
        self._file: Any = None
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def report(self, boundary: str, run_id: str, **detail: Any) -> None:
        if self.path is None:
            return
        line = json.dumps(
            {
                "v": 1,
                "boundary": boundary,
                "run_id": run_id,
                "worker_id": self.worker_id,
                "pid": os.getpid(),
                "detail": {key: value for key, value in detail.items() if value is not None},
            },
            separators=(",", ":"),
        )
        with self._lock:
            try:
                if self._sock is None:
                    self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    self._sock.connect(self.path)
                    self._file = self._sock.makefile("rb")
                self._sock.sendall(line.encode() + b"\n")
                answer = self._file.readline()
            except OSError:
                os._exit(EXIT_HARNESS_GONE)
            if not answer:
                os._exit(EXIT_HARNESS_GONE)
            try:
                action = json.loads(answer).get("action")
            except (ValueError, AttributeError):
                action = None
            if action != "continue":
                # anything but continue is a harness we do not understand: stop, unobserved
                os._exit(EXIT_HARNESS_GONE)

    def before_commit(self, boundary: str, run_id: str, **detail: Any) -> None:
        """`boundary:before_commit`, from inside a transaction whose COMMIT someone else
        sends next (a framework's own): nothing but that COMMIT may follow it on the
        connection, so a lost-commit fault strikes the right message."""
        if boundary.endswith(BEFORE_COMMIT):
            raise ValueError(f"{boundary!r}: name the boundary, not its {BEFORE_COMMIT} twin")
        self.report(boundary + BEFORE_COMMIT, run_id, **detail)

    @contextlib.contextmanager
    def committing(self, boundary: str, run_id: str, **detail: Any) -> Iterator[None]:
        """Around the COMMIT that makes `boundary` durable: `boundary:before_commit` first
        (nothing but the COMMIT may follow it), `boundary` once the body returned. A body
        that raises reports nothing more: the transition is not known to be durable."""
        self.before_commit(boundary, run_id, **detail)
        yield
        self.report(boundary, run_id, **detail)


def disabled() -> Reporter:
    return Reporter(None, worker_id="-")


# The process's reporter: built on first use, again in a forked child (a connection is
# never shared across processes).
_default: tuple[int, Reporter] | None = None
_default_lock = threading.Lock()


def default() -> Reporter:
    """The reporter CRASHCERT_CONTROL and CRASHCERT_WORKER_ID describe for this process."""
    global _default
    with _default_lock:
        if _default is None or _default[0] != os.getpid():
            reporter = Reporter(
                os.environ.get("CRASHCERT_CONTROL") or None,
                worker_id=os.environ.get("CRASHCERT_WORKER_ID", str(os.getpid())),
            )
            _default = (os.getpid(), reporter)
        return _default[1]


def report(boundary: str, run_id: str, **detail: Any) -> None:
    default().report(boundary, run_id, **detail)


def before_commit(boundary: str, run_id: str, **detail: Any) -> None:
    default().before_commit(boundary, run_id, **detail)


def committing(
    boundary: str, run_id: str, **detail: Any
) -> contextlib.AbstractContextManager[None]:
    return default().committing(boundary, run_id, **detail)
