"""The control channel on a real Unix socket: recording, holding, answering."""

from __future__ import annotations

import json
import os
import socket
import stat
import tempfile
import threading

from harness.record import history, recorder
from harness.trial import control


def _report(path: str, message: dict[str, object]) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(path)
        sock.sendall(json.dumps(message).encode() + b"\n")
        return sock.makefile("rb").readline()


def test_hits_are_recorded_counted_and_answered():
    rec = recorder.Recorder()
    with control.ControlServer(rec) as server:
        assert stat.S_IMODE(os.stat(server.path).st_mode) == 0o600
        for _ in range(2):
            answer = _report(
                server.path,
                {
                    "v": 1,
                    "boundary": "tools.pending",
                    "run_id": "r1",
                    "worker_id": "w1",
                    "pid": 42,
                    "detail": {"turn": 0},
                },
            )
            assert json.loads(answer) == {"action": "continue"}
    hits = rec.boundary_hits()
    assert [(h.point, h.occurrence, h.pid, h.worker_id) for h in hits] == [
        ("tools.pending", 1, 42, "w1"),
        ("tools.pending", 2, 42, "w1"),
    ]
    assert hits[0].detail == {"turn": 0}
    assert hits[0].seq < hits[1].seq
    assert not os.path.exists(os.path.dirname(server.path))


def test_policy_holds_the_worker_until_it_returns():
    rec = recorder.Recorder()
    release = threading.Event()
    seen: list[history.BoundaryHit] = []

    def policy(hit: history.BoundaryHit) -> None:
        seen.append(hit)
        release.wait(5)

    answers: list[bytes] = []
    with control.ControlServer(rec, policy=policy) as server:
        thread = threading.Thread(
            target=lambda: answers.append(_report(server.path, {"boundary": "run.claimed"}))
        )
        thread.start()
        assert server.wait_for(lambda hit: hit.point == "run.claimed", timeout=5) is not None
        assert answers == []  # still held
        release.set()
        thread.join(5)
    assert answers == [b'{"action":"continue"}\n']
    assert seen[0].point == "run.claimed"


def test_malformed_line_is_answered_and_reported():
    rec = recorder.Recorder()
    with control.ControlServer(rec) as server:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(server.path)
            sock.sendall(b"not json\n")
            assert sock.makefile("rb").readline() == b'{"action":"continue"}\n'
    assert rec.boundary_hits() == []
    assert "bad control line" in server.protocol_errors[0]


def test_wait_for_times_out_with_none():
    with control.ControlServer(recorder.Recorder()) as server:
        assert server.wait_for(lambda hit: True, timeout=0.05) is None


def test_socket_is_private_without_touching_the_umask(monkeypatch):
    """The umask is process-wide: setting it from a trial thread raced other threads and
    once leaked 0177 into the suite (every later Chromium died with SIGTRAP)."""
    calls: list[int] = []
    real_umask = os.umask

    def spy(mask: int) -> int:
        calls.append(mask)
        return real_umask(mask)

    monkeypatch.setattr(os, "umask", spy)
    servers = [control.ControlServer(recorder.Recorder()) for _ in range(8)]
    threads = [threading.Thread(target=server.start) for server in servers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    try:
        assert calls == []
        for server in servers:
            directory = os.path.dirname(server.path)
            assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
            assert stat.S_IMODE(os.stat(server.path).st_mode) == 0o600
            assert len(server.path.encode()) < 100  # fits a Unix socket address
        assert len({server.path for server in servers}) == len(servers)
    finally:
        for server in servers:
            server.stop()
    assert not any(os.path.exists(os.path.dirname(server.path)) for server in servers)


def test_long_tmpdir_falls_back_to_a_short_one(tmp_path, monkeypatch):
    deep = tmp_path / ("d" * 120)
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    with control.ControlServer(recorder.Recorder()) as server:
        assert len(server.path.encode()) < 100
        assert _listening(server.path)


def _listening(path: str) -> bool:
    """True when something accepts connections on the Unix socket `path`."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        try:
            sock.connect(path)
        except OSError:
            return False
        return True
