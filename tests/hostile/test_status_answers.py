"""A status server's bad answer or silence is the engine's fault, said so naming the engine,
within the timeout and a size cap: never a hang, an unbounded read or an internal error
(issue 33). Small real processes, one per shape of misbehaviour."""

from __future__ import annotations

import signal
import sys

import pytest

from harness import errors
from harness.engines import status_server

pytestmark = pytest.mark.processes

# Each reads one question, then misbehaves as its name says.
SERVERS = {
    "a line that never ends": "sys.stdout.write('x' * (6 * 1024 * 1024)); sys.stdout.flush()",
    "half a line, then silence": "sys.stdout.write('{\"run'); sys.stdout.flush(); time.sleep(30)",
    "bytes that are not UTF-8": "sys.stdout.buffer.write(b'\\xff\\xfe\\n'); sys.stdout.flush()",
    "two lines for one question": "print('{}'); print('{}'); sys.stdout.flush(); time.sleep(30)",
    "silence": "time.sleep(30)",
    "an exit without an answer": "sys.exit(4)",
}
PROBLEMS = {
    "a line that never ends": "longer than",
    "half a line, then silence": "no whole answer within 1 s",
    "bytes that are not UTF-8": "not UTF-8",
    "two lines for one question": "more than one line",
    "silence": "no answer within 1 s",
    "an exit without an answer": "exited with code 4",
}


@pytest.mark.parametrize("shape", list(SERVERS))
def test_a_bad_answer_names_the_engine(shape: str) -> None:
    code = f"import sys, time\nsys.stdin.readline()\n{SERVERS[shape]}\n"
    server = status_server.StatusServer(
        [sys.executable, "-c", code], cwd=".", env={}, name="hostile-engine", timeout_s=1.0
    )
    try:
        with pytest.raises(errors.CrashcertError) as raised:
            server.ask("dsn", "run-1")
    finally:
        server.close()
    message = str(raised.value)
    assert message.startswith("engine hostile-engine: status server: "), message
    assert PROBLEMS[shape] in message, message
    assert len(message) < 300  # the answer itself is not echoed
    assert server._process is None  # stopped, started afresh for the next question


def test_a_server_past_its_timeout_is_killed_not_given_time_to_leave() -> None:
    """It broke the protocol: closing its stdin and waiting 2 s for it to leave held the
    trial (or the test) 2 s more each time. This one would leave politely: it is killed."""
    code = "import os, sys\nsys.stdin.readline()\nsys.stdin.read()\nos._exit(0)\n"
    server = status_server.StatusServer(
        [sys.executable, "-c", code], cwd=".", env={}, name="hostile-engine", timeout_s=0.5
    )
    process = server._running()
    try:
        with pytest.raises(errors.CrashcertError, match="no answer within"):
            server.ask("dsn", "run-1")
    finally:
        server.close()
    assert process.returncode == -signal.SIGKILL
