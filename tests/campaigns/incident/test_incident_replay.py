"""A real trial of the reference engine with a kill, exported as an incident, replayed.

Both sources of the engine's tables are used and must agree: the live database (--dsn; the
test keeps the trial's database, which a trial otherwise drops) and the stored trial directory
(--trial: the trial keeps the export in its history).
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import click.testing
import pytest
import yaml

from harness.checkers import verdict
from harness.cli import main
from harness.engines import commands
from harness.faults import spec as fault_spec
from harness.incident import incident
from harness.lab import postgres, shared
from harness.scenario import schema
from harness.trial import runner as trial_module

pytestmark = pytest.mark.postgres
KILL = "kill@tool.started#2"  # the refund: started, never recorded by the killed worker


@pytest.fixture(scope="module")
def lab(pg_server: postgres.Server) -> Iterator[shared.Lab]:
    with shared.open_lab(commands.find("reference"), pg_dsn=pg_server.dsn) as opened:
        yield opened


def export(*args: str) -> schema.Scenario:
    result = click.testing.CliRunner().invoke(main.main, ["incident", "export", *args])
    assert result.exit_code == 0, result.output
    return schema.parse(yaml.safe_load(result.output), source="exported")


def test_trial_exported_and_replayed(
    lab: shared.Lab, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refund = schema.find("refund")
    step = fault_spec.FaultStep(action="kill", point="tool.started", occurrence=2)
    spec = trial_module.TrialSpec(scenario=refund, plan=[step], label=KILL)
    kept: list[str] = []
    monkeypatch.setattr(lab, "drop_database", kept.append)  # keep it for --dsn
    original = trial_module.run_trial(lab, spec, out_dir=tmp_path / "original")
    monkeypatch.undo()
    assert original.verdict is verdict.Verdict.PASS, original.failing
    assert original.history.run_id is not None and len(kept) == 1
    try:
        live = export("--dsn", lab.pg.database_dsn(kept[0]), "--run", original.history.run_id)
    finally:
        lab.drop_database(kept[0])

    exported = export("--trial", str(original.directory))

    # The same run either way; the database's faults are inferred from its event trail (with
    # the variants it cannot rule out), the trial's are the ones it applied.
    same = {"description", "faults", "variants", "note"}
    assert live.model_dump(exclude=same) == exported.model_dump(exclude=same)
    assert live.faults == [KILL] and "reconciler" in live.note
    assert live.variants == [["kill@tool.returned#2"], ["commit_lost@tool.started:before_commit#2"]]
    assert exported.faults == [KILL] and exported.variants == []
    assert f"{KILL}: the trial applied it at tool.started#2" in exported.note
    assert exported.turns == refund.turns  # same decisions, usage, ids; run key as {run}
    assert exported.input.user == refund.input.user
    assert exported.budgets == refund.budgets
    assert [(t.name, t.replay, t.effect, t.queryable) for t in exported.tools] == [
        (t.name, t.replay, t.effect, t.queryable) for t in refund.tools
    ]
    # Results come from what the run recorded. The refund never ran here: the kill came
    # before its request, and the engine never resends a non-replayable call (it ends
    # outcome_unknown), so only the lookup's result is known.
    assert exported.tools[0].name == "lookup_order"
    assert exported.tools[0].behaviour.result == refund.tools[0].behaviour.result
    assert exported.expect.status == "succeeded" and exported.sink.queryable

    path = tmp_path / "incident.yaml"
    path.write_text(incident.to_yaml(exported))
    loaded = schema.load(path)
    replay_spec = trial_module.TrialSpec.under(loaded, loaded.faults, scenario_ref=str(path))
    replayed = trial_module.run_trial(lab, replay_spec, out_dir=tmp_path / "replay")

    assert [s.label() for s in replayed.history.plan] == [KILL]
    assert replayed.history.scenario.turns == refund.turns
    applied = [f.step for f in replayed.history.faults() if f.action == "kill" and f.ok]
    assert applied == [KILL]
    assert replayed.verdict is verdict.Verdict.PASS, replayed.failing
    assert incident.conclusion(replayed.verdict) == "incident no longer reproduces"
    assert f"--scenario {path}" in replayed.repro
    # The replay's own run, exported again, is the same incident.
    again = export("--trial", str(replayed.directory))
    assert again.faults == [KILL] and again.turns == refund.turns

    redacted = export("--trial", str(original.directory), "--redact")
    assert "ord-" not in incident.to_yaml(redacted)
    assert redacted.faults == [KILL]
    assert [len(t.tool_calls) for t in redacted.turns] == [1, 1, 0]
    assert redacted.turns[-1].content is not None and "redacted" in redacted.turns[-1].content


def test_export_needs_a_source() -> None:
    result = click.testing.CliRunner().invoke(main.main, ["incident", "export", "--dsn", "x"])
    assert result.exit_code != 0
    assert "--trial" in str(result.exception) or "--trial" in result.output
