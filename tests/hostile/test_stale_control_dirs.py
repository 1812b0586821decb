"""A crashcert killed by SIGKILL leaves its trials' control-socket directories behind; the
next trial of any crashcert removes those whose owner is gone, and only those (issue 33)."""

from __future__ import annotations

import os
import pathlib

from harness.record import recorder
from harness.trial import control


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_directories_of_a_dead_crashcert_are_removed_and_no_others(tmp_path: pathlib.Path) -> None:
    dead = tmp_path / f"cc-{_dead_pid()}-abcd1234"
    live = tmp_path / f"cc-{os.getpid()}-efgh5678"
    init = tmp_path / "cc-1-ijkl9012"  # pid 1 lives: never taken for dead
    other = tmp_path / "cc-notapid-x"
    for directory in (dead, live, init, other):
        directory.mkdir()
        (directory / control.SOCKET_NAME).write_text("")
    assert control.remove_stale(str(tmp_path)) == [str(dead)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (live, init, other))


def test_a_server_names_its_directory_after_its_crashcert() -> None:
    with control.ControlServer(recorder.Recorder()) as server:
        directory = pathlib.Path(server.path).parent
        assert directory.name.startswith(f"{control.PREFIX}{os.getpid()}-")
        assert control._owner_pid(directory.name) == os.getpid()
        assert directory.stat().st_mode & 0o777 == 0o700
    assert not directory.exists()
