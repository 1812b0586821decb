"""crashcert_probe: the one-file boundary reporter engines import or vendor (and the
reference engine uses). Against a real Unix socket standing in for the harness's control
channel: lines, the wait for continue, :before_commit around a commit, no-op when unset,
exit when the harness is gone, and no dependency beyond the standard library."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

import crashcert_probe

pytestmark = pytest.mark.processes  # starts real subprocesses: the flake hunt runs it

PROBE = pathlib.Path(crashcert_probe.__file__)


@pytest.fixture
def harness(tmp_path: pathlib.Path) -> Iterator[tuple[str, list[dict[str, object]]]]:
    """A control socket that records each line and answers continue."""
    path = str(tmp_path / "control.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(4)
    lines: list[dict[str, object]] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn, conn.makefile("rwb") as stream:
                for line in stream:
                    lines.append(json.loads(line))
                    stream.write(b'{"action":"continue"}\n')
                    stream.flush()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path, lines
    server.close()


def test_unset_is_a_no_op() -> None:
    reporter = crashcert_probe.Reporter(None, worker_id="w")
    reporter.report("run.claimed", "r")  # nothing to connect to, nothing happens
    with reporter.committing("tools.pending", "r"):
        pass
    assert not reporter.enabled


def test_a_report_is_one_line_and_waits_for_continue(
    harness: tuple[str, list[dict[str, object]]],
) -> None:
    path, lines = harness
    reporter = crashcert_probe.Reporter(path, worker_id="w-1")
    reporter.report("tools.pending:before_commit", "r-1", frontier_version=3, phase="x")
    reporter.report("tools.pending", "r-1", frontier_version=3, key=None)
    assert lines[0]["boundary"] == "tools.pending:before_commit"
    assert lines[0]["detail"] == {"frontier_version": 3, "phase": "x"}
    assert lines[1]["worker_id"] == "w-1" and lines[1]["pid"] == os.getpid()


def test_committing_reports_before_and_after_a_commit_and_nothing_after_a_failed_one(
    harness: tuple[str, list[dict[str, object]]],
) -> None:
    path, lines = harness
    reporter = crashcert_probe.Reporter(path, worker_id="w-1")
    order: list[str] = []
    with reporter.committing("model.pending", "r-1", turn=1):
        order.append(f"commit after {len(lines)} line(s)")
    assert order == ["commit after 1 line(s)"]
    assert [line["boundary"] for line in lines] == ["model.pending:before_commit", "model.pending"]
    with pytest.raises(RuntimeError), reporter.committing("tools.pending", "r-1"):
        raise RuntimeError("COMMIT failed")
    assert lines[-1]["boundary"] == "tools.pending:before_commit"  # never "tools.pending"


def test_the_module_level_calls_read_the_contracts_environment(
    harness: tuple[str, list[dict[str, object]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, lines = harness
    monkeypatch.setenv("CRASHCERT_CONTROL", path)
    monkeypatch.setenv("CRASHCERT_WORKER_ID", "w-7")
    monkeypatch.setattr(crashcert_probe, "_default", None)
    crashcert_probe.report("run.claimed", "r-2")
    with crashcert_probe.committing("run.finished", "r-2", status="succeeded"):
        pass
    assert [(line["boundary"], line["worker_id"]) for line in lines] == [
        ("run.claimed", "w-7"),
        ("run.finished:before_commit", "w-7"),
        ("run.finished", "w-7"),
    ]


def test_the_process_exits_when_the_harness_is_gone(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "missing.sock")
    code = (
        "import crashcert_probe;"
        f"crashcert_probe.Reporter({path!r}, worker_id='w').report('run.claimed', 'r')"
    )
    result = subprocess.run([sys.executable, "-c", code], timeout=30, cwd=PROBE.parent)
    assert result.returncode == crashcert_probe.EXIT_HARNESS_GONE


def test_a_vendored_copy_runs_on_the_standard_library_alone(
    harness: tuple[str, list[dict[str, object]]], tmp_path: pathlib.Path
) -> None:
    path, lines = harness
    engine = tmp_path / "someone_elses_engine"
    engine.mkdir()
    shutil.copy(PROBE, engine / "crashcert_probe.py")
    code = "import crashcert_probe as p; p.report('run.claimed', 'r-9'); print(p.__file__)"
    env = {"CRASHCERT_CONTROL": path, "CRASHCERT_WORKER_ID": "w-9", "PATH": os.environ["PATH"]}
    # -I -S: no site-packages, no user paths: only the standard library and the copy
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", f"import sys; sys.path.insert(0, '.'); {code}"],
        cwd=engine,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(engine / "crashcert_probe.py")
    assert lines == [lines[0]] and lines[0]["worker_id"] == "w-9"
