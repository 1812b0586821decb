"""A worker's double-forked daemon does not outlive its trial (issue 33): a real trial of an
engine whose every worker starts a daemon (fork, setsid, fork; reparented to init, deaf to
SIGTERM), after which no daemon's pid is a live daemon. Forked from the warm server, exec'd,
and with no writable cgroup (the session and environment sweep); the trial records which
containment held it and how many processes teardown found left."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import sys
from collections.abc import Iterator

import psutil
import pytest

from harness.checkers import verdict
from harness.engines import commands
from harness.lab import cgroups, processes, shared
from harness.scenario import schema
from harness.trial import artifacts, runner
from tests.hostile import daemon_engine

pytestmark = [pytest.mark.postgres, pytest.mark.toxiproxy]

REPO = pathlib.Path(__file__).resolve().parents[2]
# init (pid 1 here) reaps a killed daemon when it gets to it: dead, not yet gone
GONE_TIMEOUT_S = 30.0

DESCRIPTION = """\
name: daemonizing
workdir: {repo}
migrate: ["{{python}}", "-m", "reference_engine", "migrate"]
worker: ["{{python}}", "-m", "tests.hostile.daemon_engine", "worker"]
submit: ["{{python}}", "-m", "reference_engine", "submit", "--input", "-"]
status: ["{{python}}", "-m", "reference_engine", "status", "{{run_id}}"]
python_adapter: reference_engine.adapter
lease_ms: 300
env: {{CRASHCERT_POLL_MS: "50", {variable}: "{pids}"}}
"""


def _describe(directory: pathlib.Path, *, forked: bool) -> pathlib.Path:
    text = DESCRIPTION.format(
        repo=REPO, variable=daemon_engine.PIDS_VARIABLE, pids=directory / "daemons"
    )
    if forked:
        text += "preload: [reference_engine.preload]\n"
    path = directory / "engine.yaml"
    path.write_text(text)
    return path


def _live_daemon(pid: int, pids_file: pathlib.Path) -> bool:
    """A process with that pid that is one of our daemons (not a zombie, not a reuse)."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return process.environ().get(daemon_engine.PIDS_VARIABLE) == str(pids_file)
    except psutil.Error:
        return False


@pytest.fixture
def daemons(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    """The daemons' pid file; whatever outlives the test is killed (the old code's leak)."""
    pids_file = tmp_path / "daemons"
    yield pids_file
    for pid in _pids(pids_file):
        if _live_daemon(pid, pids_file):
            os.kill(pid, signal.SIGKILL)


def _pids(pids_file: pathlib.Path) -> list[int]:
    return [int(line) for line in pids_file.read_text().split()] if pids_file.exists() else []


@pytest.mark.parametrize(
    ("forked", "cgroup"),
    [(True, True), (False, True), (True, False)],
    ids=["forked-cgroup", "execd-cgroup", "forked-sweep"],
)
def test_no_daemon_a_worker_started_outlives_the_trial(
    forked: bool,
    cgroup: bool,
    daemons: pathlib.Path,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if cgroup:
        parent = cgroups.find_parent()
        if parent.path is None:
            pytest.skip(f"no writable cgroup v2 here: {parent.reason}")
    else:
        monkeypatch.setattr(cgroups, "find_parent", lambda: cgroups.Parent(None, "test: none"))
    if not forked:
        monkeypatch.setenv("CRASHCERT_NO_FORKSERVER", "1")
    engine = commands.load(_describe(tmp_path, forked=forked))
    spec = runner.TrialSpec.under(schema.find("refund"), [], scenario_ref="refund")
    with shared.open_lab(engine) as lab:
        assert (lab.forkserver is not None) == forked
        outcome = runner.run_trial(lab, spec, out_dir=tmp_path / "out")

    pids = _pids(daemons)
    assert len(pids) >= spec.initial_workers, "every worker started its daemon"
    assert outcome.verdict is verdict.Verdict.PASS, [r.summary for r in outcome.failing]
    assert processes.wait_until(
        lambda: not any(_live_daemon(pid, daemons) for pid in pids), timeout=GONE_TIMEOUT_S
    ), [pid for pid in pids if _live_daemon(pid, daemons)]
    (directory,) = artifacts.find_trials(tmp_path / "out")
    said = json.loads((directory / "meta.json").read_text())["containment"]
    assert said == artifacts.read_history(directory / "history.jsonl").containment
    assert said.startswith("cgroup v2" if cgroup else "session and environment sweep (test"), said
    assert said.endswith(f"; {len(pids)} process(es) left by the workers killed at teardown")


def test_the_daemon_engine_daemon_outlives_its_worker_uncontained(
    daemons: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """What the test above relies on: without containment, a group kill of the worker
    leaves its daemon alive (so the trial's teardown, not the worker's death, ends it)."""
    env = {**os.environ, daemon_engine.PIDS_VARIABLE: str(daemons), "PYTHONPATH": str(REPO)}
    code = (
        "import os, time\n"
        "from tests.hostile import daemon_engine\n"
        f"daemon_engine.start_daemon(os.environ[{daemon_engine.PIDS_VARIABLE!r}])\n"
        "time.sleep(600)\n"
    )
    worker = processes.Worker(
        "w1", [sys.executable, "-c", code], env=env, log_dir=tmp_path, cwd=str(REPO)
    )
    assert processes.wait_until(lambda: bool(_pids(daemons)), timeout=30)
    worker.kill()
    (pid,) = _pids(daemons)
    assert _live_daemon(pid, daemons)
    assert psutil.Process(pid).ppid() != worker.pid and os.getsid(pid) != worker.pid
