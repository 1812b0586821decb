"""Variants: what an incident's record cannot tell apart, and the replay of every plan.

Literal labels and verdicts: the alternatives of each inferred fault, their combinations
(capped), and the conclusion a replay of several plans prints.
"""

from __future__ import annotations

from harness.checkers import verdict as verdict_module
from harness.incident import incident, variants

PASS, FAIL = verdict_module.Verdict.PASS, verdict_module.Verdict.FAIL
INCONCLUSIVE, ERROR = verdict_module.Verdict.INCONCLUSIVE, verdict_module.Verdict.ERROR


def labels(fault: str, after: int | None = None) -> list[str]:
    return [alt.fault for alt in variants.alternatives(fault, after_occurrence=after)]


def test_each_ambiguous_point_has_its_alternatives() -> None:
    assert labels("kill@tool.started#2", 3) == [
        "kill@tool.returned#3",
        "commit_lost@tool.started:before_commit#2",
    ]
    assert labels("kill@reply.sending#1") == [
        "kill@reply.sent#1",
        "commit_lost@reply.sending:before_commit#1",
    ]
    assert labels("kill@model.pending#2", 1)[0] == "kill@model.returned#1"
    assert labels("kill@tools.pending#1") == ["commit_lost@tools.pending:before_commit#1"]
    # nothing else happens between a claim and the next commit; a non-kill is as written
    assert labels("kill@run.claimed#1") == []
    assert labels("pause@tool.started#1") == []
    assert labels("kill@tool.started#1?same_worker_id=true") == []


def test_plans_combine_every_choice_except_the_inferred_one() -> None:
    faults = ["kill@tool.started#1", "kill@reply.sending#1"]
    options = [variants.alternatives(fault) for fault in faults]
    found = variants.combine(faults, options)
    assert len(found.plans) == variants.MAX_VARIANTS  # 3 x 3 - 1 = 8
    assert faults not in found.plans
    assert ["kill@tool.returned#1", "kill@reply.sent#1"] in found.plans
    assert any("instead of kill@tool.started#1" in note for note in found.notes)


def test_too_many_plans_are_named_not_replayed() -> None:
    faults = ["kill@tool.started#1", "kill@tool.started#2", "kill@reply.sending#1"]
    found = variants.combine(faults, [variants.alternatives(fault) for fault in faults])
    assert len(found.plans) == variants.MAX_VARIANTS
    assert found.notes[-1].startswith("18 more variant(s) not replayed: ")  # 27 - 1 - 8


def test_the_trail_gives_returned_numbered_by_returns() -> None:
    """Two calls started and settled by w1, a third started by w1 and recovered by w2: the
    third would have been the third return, whatever the starts were."""
    events = [
        {"id": 1, "kind": "run.claimed", "worker_id": "w1", "lease_epoch": 1, "data": {}},
        *[
            {
                "id": 2 + n,
                "kind": kind,
                "worker_id": "w1",
                "lease_epoch": 1,
                "data": {"command_id": c},
            }
            for n, (kind, c) in enumerate(
                [
                    ("tool.started", "a"),
                    ("tool.succeeded", "a"),
                    ("tool.started", "b"),
                    ("tool.failed", "b"),
                    ("tool.started", "c"),
                ]
            )
        ],
        {"id": 9, "kind": "run.claimed", "worker_id": "w2", "lease_epoch": 2, "data": {}},
        {
            "id": 10,
            "kind": "tool.succeeded",
            "worker_id": "w2",
            "lease_epoch": 2,
            "data": {"command_id": "c", "outcome": {"queried": True}},
        },
    ]
    found = incident.infer_faults(events, status="succeeded")
    assert found.faults == ["kill@tool.started#3"]
    assert found.variants[0] == ["kill@tool.returned#3"]


def test_replays_conclude_on_the_plan_that_reproduces() -> None:
    started = variants.Replayed("kill@tool.started#2", PASS, [])
    returned = variants.Replayed("kill@tool.returned#2", FAIL, ["tool.at_most_once"])
    verdict, sentence = variants.conclude([started, returned])
    assert verdict is FAIL
    assert sentence == (
        "incident reproduced by kill@tool.returned#2 (tool.at_most_once); "
        "not by kill@tool.started#2 PASS"
    )
    verdict, sentence = variants.conclude([started, started])
    assert (verdict, sentence.split(" (")[0]) == (PASS, "incident no longer reproduces")
    # a FAIL wins over a plan that broke; a PASS does not hide a plan that proved nothing
    assert variants.conclude([returned, variants.Replayed("x", ERROR, [])])[0] is FAIL
    verdict, sentence = variants.conclude([started, variants.Replayed("y", INCONCLUSIVE, [])])
    assert verdict is INCONCLUSIVE and sentence == "incident replay inconclusive (y INCONCLUSIVE)"
