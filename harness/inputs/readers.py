"""The one bounded way crashcert reads a file it did not write in this process: scenarios,
engine descriptions, OTLP traces, shard and merge JSON, trial histories.

Regular files only (a FIFO must not block the reader, /dev/zero must not fill memory),
opened without waiting for a writer, at most `max_bytes` read, UTF-8; JSON additionally
without NaN or infinities and nested at most MAX_JSON_DEPTH deep. Every refusal is one
CrashcertError line naming the path and never quoting the file's content.
"""

from __future__ import annotations

import json
import os
import pathlib
import stat
from typing import Any

from harness import errors

MAX_JSON_DEPTH = 64
# A shard's record or a merge input: a few KB per trial.
MAX_RECORD_BYTES = 64 * 1024 * 1024
# A trial's history: ~0.3 MB; a thousandfold is not a history crashcert wrote.
MAX_HISTORY_BYTES = 256 * 1024 * 1024

_FILE_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
}


def read_bytes(path: str | pathlib.Path, *, what: str, max_bytes: int) -> bytes:
    """At most `max_bytes` of a regular file, or one line saying why not."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise errors.CrashcertError(f"{path}: cannot read {what}: {error.strerror}") from None
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        kind = _FILE_KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise errors.CrashcertError(f"{path}: cannot read {what}: it is {kind}, not a regular file")
    with os.fdopen(descriptor, "rb") as file:
        try:
            data = file.read(max_bytes + 1)
        except OSError as error:
            raise errors.CrashcertError(f"{path}: cannot read {what}: {error.strerror}") from None
    if len(data) > max_bytes:
        raise errors.CrashcertError(f"{path}: cannot read {what}: larger than {max_bytes} bytes")
    return data


def read_text(path: str | pathlib.Path, *, what: str, max_bytes: int) -> str:
    data = read_bytes(path, what=what, max_bytes=max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise errors.CrashcertError(
            f"{path}: cannot read {what}: not UTF-8 text "
            f"(byte 0x{data[error.start]:02x} at offset {error.start})"
        ) from None


def loads(text: str) -> Any:
    """JSON as RFC 8259 has it (no NaN, no Infinity), nested at most MAX_JSON_DEPTH deep.
    Raises ValueError with a one-line reason."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    if _too_deep(value):
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def read_json(path: str | pathlib.Path, *, what: str, max_bytes: int) -> Any:
    text = read_text(path, what=what, max_bytes=max_bytes)
    try:
        return loads(text)
    except ValueError as error:
        reason = " ".join(str(error).split())[:200]
        raise errors.CrashcertError(f"{path}: {what} is not valid JSON: {reason}") from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _too_deep(value: Any) -> bool:
    """Iterative: the check itself must not recurse as deep as the data."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            if depth > MAX_JSON_DEPTH:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False
