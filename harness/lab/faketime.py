"""A worker's wall clock, shifted at run time: libfaketime preloaded, for `clock_skew`.

Only the workers of a trial whose plan holds clock_skew get the preload; each starts at
offset +0 and reads its own offset file on every call (FAKETIME_NO_CACHE=1), so the
nemesis shifts a running worker by rewriting that file. Monotonic clocks are left alone
(FAKETIME_DONT_FAKE_MONOTONIC=1): a skewed wall clock is the fault; sleeps, timeouts and
condition waits measured on the monotonic clock stay true, as they do on a real host
whose NTP is off (faking them too hangs Python's threading waits, wolfcw/libfaketime#390).

Which library: $CRASHCERT_LIBFAKETIME, else the one the PyPI package `libfaketime` ships
(`pip install 'crashcert[clock]'`, 0.9.12 built for x86-64), else one built into the venv,
else Debian's package `faketime`. Each is probed in a child Python first: libfaketime
0.9.10 (Debian 12) breaks `time.sleep` on Python >= 3.11 when monotonic clocks are not
faked (EINVAL, wolfcw/libfaketime#426, fixed in 0.9.11); such a library is refused with
that reason instead of crashing every worker.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable

from harness import errors
from harness.faults import spec

ENV_VAR = "CRASHCERT_LIBFAKETIME"
REQUIRE_ENV = "CRASHCERT_REQUIRE_LIBFAKETIME"
LIBRARY = "libfaketime.so.1"
# Where a build may be put by hand, then where Debian's package `faketime` puts it.
CANDIDATES = (
    pathlib.Path(sys.prefix) / "libfaketime" / LIBRARY,
    pathlib.Path("/usr/lib/x86_64-linux-gnu/faketime") / LIBRARY,
    pathlib.Path("/usr/lib/aarch64-linux-gnu/faketime") / LIBRARY,
    pathlib.Path("/usr/lib/faketime") / LIBRARY,
    pathlib.Path("/usr/local/lib/faketime") / LIBRARY,
)
PROBE_TIMEOUT_S = 20.0
# What the probe runs under the preload: a sleep, a timed wait, and the clock shifted.
_PROBE = (
    "import os, sys, threading, time\n"
    "before = time.time(); time.sleep(0.01); threading.Event().wait(0.01)\n"
    "open(sys.argv[1], 'w').write('-3600\\n')\n"
    "sys.exit(0 if 3500 < before - time.time() < 3700 else 3)\n"
)


def environment(library: str, offset_file: str) -> dict[str, str]:
    """What a process needs to run with its wall clock read from `offset_file`."""
    return {
        "LD_PRELOAD": library,
        "FAKETIME_TIMESTAMP_FILE": offset_file,
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        # the file holds an offset ("+0", "-3600"): no shared memory between processes
        "FAKETIME_DISABLE_SHM": "1",
        # Its "monotonic fix" of pthread_cond_timedwait slows the GIL's timed handoff: with
        # one busy thread, a 10 ms Event.wait took 0.13 s on average (0.5 s at worst), so
        # a heartbeat thread missed 300 ms leases and the reference engine dead-lettered
        # runs under clock_skew at any offset, +0 included. Monotonic is not faked anyway.
        "FAKETIME_FORCE_MONOTONIC_FIX": "0",
    }


def offset_text(offset_s: float) -> str:
    """libfaketime's relative format: `+12`, `-3600`, `+2.5`."""
    return f"{offset_s:+g}"


@functools.cache
def find() -> str:
    """The path of a working libfaketime, or EnvironmentProblem saying why there is none."""
    chosen = os.environ.get(ENV_VAR)
    candidates = [pathlib.Path(chosen)] if chosen else [*_packaged(), *CANDIDATES]
    refused: list[str] = []
    for path in candidates:
        if not path.is_file():
            if chosen:
                refused.append(f"{ENV_VAR}={chosen} is no file")
            continue
        problem = probe(str(path))
        if problem is None:
            return str(path)
        refused.append(f"{path}: {problem}")
    where = "; ".join(refused) or "none of " + ", ".join(str(p) for p in CANDIDATES)
    raise errors.EnvironmentProblem(
        f"clock_skew needs libfaketime >= 0.9.11 (pip install 'crashcert[clock]', or build "
        f"it and set {ENV_VAR}=/path/to/{LIBRARY}): {where}"
    )


def _packaged() -> list[pathlib.Path]:
    """The library inside the PyPI package `libfaketime`, found without importing it."""
    found = importlib.util.find_spec("libfaketime")
    if found is None or found.origin is None:
        return []
    return [pathlib.Path(found.origin).parent / "vendor" / "libfaketime" / "src" / LIBRARY]


def probe(library: str) -> str | None:
    """None when a Python with `library` preloaded sleeps, waits and is shifted at run time."""
    with tempfile.TemporaryDirectory(prefix="cc-faketime-") as directory:
        offset_file = os.path.join(directory, "offset")
        pathlib.Path(offset_file).write_text("+0\n")
        env = {**os.environ, **environment(library, offset_file)}
        try:
            done = subprocess.run(
                [sys.executable, "-c", _PROBE, offset_file],
                env=env,
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return f"a probe under it hung for {PROBE_TIMEOUT_S:g}s"
    if done.returncode == 0:
        return None
    tail = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    if "Invalid argument" in tail:
        tail += " (time.sleep: libfaketime < 0.9.11, wolfcw/libfaketime#426)"
    elif done.returncode == 3:
        tail = "the clock did not move when the offset file changed"
    return tail


class Clocks:
    """Per worker, an offset file its preloaded libfaketime reads: +0 until skewed."""

    def __init__(self, library: str) -> None:
        self.library = library
        self._directory = tempfile.mkdtemp(prefix="cc-clocks-")  # 0700: ours alone
        self._files: dict[str, str] = {}

    def env_for(self, worker_id: str) -> dict[str, str]:
        path = self._files.get(worker_id)
        if path is None:
            path = os.path.join(self._directory, f"{len(self._files)}.offset")
            _write(path, "+0\n")
            self._files[worker_id] = path
        return environment(self.library, path)

    def skew(self, worker_id: str | None, offset_s: float) -> bool:
        """Shift a worker's wall clock from now on; False when it has no clock of ours."""
        path = self._files.get(worker_id or "")
        if path is None:
            return False
        _write(path, offset_text(offset_s) + "\n")
        return True

    def close(self) -> None:
        shutil.rmtree(self._directory, ignore_errors=True)


def require(classes: Iterable[str]) -> str | None:
    """Up front, before a campaign runs a trial: None when no class skews a clock, else a
    line naming the library found, or EnvironmentProblem, once, instead of an ERROR in
    every clock_skew trial."""
    if not spec.SKEWS_CLOCK.intersection(classes):
        return None
    return f"clock_skew: libfaketime {find()}"


def for_plan(plan: Iterable[spec.FaultStep]) -> Clocks | None:
    """Clocks when the plan skews one (EnvironmentProblem when libfaketime is missing)."""
    if not any(step.action in spec.SKEWS_CLOCK for step in plan):
        return None
    return Clocks(find())


def _write(path: str, text: str) -> None:
    # Replaced whole, so a worker never reads half an offset.
    temporary = path + ".new"
    with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
        out.write(text)
    os.replace(temporary, path)
