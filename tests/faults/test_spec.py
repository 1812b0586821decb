"""The fault catalog: one definition per class, read by the plan, the explorer and the CLI."""

from __future__ import annotations

import typing

import click.testing
import pytest

from harness import errors
from harness.checkers import facts
from harness.cli import main
from harness.contract import boundaries
from harness.faults import spec
from harness.planning import plan

TRACE = [(point, 1) for point in boundaries.all_points()]


def test_a_step_accepts_exactly_the_catalog_actions() -> None:
    action = spec.FaultStep.model_fields["action"].annotation
    assert typing.get_args(action) == spec.NAMES
    assert spec.NAMES == (
        "kill", "pause", "db_cut", "commit_lost", "commit_dropped", "latency", "pg_restart",
        "pg_failover", "submit_twice", "response_lost", "stream_cut", "tool_cut", "model_cut",
        "sink_cut", "clock_skew", "term", "dup_owner", "upgrade", "store_cut",
        "store_response_lost", "server_restart",
    )  # fmt: skip


def test_every_class_reads_known_params_and_heals_with_the_heal_params() -> None:
    for fault in spec.CATALOG.values():
        assert set(fault.params) <= set(spec.PARAMS), fault.name
        assert fault.healed == ("heal_at" in fault.params), fault.name
        assert not fault.healed or fault.ended_by in spec.ENDINGS, fault.name
    assert spec.ENDINGS == {
        "heal", "resume", "pg_start", "grace_over", "upgraded", "server_start",
    }  # fmt: skip


def test_where_each_class_applies() -> None:
    assert spec.applies_at("kill", "run.finished")
    assert spec.applies_at("commit_lost", "run.finished:before_commit")
    assert not spec.applies_at("commit_dropped", "run.finished")
    assert not spec.applies_at("pause", "run.finished:before_commit")
    assert spec.applies_at("latency", "reply.sent")
    assert spec.recovery_follows("run.finished:before_commit")
    assert not spec.recovery_follows("run.finished")


@pytest.mark.parametrize("fault", spec.MATRIX)
def test_the_matrix_plans_a_class_exactly_where_it_applies(fault: str) -> None:
    trace = [*TRACE, *((point, 1) for point in boundaries.WORLD_POINTS)]
    planned = [steps[0] for steps in plan.fault_plans(trace, [fault])]
    if spec.CATALOG[fault].per_run:  # the run as a whole: once per choice, at no point
        trace = [(spec.RUN_POINT, 1)] * len(spec.per_run_choices(fault))
    # pg_failover: each point once per choice (sync=1, sync=0), in that order.
    each = len(spec.per_run_choices(fault)) if spec.CATALOG[fault].each_choice else 1
    assert [(s.point, s.occurrence) for s in planned] == [
        (point, 1) for point, _ in trace if spec.applies_at(fault, point) for _ in range(each)
    ]
    assert {s.action for s in planned} == {fault}


def test_a_failover_is_planned_synchronous_and_asynchronous_at_each_point() -> None:
    planned = [steps[0] for steps in plan.fault_plans([("tools.pending", 1)], ["pg_failover"])]
    assert [s.label() for s in planned] == [
        "pg_failover@tools.pending#1?sync=1",
        "pg_failover@tools.pending#1?sync=0",
    ]
    assert spec.parse("pg_failover@tool.settled#2?sync=0").params == {"sync": "0"}
    with pytest.raises(errors.CrashcertError, match="sync=2"):
        spec.parse("pg_failover@tool.settled#2?sync=2")
    with pytest.raises(errors.CrashcertError, match="pg_failover reads only sync"):
        spec.parse("pg_failover@tool.settled#2?heal_after_s=1")


@pytest.mark.parametrize("other", ["pg_failover@reply.ready#1", "pg_restart@reply.ready#1"])
def test_a_plan_fails_over_once_and_restarts_nothing_else(other: str) -> None:
    texts = ["pg_failover@tools.pending#1?sync=0", other]
    with pytest.raises(errors.CrashcertError, match="stops Postgres once"):
        spec.check_plan(texts, [spec.parse(text) for text in texts])
    texts = ["pg_failover@tools.pending#1", "kill@reply.ready#1"]
    spec.check_plan(texts, [spec.parse(text) for text in texts])  # other faults go with it
    drawn = [
        spec.parse(text) for text in ["kill@run.claimed#1", "pg_failover@model.ready#1", other]
    ]
    assert [step.label() for step in spec.stopping_once(drawn)] == [
        "kill@run.claimed#1",
        "pg_failover@model.ready#1",
    ]


def test_a_second_kill_follows_every_fault_but_the_last() -> None:
    plans = plan.kill_plans([("run.claimed", 1), ("run.finished", 1)], second_kill=True)
    assert [plan.plan_label(steps) for steps in plans] == [
        "kill@run.claimed#1",
        "kill@run.claimed#1+kill@run.claimed#2",
        "kill@run.finished#1",
    ]


def test_fault_classes_are_parsed_against_the_catalog() -> None:
    assert spec.parse_classes(" kill, db_cut ") == ["kill", "db_cut"]
    with pytest.raises(errors.CrashcertError, match="known: kill, pause, db_cut"):
        spec.parse_classes("kill,explode")


def test_the_checkers_read_the_catalog() -> None:
    per_run = {name for name, fault in spec.CATALOG.items() if fault.per_run}
    assert frozenset(spec.CATALOG) - per_run == facts.INTERRUPTING
    assert facts.DATABASE_FAULTS == {"db_cut", "pg_restart", "pg_failover"}


def test_the_cli_help_names_the_catalog_classes() -> None:
    runner = click.testing.CliRunner()
    shown = runner.invoke(main.main, ["matrix", "--help"], terminal_width=200).output
    assert ", ".join(spec.MATRIX) in " ".join(shown.split())


def test_a_lost_response_or_a_cut_stream_strikes_only_at_world_points() -> None:
    assert spec.IN_WORLD == {"response_lost", "stream_cut"}
    assert [p for p in boundaries.WORLD_POINTS if spec.applies_at("response_lost", p)] == list(
        boundaries.WORLD_POINTS
    )
    assert [p for p in boundaries.WORLD_POINTS if spec.applies_at("stream_cut", p)] == [
        "world:model.answered"
    ]
    assert not spec.applies_at("response_lost", "tool.returned")
    step = spec.parse("response_lost@world:tool.effect#2?mode=hang")
    assert (step.point, step.occurrence, step.params) == ("world:tool.effect", 2, {"mode": "hang"})
    assert spec.parse("stream_cut@world:model.answered#1?after_chunks=0").params == {
        "after_chunks": 0
    }
    with pytest.raises(errors.CrashcertError, match=r"strikes only at world:model\.answered$"):
        spec.parse("stream_cut@world:tool.effect#1")
    with pytest.raises(errors.CrashcertError, match="expected one of reset, hang"):
        spec.parse("response_lost@world:reply.accepted#1?mode=drop")


def test_world_link_cuts_are_cut_slowed_or_reset() -> None:
    assert spec.LINKS == {"tool_cut": "tools", "model_cut": "model", "sink_cut": "sink"}
    assert spec.parse("tool_cut@tools.pending#1").params == {}
    slowed = spec.parse("model_cut@model.pending#1?latency_ms=900&heal_at=model.ready#1")
    assert slowed.params == {"latency_ms": 900, "heal_at": "model.ready#1"}
    assert spec.parse("sink_cut@reply.sending#1?reset_peer=true").params == {"reset_peer": True}
    with pytest.raises(errors.CrashcertError, match="exclude each other"):
        spec.parse("tool_cut@tools.pending#1?reset_peer=true&latency_ms=5")
    assert not spec.applies_at("tool_cut", "run.finished")
    assert spec.applies_at("sink_cut", "reply.sending:before_commit")


def test_clock_skew_takes_a_signed_offset() -> None:
    assert spec.SKEWS_CLOCK == {"clock_skew"}
    assert spec.parse("clock_skew@run.claimed#1?offset_s=-3600").params == {"offset_s": -3600}
    assert spec.parse("clock_skew@run.claimed#1?offset_s=2.5").params == {"offset_s": 2.5}
    assert spec.parse("clock_skew@run.claimed#1?offset_s=-0.5").label().endswith("offset_s=-0.5")
    for bad in ("0", "-86401", "inf", "nan", "soon", "--3"):
        with pytest.raises(errors.CrashcertError, match="offset_s"):
            spec.parse(f"clock_skew@run.claimed#1?offset_s={bad}")
    assert not spec.applies_at("clock_skew", "run.finished")
