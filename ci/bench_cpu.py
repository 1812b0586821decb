"""CPU seconds spent by each part of a lab, read from /proc (through psutil), for benchmarks.

A part is a root process and its live descendants: Postgres (the postmaster and its
backends), the engine's workers (the fork server and its children), Toxiproxy, and the
harness (this process, whatever it reaped, and any other descendant). A process that ended
and was reaped counts in its reaper's children times, so the sum over live processes of own
plus children times counts every CPU second once. The roots must live from one sample to the
next (no Postgres restart in between).
"""

from __future__ import annotations

import contextlib
from typing import Any

import psutil
import psycopg

PARTS = ("Postgres", "workers", "harness", "Toxiproxy")


def _total(process: psutil.Process) -> float:
    with contextlib.suppress(psutil.Error):
        t = process.cpu_times()
        return float(t.user + t.system + t.children_user + t.children_system)
    return 0.0


def _tree(root: psutil.Process) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        return [root, *root.children(recursive=True)]
    return []


def roots(lab: Any) -> dict[str, int]:
    """The root pid of each part of an open lab (shared.Lab); a part it lacks is left out."""
    found: dict[str, int] = {}
    postmaster = getattr(lab.pg, "postmaster_pid", None)
    if postmaster is not None:
        found["Postgres"] = int(postmaster())
    else:
        with psycopg.connect(lab.pg.dsn, autocommit=True) as conn:
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
            assert row is not None
            found["Postgres"] = psutil.Process(int(row[0])).ppid()  # a backend's parent
    forkserver = getattr(lab.forkserver, "_process", None)
    if forkserver is not None:
        found["workers"] = int(forkserver.pid)
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "toxiproxy" in child.name():
                found["Toxiproxy"] = child.pid
                break
    return found


def sample(parts: dict[str, int]) -> dict[str, float]:
    """CPU seconds so far of each part (and of the harness: everything else of ours)."""
    seen: set[int] = set()
    out: dict[str, float] = {}
    for name, pid in parts.items():
        with contextlib.suppress(psutil.Error):
            tree = _tree(psutil.Process(pid))
            seen.update(p.pid for p in tree)
            out[name] = sum(_total(p) for p in tree)
    own = psutil.Process()
    harness = _total(own)
    for process in own.children(recursive=True):
        if process.pid not in seen:
            harness += _total(process)
    out["harness"] = harness
    return out


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {name: after.get(name, 0.0) - before.get(name, 0.0) for name in PARTS}
