"""The control channel on a real Unix socket: recording, holding, answering."""

from __future__ import annotations

import json
import os
import socket
import stat
import threading

from harness import control, history, recorder


def _report(path: str, message: dict[str, object]) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(path)
        sock.sendall(json.dumps(message).encode() + b"\n")
        return sock.makefile("rb").readline()


def test_hits_are_recorded_counted_and_answered(tmp_path):
    rec = recorder.Recorder()
    with control.ControlServer(str(tmp_path / "c.sock"), rec) as server:
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
    assert not os.path.exists(tmp_path / "c.sock")


def test_policy_holds_the_worker_until_it_returns(tmp_path):
    rec = recorder.Recorder()
    release = threading.Event()
    seen: list[history.BoundaryHit] = []

    def policy(hit: history.BoundaryHit) -> None:
        seen.append(hit)
        release.wait(5)

    answers: list[bytes] = []
    with control.ControlServer(str(tmp_path / "c.sock"), rec, policy=policy) as server:
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


def test_malformed_line_is_answered_and_reported(tmp_path):
    rec = recorder.Recorder()
    with control.ControlServer(str(tmp_path / "c.sock"), rec) as server:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(server.path)
            sock.sendall(b"not json\n")
            assert sock.makefile("rb").readline() == b'{"action":"continue"}\n'
    assert rec.boundary_hits() == []
    assert "bad control line" in server.protocol_errors[0]


def test_wait_for_times_out_with_none(tmp_path):
    with control.ControlServer(str(tmp_path / "c.sock"), recorder.Recorder()) as server:
        assert server.wait_for(lambda hit: True, timeout=0.05) is None


def test_short_socket_path_falls_back_for_long_directories(tmp_path):
    deep = tmp_path / ("d" * 120)
    path = control.short_socket_path(str(deep))
    assert len(path.encode()) < 100
    assert path.endswith("control.sock")
