"""langchain-ai/langgraph#8039, reproduced with PostgresSaver: under durability="sync" a
task's `put_writes` and the next checkpoint's `put` race on background threads
(langgraph_engine/race_8039.py forces each side). On the installed LangGraph, and on the
two pinned environments ci/langgraph_8039/envs.py builds: 1.2.4 (the issue's version) and
1.2.4 with PR #8055's loop, the fix as proposed (no release has one).

What it shows, and what it does not: a kill once `put` was called but before anything
committed re-runs the node when `put_writes` lost the race (the node's side effect twice;
with the writes awaited first, as PRs #8050/#8055 proposed, `put` would only start once
they were durable). A kill *between* a committed `put` and `put_writes` re-runs nothing:
the checkpoint's channel values hold the task's output. No released LangGraph awaits the
writes (the PRs were closed unmerged; the issue is open), so there is no fixed release to
pin: the PR's own change is the passing control.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import uuid

import pytest

pytest.importorskip("langgraph.checkpoint.postgres", reason="langgraph-checkpoint-postgres missing")

pytestmark = pytest.mark.postgres

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "contract" / "langgraph_engine" / "race_8039.py"
ENVS = ROOT / "ci" / "langgraph_8039" / "envs.py"
BUILD_TIMEOUT_S = 1200


@pytest.fixture(scope="session")
def pinned() -> dict[str, str]:
    """name -> Python of each pinned environment (built once, then cached)."""
    built = subprocess.run(
        [sys.executable, str(ENVS)], capture_output=True, text=True, timeout=BUILD_TIMEOUT_S
    )
    if built.returncode != 0:
        pytest.skip(f"pinned LangGraph environments not built: {built.stderr.strip()[-300:]}")
    envs: dict[str, str] = json.loads(built.stdout.splitlines()[-1])
    return envs


def _race(
    dsn: str, tmp_path: pathlib.Path, *, delay: str, kill: str, python: str = sys.executable
) -> tuple[int, dict]:
    effects = tmp_path / f"effects-{delay}-{kill}"
    env = {**os.environ, "DATABASE_URL": dsn, "EFFECTS": str(effects)}
    env.update(THREAD=uuid.uuid4().hex, DELAY=delay, KILL=kill)
    start = subprocess.run([python, str(SCRIPT), "start"], env=env, timeout=120)
    assert start.returncode == -signal.SIGKILL, "the saver's kill never struck"
    resume = subprocess.run(
        [python, str(SCRIPT), "resume"], env=env, timeout=120, capture_output=True
    )
    assert resume.returncode == 0, resume.stderr.decode()
    found = json.loads(resume.stdout.decode().splitlines()[-1])
    return effects.read_text().count("effect"), found


def test_put_winning_the_race_leaves_the_writes_unsaved_and_the_node_runs_twice(
    fresh_database: str, tmp_path: pathlib.Path
) -> None:
    runs, found = _race(fresh_database, tmp_path, delay="put_writes", kill="put_entry")
    # A fixed LangGraph (writes awaited before put) turns this into 1: revisit the pins.
    assert found == {"next": ["effect"], "writes_saved": []}
    assert runs == 2


def test_a_kill_between_a_committed_put_and_put_writes_reruns_nothing(
    fresh_database: str, tmp_path: pathlib.Path
) -> None:
    runs, found = _race(fresh_database, tmp_path, delay="put_writes", kill="put_committed")
    assert found == {"next": ["after"], "writes_saved": []}
    assert runs == 1


@pytest.mark.parametrize(("name", "runs"), [("1.2.4", 2), ("1.2.4+pr8055", 1)])
def test_the_issues_version_runs_the_node_twice_and_the_prs_loop_once(
    pinned: dict[str, str], fresh_database: str, tmp_path: pathlib.Path, name: str, runs: int
) -> None:
    """The same forced race as the first test: `put_writes` delayed, killed once `put` was
    called. With PR #8055's loop `put` starts only after the writes are durable."""
    found_runs, found = _race(
        fresh_database, tmp_path, delay="put_writes", kill="put_entry", python=pinned[name]
    )
    assert found_runs == runs, found
    assert found["writes_saved"] == ([] if runs == 2 else ["effect"])
