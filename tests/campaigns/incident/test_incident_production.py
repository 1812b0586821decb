"""A production incident, end to end: the reference engine run by hand, outside the harness.

Two workers started as an operator would (`python -m reference_engine worker` with the
contract's environment) against a real Postgres, traced with OpenTelemetry to a file. The
first is SIGKILLed inside the refund call: the payment service applied the refund, its
answer never reached the worker. The second worker finishes the run. Then the on-call flow
of harness/INCIDENTS.md: import the trace (`incident import --otlp`) and export the engine's
database (`incident export --dsn`), and replay each against the broken engine that re-runs
a started tool call (tests/quality/engines/reexecute_started.yaml): FAIL, through the variant
where the refund had happened, `tool.at_most_once`; against the reference engine: PASS.
"""

from __future__ import annotations

import pathlib
import re
import threading
import typing

import click.testing
import pytest
import yaml

from harness.cli import main
from harness.lab import postgres
from harness.scenario import schema
from harness.world import ledger
from tests import fix_engine, fix_world

pytest.importorskip("opentelemetry.sdk")
pytestmark = [pytest.mark.postgres, pytest.mark.matrix]

BROKEN = str(fix_engine.REPO + "/tests/quality/engines/reexecute_started.yaml")
STARTED, RETURNED = "kill@tool.started#2", "kill@tool.returned#2"
COMMIT_LOST = "commit_lost@tool.started:before_commit#2"
TERMINAL = ("succeeded", "failed", "delivery_uncertain", "dead_lettered", "budget_exhausted")


class Incident(typing.NamedTuple):
    run_id: str
    traces: pathlib.Path
    dsn: str


@pytest.fixture
def incident(
    engine: fix_engine.Engine, make_world: fix_world.MakeWorld, tmp_path: pathlib.Path
) -> Incident:
    refund = schema.find("refund")
    world = make_world(refund)
    traces = tmp_path / "traces.jsonl"
    otel = {
        "OTEL_TRACES_EXPORTER": "otlp_file",
        "CRASHCERT_OTEL_TRACES_FILE": str(traces),
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
    }
    first = engine.start_worker(world, worker_id="prod-worker-a", **otel)
    killed = threading.Event()

    def kill_inside_the_refund(effect: ledger.ToolEffect) -> None:
        # the refund is applied, its answer not sent: the worker dies waiting for it
        if effect.tool == "refund_order" and not killed.is_set():
            engine.kill(first)
            killed.set()

    world.hooks.tool_effect_applied = kill_inside_the_refund
    run_id = engine.submit(fix_engine.run_input(world))
    fix_world.wait_for(killed.is_set, timeout=60, what="the kill inside the refund call")
    engine.start_worker(world, worker_id="prod-worker-b", **otel)
    report = fix_world.wait_for(
        lambda: (found := engine.status(run_id))["status"] in TERMINAL and found,
        timeout=90,
        what="the run to end",
    )
    # In production the reference engine was right: one refund, asked by key, not re-run.
    assert report["status"] == "succeeded"
    refunds = [e for e in world.tools.entries() if isinstance(e, ledger.ToolEffect)]
    assert [e.tool for e in refunds].count("refund_order") == 1
    return Incident(run_id=run_id, traces=traces, dsn=engine.dsn)


def crashcert(*argv: str) -> click.testing.Result:
    return click.testing.CliRunner().invoke(main.main, ["--isolation", "off", *argv])


def scenario_from(result: click.testing.Result) -> schema.Scenario:
    assert result.exit_code == 0, result.output
    return schema.parse(yaml.safe_load(result.output), source="incident")


def replay(
    path: pathlib.Path, engine: str, pg: postgres.Server, out: pathlib.Path
) -> tuple[int, str]:
    result = crashcert(
        "replay", "--engine", engine, str(path), "--pg-dsn", pg.dsn, "--out", str(out)
    )
    return result.exit_code, result.output


def verdict_of(output: str, plan: str) -> str:
    """The verdict the summary prints for one plan."""
    found = re.search(rf"^(PASS|FAIL|INCONCLUSIVE|ERROR)\s+{re.escape(plan)}(\s|$)", output, re.M)
    assert found, output
    return found[1]


def test_traced_incident_fails_on_the_broken_engine_and_passes_on_the_reference(
    incident: Incident, pg_server: postgres.Server, tmp_path: pathlib.Path
) -> None:
    scenario = scenario_from(crashcert("incident", "import", "--otlp", str(incident.traces)))
    refund = schema.find("refund")
    assert scenario.faults == [STARTED]
    assert scenario.variants == [[RETURNED]]
    assert scenario.turns == refund.turns  # ids, arguments with {run}, content, usage
    assert scenario.input.user == refund.input.user
    assert [(t.name, t.replay, t.queryable) for t in scenario.tools] == [
        (t.name, t.replay, t.queryable) for t in refund.tools
    ]
    path = tmp_path / "traced.yaml"
    path.write_text(yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False))

    code, output = replay(path, BROKEN, pg_server, tmp_path / "broken")
    assert code == 1, output
    # Both readings reproduce it: a started refund re-run blindly (tool.unknown_outcome),
    # and, where the refund had happened, a second refund (tool.at_most_once).
    assert verdict_of(output, STARTED) == verdict_of(output, RETURNED) == "FAIL"
    reproduced = output.split("incident reproduced by ")[1]
    assert re.search(r"kill@tool\.returned#2 \([^)]*tool\.at_most_once", reproduced), output

    code, output = replay(path, "reference", pg_server, tmp_path / "reference")
    assert code == 0, output
    assert verdict_of(output, STARTED) == verdict_of(output, RETURNED) == "PASS"
    assert "incident no longer reproduces (2 plan(s) PASS" in output


def test_database_incident_fails_on_the_broken_engine_and_passes_on_the_reference(
    incident: Incident, pg_server: postgres.Server, tmp_path: pathlib.Path
) -> None:
    scenario = scenario_from(
        crashcert("incident", "export", "--dsn", incident.dsn, "--run", incident.run_id)
    )
    assert scenario.faults == [STARTED]
    assert scenario.variants == [[RETURNED], [COMMIT_LOST]]
    path = tmp_path / "database.yaml"
    path.write_text(yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False))

    code, output = replay(path, BROKEN, pg_server, tmp_path / "broken")
    assert code == 1, output
    assert verdict_of(output, RETURNED) == "FAIL"
    reproduced = output.split("incident reproduced by ")[1]
    assert re.search(r"kill@tool\.returned#2 \([^)]*tool\.at_most_once", reproduced), output

    code, output = replay(path, "reference", pg_server, tmp_path / "reference")
    assert code == 0, output
    assert all(verdict_of(output, plan) == "PASS" for plan in (STARTED, RETURNED, COMMIT_LOST))
