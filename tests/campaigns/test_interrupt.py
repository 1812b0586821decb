"""Ctrl-C in the middle of a trial: the trial is stored as interrupted (INCONCLUSIVE, not an
ERROR of the harness), analyze says so, and nothing is left behind; SIGTERM leaves no
control socket behind either."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import pytest
import yaml

from harness import checkers
from harness.checkers import verdict
from harness.scenario import schema
from harness.trial import interrupt
from tests.checkers import builders

pytestmark = [pytest.mark.postgres, pytest.mark.matrix]
CRASHCERT = str(pathlib.Path(sys.executable).parent / "crashcert")
STARTED_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30
POLL_S = 0.1
SLOW_LOOKUP_MS = 30_000  # the trial is still waiting on the lookup when the signal comes


def _slow_refund(directory: pathlib.Path) -> pathlib.Path:
    data = yaml.safe_load((schema.bundled_dir() / "refund.yaml").read_text())
    data["tools"][0]["behaviour"]["latency_ms"] = SLOW_LOOKUP_MS
    data["deadline_s"] = 60
    data["name"] = "slow_refund"
    path = directory / "slow_refund.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def private_tmp() -> Iterator[pathlib.Path]:
    """The child's TMPDIR, where its control socket's directory goes. Outside pytest's
    0700 tree: the embedded cluster's directory is made there too, for the postgres user."""
    directory = pathlib.Path(tempfile.mkdtemp(prefix="crashcert-test-tmp-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def _default_signals() -> None:
    """A suite started in the background (CI runners, nohup) may ignore SIGINT, and an
    ignored signal stays ignored across exec: the child would never see the Ctrl-C."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


def _start(tmp_path: pathlib.Path, private_tmp: pathlib.Path) -> subprocess.Popen[str]:
    scenario_file = _slow_refund(tmp_path)
    child = subprocess.Popen(
        [CRASHCERT, "run", "--scenario", str(scenario_file), "--out", "out"],
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(private_tmp)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_signals,
    )
    deadline = time.monotonic() + STARTED_TIMEOUT_S
    # The lookup has been asked once its worker is running: wait for the worker's log.
    while not list(tmp_path.glob("out/*/slow_refund/*/workers/*.log")):
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the trial never started its workers"
        time.sleep(POLL_S)
    time.sleep(1.0)  # well inside the 30 s lookup
    return child


def test_ctrl_c_stores_the_trial_as_interrupted(
    tmp_path: pathlib.Path, private_tmp: pathlib.Path
) -> None:
    child = _start(tmp_path, private_tmp)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=STOP_TIMEOUT_S)
    assert child.returncode == 130, err[-3000:]
    assert "Traceback" not in err

    [meta_path] = tmp_path.glob("out/*/slow_refund/*/meta.json")
    meta = json.loads(meta_path.read_text())
    assert meta["interrupted"] == interrupt.NOTE
    assert meta["verdict"] == "INCONCLUSIVE"  # not ERROR: the harness did not break
    assert not list(private_tmp.glob("cc-*")), "the control socket's directory was left"

    analyzed = subprocess.run(
        [CRASHCERT, "analyze", str(meta_path.parent)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert analyzed.returncode == 2, analyzed.stdout + analyzed.stderr
    assert f"INTERRUPTED: {interrupt.NOTE}" in analyzed.stdout


def test_sigterm_stops_as_ctrl_c_does_and_leaves_no_control_socket(
    tmp_path: pathlib.Path, private_tmp: pathlib.Path
) -> None:
    """A CI runner cancelling the job sends SIGTERM: the same stop as Ctrl-C (issue 33)."""
    child = _start(tmp_path, private_tmp)
    assert list(private_tmp.glob("cc-*/control.sock"))  # it exists while the trial runs
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=STOP_TIMEOUT_S)
    assert child.returncode == 130, err[-3000:]
    assert "Traceback" not in err
    [meta_path] = tmp_path.glob("out/*/slow_refund/*/meta.json")
    meta = json.loads(meta_path.read_text())
    assert (meta["interrupted"], meta["verdict"]) == (interrupt.NOTE, "INCONCLUSIVE")
    assert not list(private_tmp.glob("cc-*"))


def test_a_pool_stopped_by_ctrl_c_drops_what_has_not_started() -> None:
    started: list[int] = []

    def work(item: int) -> int:
        started.append(item)
        if item == 0:
            raise KeyboardInterrupt  # as the main thread would see it, from the first item
        return item

    with pytest.raises(KeyboardInterrupt):
        interrupt.run_pool(work, range(100), jobs=1)
    assert len(started) < 100
    assert not interrupt.requested()  # cleared for the next campaign in this process


def test_an_interrupted_trial_is_inconclusive_even_when_its_teardown_broke() -> None:
    trial = builders.clean().model_copy(
        update={"interrupted": interrupt.NOTE, "harness_error": "OperationalError: gone"}
    )
    results = checkers.check_all(trial)
    assert checkers.trial_verdict(trial, results) is verdict.Verdict.INCONCLUSIVE
    broken = trial.model_copy(update={"interrupted": None})
    assert checkers.trial_verdict(broken, results) is verdict.Verdict.ERROR


@pytest.mark.parametrize(
    "stop",
    [
        pytest.param("sigterm", id="sigterm-to-crashcert"),
        # Ctrl-C in a terminal: SIGINT to the whole foreground process group
        pytest.param("ctrl-c", id="sigint-to-its-group"),
    ],
)
def test_a_stop_mid_matrix_keeps_what_ran_and_stores_the_trial_in_flight(
    tmp_path: pathlib.Path, private_tmp: pathlib.Path, stop: str
) -> None:
    """A CI job cancelled, or a user's Ctrl-C, mid-matrix (issue 33): the trials that ended
    keep their verdicts, the one in flight is stored INCONCLUSIVE, nothing more starts, and
    analyze reads them all."""
    slow = _slow_refund(tmp_path)
    child = subprocess.Popen(
        [
            *(CRASHCERT, "matrix", "--scenario", "refund", "--scenario", str(slow)),
            *("--points", "tool.returned", "--jobs", "1", "--out", "out"),
        ],
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(private_tmp)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_signals,
        start_new_session=True,  # a group of its own, as a terminal's foreground job
    )
    deadline = time.monotonic() + STARTED_TIMEOUT_S
    # refund's baseline ended, and slow_refund's trial waits on its 30 s lookup.
    while not (
        list(tmp_path.glob("out/*/refund/*/history.jsonl"))
        and list(tmp_path.glob("out/*/slow_refund/*/workers/*.log"))
    ):
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the matrix never reached slow_refund"
        time.sleep(POLL_S)
    time.sleep(1.0)
    if stop == "sigterm":
        child.send_signal(signal.SIGTERM)
    else:
        os.killpg(child.pid, signal.SIGINT)
    out, err = child.communicate(timeout=STOP_TIMEOUT_S)
    assert child.returncode == 130, (out + err)[-3000:]
    assert "Traceback" not in err
    assert not list(private_tmp.glob("cc-*")), "the control socket's directory was left"

    metas = {
        path.parent.relative_to(next(tmp_path.glob("out/*"))).as_posix(): json.loads(
            path.read_text()
        )
        for path in tmp_path.glob("out/*/*/*/meta.json")
    }
    finished = {name: m["verdict"] for name, m in metas.items() if not m["interrupted"]}
    stopped = {name: m["verdict"] for name, m in metas.items() if m["interrupted"]}
    assert finished and set(finished.values()) == {"PASS"}, metas
    assert list(stopped.values()) == ["INCONCLUSIVE"], metas  # one in flight, none after
    [name] = stopped
    assert name.startswith("slow_refund/"), metas
    assert all((tmp_path / "out").glob(f"*/{name}/history.jsonl") for name in metas)

    analyzed = subprocess.run(
        [CRASHCERT, "analyze", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert analyzed.returncode == 2, analyzed.stdout + analyzed.stderr  # worst: INCONCLUSIVE
    assert analyzed.stdout.count(f"INTERRUPTED: {interrupt.NOTE}") == 1, analyzed.stdout
