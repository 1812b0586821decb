"""Boundary reports on the control channel (harness/CONTRACT.md section 2).

With CRASHCERT_CONTROL set, each report writes one JSON line on a per-process AF_UNIX
connection and blocks until the harness answers `{"action":"continue"}`; the harness may
kill or stop us instead. If the harness is gone we exit at once (exit code 70): carrying
on unobserved would make the trial meaningless. Unset, reporting is a no-op.
"""

from __future__ import annotations

import json
import os
import socket
import threading
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


def disabled() -> Reporter:
    return Reporter(None, worker_id="-")
