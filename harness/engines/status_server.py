"""A long-lived status process, for engines whose status command is costly to start (a
framework imported for every poll). harness/CONTRACT.md section 5 (`status_server`): the
harness writes one JSON line `{"run_id": ..., "database_url": ...}` and reads one line
back, the run report the status command would print, or `{"error": "..."}`. One process
per engine and lab, asked one question at a time; a process that died is started again for
the next question.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import threading
import time
from collections.abc import Mapping

from harness import errors

# A run report is a few kilobytes; more is a server that lost its way.
MAX_ANSWER_BYTES = 4 * 1024 * 1024


class StatusServer:
    def __init__(
        self, argv: list[str], *, cwd: str, env: Mapping[str, str], name: str, timeout_s: float
    ) -> None:
        self._argv = argv
        self._cwd = cwd
        self._env = dict(env)
        self._name = name
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self.asked = 0  # questions answered, for the benchmark and the tests

    def ask(self, dsn: str, run_id: str) -> str:
        """The run report's JSON text, as the status command would have printed it."""
        question = json.dumps({"run_id": run_id, "database_url": dsn}) + "\n"
        with self._lock:
            process = self._running()
            try:
                assert process.stdin is not None
                process.stdin.write(question.encode())
                process.stdin.flush()
                answer = self._read_line(process)
            except (OSError, ValueError) as error:
                self._stop(grace_s=0)  # it broke the protocol: no time to leave on its own
                raise errors.CrashcertError(
                    f"engine {self._name}: status server: {error}"
                ) from None
            self.asked += 1
        try:
            failed = json.loads(answer).get("error")
        except (ValueError, AttributeError):
            failed = None
        if failed:
            raise errors.CrashcertError(f"engine {self._name}: status server: {failed}")
        return answer

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _running(self) -> subprocess.Popen[bytes]:
        if self._process is not None and self._process.poll() is None:
            return self._process
        self._stop()
        try:
            self._process = subprocess.Popen(
                self._argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd=self._cwd,
                env=self._env,
                bufsize=0,  # answers are read from the descriptor, bounded (_read_line)
            )
        except OSError as error:
            raise errors.CrashcertError(
                f"engine {self._name}: cannot start the status server: {error}"
            ) from None
        return self._process

    def _read_line(self, process: subprocess.Popen[bytes]) -> str:
        """One answer line within the timeout and MAX_ANSWER_BYTES: a server that stalls
        mid-line or never ends its line is the engine's fault, said so, never a hang."""
        assert process.stdout is not None
        descriptor = process.stdout.fileno()
        deadline = time.monotonic() + self._timeout_s
        answer = bytearray()
        with selectors.DefaultSelector() as selector:
            selector.register(descriptor, selectors.EVENT_READ)
            while b"\n" not in answer:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    whole = "whole " if answer else ""
                    raise ValueError(f"no {whole}answer within {self._timeout_s:.0f} s")
                chunk = os.read(descriptor, 65536)
                if not chunk:
                    raise ValueError(f"exited with code {process.wait(5)} without an answer")
                answer += chunk
                if len(answer) > MAX_ANSWER_BYTES:
                    raise ValueError(f"an answer longer than {MAX_ANSWER_BYTES} bytes")
        line, _, rest = bytes(answer).partition(b"\n")
        if rest:
            raise ValueError("more than one line for one question")
        try:
            return line.decode()
        except UnicodeDecodeError:
            raise ValueError("an answer that is not UTF-8") from None

    def _stop(self, grace_s: float = 2.0) -> None:
        """Its stdin closed, `grace_s` to exit, then killed."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            try:
                process.stdin.close()
            except OSError:
                pass
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        if process.stdout is not None:
            process.stdout.close()
