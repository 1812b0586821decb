"""The runner records a worker that died on its own with the tail of its log (trial.py), so
the checkers can point a stranger at what broke; a killed worker is not a crash."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any, cast

import rich.console

from harness.campaigns import certify
from harness.checkers import judge
from harness.record import history, recorder
from harness.trial import runner
from tests.checkers import builders


@dataclasses.dataclass
class _Worker:
    worker_id: str
    log_path: pathlib.Path
    returncode: int | None
    alive: bool = False
    killed: bool = False
    replaced: bool = False
    pid: int = 4242


class _Launcher:
    def __init__(self, *workers: _Worker) -> None:
        self._workers = list(workers)
        self.started = 0
        self.workers = self

    def all(self) -> list[_Worker]:
        return list(self._workers)

    def start(self) -> None:
        self.started += 1


def _log(tmp_path: pathlib.Path, name: str, text: str) -> pathlib.Path:
    path = tmp_path / runner.WORKER_LOGS / f"{name}.log"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_a_crashed_worker_is_recorded_with_its_log_tail_and_replaced(
    tmp_path: pathlib.Path,
) -> None:
    noise = "".join(f"step {i}\n" for i in range(100))
    crashed = _Worker(
        "t-w2",
        _log(
            tmp_path,
            "t-w2",
            noise + "connecting to postgresql://crashcert:s3cret@127.0.0.1/x\n"
            "Traceback (most recent call last):\n\nZeroDivisionError: division by zero\n",
        ),
        returncode=1,
    )
    killed = _Worker("t-w1", _log(tmp_path, "t-w1", "bye\n"), returncode=-9, killed=True)
    alive = _Worker("t-w3", _log(tmp_path, "t-w3", ""), returncode=None, alive=True)
    launcher = _Launcher(killed, crashed, alive)
    record = recorder.Recorder()
    runner._record_crashes(cast(Any, launcher), record, replace=True)
    (event,) = record.events()
    assert isinstance(event, history.WorkerEvent)
    assert (event.event, event.worker_id, event.returncode) == ("crashed", "t-w2", 1)
    assert event.log == "workers/t-w2.log"
    assert len(event.log_tail) == runner.LOG_TAIL_LINES
    assert event.log_tail[-2:] == [
        "Traceback (most recent call last):",
        "ZeroDivisionError: division by zero",
    ]
    assert not any("s3cret" in line for line in event.log_tail)
    assert launcher.started == 1  # replaced, as a supervisor would
    # seen once: the next look neither records nor replaces it again
    runner._record_crashes(cast(Any, launcher), record, replace=True)
    assert len(record.events()) == 1 and launcher.started == 1


def test_a_worker_that_ended_cleanly_is_replaced_but_not_a_crash(tmp_path: pathlib.Path) -> None:
    done = _Worker("t-w1", _log(tmp_path, "t-w1", "idle, exiting\n"), returncode=0)
    launcher = _Launcher(done)
    record = recorder.Recorder()
    runner._record_crashes(cast(Any, launcher), record, replace=True)
    assert record.events() == [] and launcher.started == 1


def test_the_certificate_shows_why_a_trial_failed_and_where_its_logs_are() -> None:
    trial = builders.Trial()
    trial.claim("w-1")
    trial.model_turn(0)
    seq, t = trial.tick()
    trial.events.append(
        history.WorkerEvent(
            seq=seq, t=t, event="crashed", worker_id="w-1", pid=7, returncode=1,
            log="workers/w-1.log", log_tail=["ZeroDivisionError: division by zero [x]"],
        )
    )  # fmt: skip
    trial.report("running")
    built = trial.build()
    results, verdict = judge.judge(built)
    directory = pathlib.Path("/trials/refund/baseline")
    outcome = runner.TrialOutcome(
        spec=runner.TrialSpec(scenario=built.scenario), history=built, results=results,
        verdict=verdict, directory=directory, repro="crashcert run x",
    )  # fmt: skip
    cert = certify.Certification(
        engine="e", engine_ref="e.yaml", modes=["boundary"],
        trials=[certify.CertTrial("boundary", outcome)],
    )  # fmt: skip
    console = rich.console.Console(record=True, width=400)
    certify.print_certification(cert, console=console)
    text = console.export_text()
    assert "    why: run.liveness: hung: not terminal at the end" in text
    assert "see workers/w-1.log, last line 'ZeroDivisionError: division by zero [x]'" in text
    assert f"    trial: {directory}" in text
