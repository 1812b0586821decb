"""An engine may answer status questions from one long-lived process (`status_server` in
its description, CONTRACT.md section 5) instead of a status command per poll: a framework
is imported once, not once a second. The harness's side (status_server.py) against small
real processes, and the naive engine certified as a black box through its status server
earning the same verdicts as through its status command, from one process."""

from __future__ import annotations

import pathlib
import sys

import psutil
import pytest

from harness import errors
from harness.campaigns import certify
from harness.engines import commands, status_server
from harness.lab import shared
from harness.pool import autojobs
from harness.scenario import schema
from tests.contract import test_contract

HERE = pathlib.Path(__file__).resolve().parent
DESCRIPTION = HERE / "naive_engine_status_server.yaml"

# Answers with the question echoed; "die" exits without answering, "fail" reports an error,
# "hang" never answers.
ECHO = r"""
import json, sys, time
for line in sys.stdin:
    q = json.loads(line)
    if q["run_id"] == "die":
        sys.exit(3)
    if q["run_id"] == "hang":
        time.sleep(60)
    if q["run_id"] == "fail":
        print(json.dumps({"error": "no such run"}), flush=True)
        continue
    print(json.dumps({"run_id": q["run_id"], "dsn": q["database_url"]}), flush=True)
"""


def _server(timeout_s: float = 10.0) -> status_server.StatusServer:
    return status_server.StatusServer(
        [sys.executable, "-c", ECHO], cwd=".", env={}, name="echo", timeout_s=timeout_s
    )


def test_one_process_answers_every_question() -> None:
    server = _server()
    try:
        assert '"run_id": "r-1"' in server.ask("dsn-a", "r-1")
        first = server._process
        assert '"dsn": "dsn-b"' in server.ask("dsn-b", "r-2")
        assert server._process is first and server.asked == 2
    finally:
        server.close()
    assert first is not None and first.poll() is not None  # closed with the server


def test_a_server_that_died_is_started_again_and_its_errors_are_the_engines() -> None:
    server = _server()
    try:
        with pytest.raises(errors.CrashcertError, match="exited with code 3"):
            server.ask("dsn", "die")
        assert '"run_id": "r-3"' in server.ask("dsn", "r-3")  # a fresh process
        with pytest.raises(errors.CrashcertError, match="no such run"):
            server.ask("dsn", "fail")
    finally:
        server.close()


def test_a_server_that_does_not_answer_is_stopped_not_waited_for_forever() -> None:
    server = _server(timeout_s=1.0)
    try:
        with pytest.raises(errors.CrashcertError, match="no answer within"):
            server.ask("dsn", "hang")
        assert server._process is None
    finally:
        server.close()


@pytest.mark.postgres
@pytest.mark.matrix
def test_naive_engine_as_a_black_box_through_its_status_server(tmp_path: pathlib.Path) -> None:
    engine = commands.load(DESCRIPTION)
    with shared.open_lab(engine) as lab:
        cert = certify.certify(
            lab,
            [("refund", schema.find("refund"))],
            out_dir=tmp_path,
            engine_ref=str(DESCRIPTION),
            mode="blackbox",
            points=["world:tool.effect"],
            time_kills=0,
            jobs=autojobs.Auto(),
        )
        server = engine._server
        assert server is not None and server.asked >= len(cert.trials)
        process = server._process
        assert process is not None and psutil.Process(process.pid).is_running()
    # the same verdicts as through the status command (tests/contract/test_contract.py)
    test_contract.assert_at_least_once_with_duplicate_refund(cert)
    assert process.poll() is not None  # stopped with the lab
