"""Trial results on disk (issue 33): trials of one command whose labels repeat each keep a
directory of their own, and a result file is written whole or not at all."""

from __future__ import annotations

import errno
import json
import os
import pathlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from harness import errors
from harness.trial import artifacts


def test_trials_that_share_a_label_get_directories_of_their_own(tmp_path: pathlib.Path) -> None:
    wanted = tmp_path / "refund" / "kill@tool.started#1"
    claimed = [artifacts.claim_directory(wanted) for _ in range(3)]
    assert [path.name for path in claimed] == [
        "kill@tool.started#1",
        "kill@tool.started#1~2",
        "kill@tool.started#1~3",
    ]
    assert all(path.stat().st_mode & 0o777 == 0o700 for path in claimed)


def test_a_full_disk_leaves_the_old_file_whole_and_names_the_path(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "verdicts.json"
    path.write_text('{"verdict": "PASS"}\n')
    real_open = pathlib.Path.open

    class _Full:
        def __init__(self, file: Any) -> None:
            self._file = file

        def __enter__(self) -> _Full:
            return self

        def __exit__(self, *exc: object) -> None:
            self._file.close()

        def write(self, text: str) -> int:
            self._file.write(text[:3])  # part of it lands, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")

    def full_open(self: pathlib.Path, *args: Any, **kwargs: Any) -> Any:
        return _Full(real_open(self, *args, **kwargs))

    monkeypatch.setattr(pathlib.Path, "open", full_open)
    with pytest.raises(errors.CrashcertError, match=r"verdicts\.json: cannot write: No space"):
        artifacts._atomic(path, '{"verdict": "FAIL"}\n')
    monkeypatch.undo()
    assert path.read_text() == '{"verdict": "PASS"}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["verdicts.json"]  # no temporary left


TINY_FS = "64k"  # room for the workers' logs, not for the trial's history


@pytest.fixture
def full_disk(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    """A real file system that fills up: a 64 KiB tmpfs (root only)."""
    mount = shutil.which("mount")
    if os.geteuid() != 0 or mount is None:
        pytest.skip("a tmpfs of our own needs root and mount")
    point = tmp_path / "tiny"
    point.mkdir()
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", f"size={TINY_FS},mode=0700", "tmpfs", str(point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", str(point)], check=True)


@pytest.mark.postgres
def test_a_trial_on_a_full_disk_prints_its_verdict_then_names_the_path(
    full_disk: pathlib.Path,
) -> None:
    crashcert = pathlib.Path(sys.executable).parent / "crashcert"
    fault = "kill@tool.returned#1"
    done = subprocess.run(
        [str(crashcert), "run", "--scenario", "refund", "--fault", fault, "--out", str(full_disk)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 3, said[-3000:]  # ERROR: the result was not stored
    assert "Traceback" not in said, said[-3000:]
    # The trial ran and was judged: its verdict is printed before the disk's error.
    assert "\nPASS" in done.stdout and "plan.applied" in done.stdout, said[-3000:]
    [line] = [line for line in done.stderr.splitlines() if line.startswith("crashcert: ")]
    assert str(full_disk) in line and "No space left on device" in line, line
    # Whole or not at all: no half-written result and no temporary file is left.
    left = [path for path in full_disk.rglob("*") if path.is_file()]
    assert not [path.name for path in left if path.name.endswith(".tmp")], left
    assert not [path for path in left if path.name == "history.jsonl"], left
    for path in left:
        if path.suffix == ".json":
            json.loads(path.read_text())  # written before the disk filled: whole
