"""Trial results on disk (issue 33): trials of one command whose labels repeat each keep a
directory of their own, and a result file is written whole or not at all."""

from __future__ import annotations

import errno
import pathlib
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
