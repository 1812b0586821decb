"""harness/inputs/readers.py: every file crashcert reads is a small regular file, read without
waiting on a writer, and JSON is bounded in depth and holds numbers JSON has (issue 33)."""

from __future__ import annotations

import os
import pathlib

import pytest

from harness import errors
from harness.inputs import readers


def test_a_fifo_is_refused_at_once_without_waiting_for_a_writer(tmp_path: pathlib.Path) -> None:
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    with pytest.raises(errors.CrashcertError, match="it is a FIFO, not a regular file"):
        readers.read_json(fifo, what="an OTLP trace", max_bytes=1024)


def test_a_device_is_refused() -> None:
    with pytest.raises(errors.CrashcertError, match="a character device"):
        readers.read_bytes("/dev/zero", what="an OTLP trace", max_bytes=1024)


def test_a_file_beyond_its_cap_is_refused_and_its_content_never_echoed(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "shard.json"
    path.write_text('{"secret": "' + "s3cr3t" * 100 + '"}')
    with pytest.raises(errors.CrashcertError) as raised:
        readers.read_json(path, what="a shard's report", max_bytes=100)
    assert "larger than 100 bytes" in str(raised.value)
    assert "s3cr3t" not in str(raised.value)


@pytest.mark.parametrize(
    "text,reason",
    [
        ("[" * 5000 + "]" * 5000, "nested deeper than 64 levels"),
        ("[" * 65 + "]" * 65, "nested deeper than 64 levels"),
        ('{"count": NaN}', "NaN is not a JSON number"),
        ('{"count": -Infinity}', "-Infinity is not a JSON number"),
    ],
)
def test_json_beyond_its_bounds_is_a_value_error(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        readers.loads(text)


def test_json_within_its_bounds_loads() -> None:
    assert readers.loads("[" * 64 + "]" * 64) is not None
    assert readers.loads('{"a": [1, 2.5, null]}') == {"a": [1, 2.5, None]}
