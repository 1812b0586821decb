"""What each invariant means, in one place: the "holds when" and "evidence" of every id the
checkers' registry judges, and of the two results the harness adds beside them. The
invariant tables of README.md and harness/CONTRACT.md section 7 are generated from this
(`python -m harness.report.invariant_table --write`), and a test fails when they differ.
"""

from __future__ import annotations

import dataclasses

from harness.checkers import (
    applied,
    approval,
    budget,
    effects,
    fencing,
    frontier,
    liveness,
    model,
    reply,
    submit,
    tools,
    transcript,
    unknown_outcome,
)


@dataclasses.dataclass(frozen=True)
class Described:
    holds_when: str  # one sentence, Markdown, no "|"
    evidence: str  # what in the history the checker reads


INVARIANTS: dict[str, Described] = {
    model.ONCE_AFTER_DECISION: Described(
        holds_when=("no model call for a turn whose decision was committed"),
        evidence=(
            "model ledger (turn = assistant messages in the request) against the "
            "`tools.pending`/`reply.ready` hits; INCONCLUSIVE without those hits"
        ),
    ),
    model.COUNT: Described(
        holds_when=("model calls = scripted turns + interruptions inside a model window"),
        evidence=(
            "model ledger per turn; faults and recoveries (later `run.claimed`) "
            "between the turn's window opening (`model.pending` or its first request) "
            "and its decision"
        ),
    ),
    tools.AT_MOST_ONCE: Described(
        holds_when=("each non-replayable effect happened at most once in the world"),
        evidence=(
            "tool effect ledger, grouped by tool and canonical arguments: no more "
            "effects than scripted calls with those arguments (the same reminder "
            "posted twice is two calls), and one effect per idempotency key at most"
        ),
    ),
    effects.INVARIANT: Described(
        holds_when=(
            "a run that ends claiming its work done (`succeeded`, "
            "`delivery_uncertain`) has in the world the effect of every scripted call,"
            " after every fault healed; excused: a call the engine ended "
            "`outcome_unknown` (report state, or the model was told so), one the "
            "operator rejected, one the world refused for good (4xx)"
        ),
        evidence=(
            "tool effect ledger, grouped by tool and canonical arguments (two equal "
            "scripted calls need two effects), against the scripted calls, the final "
            "status, the report's `tool_calls[].state`, tool messages of model "
            "requests, the scenario's `reject` actions; INCONCLUSIVE while a fault "
            "never healed; any other ending is `run.liveness`'s to judge"
        ),
    ),
    tools.SAME_KEY: Described(
        holds_when=("every attempt of one logical call carried the same idempotency key"),
        evidence=(
            "tool request ledger: keys per (tool, arguments), no more than scripted "
            "calls with those arguments (the world sees no tool-call id: the key tells"
            " equal calls apart); a key shared by two calls fails too: seen with two "
            "argument sets, named for two call ids (report `tool_calls`, hit "
            "`detail.key`), or fewer keys than such calls the model was answered `ok`"
        ),
    ),
    approval.INVARIANT: Described(
        holds_when=(
            "a tool whose declaration says `requires_approval` reached the world only "
            "after its approval was sent, and never after a rejection"
        ),
        evidence=(
            "tool request ledger of that tool against the times the harness ran the "
            'engine\'s `approve`/`reject` command (section 5, "Operator actions")'
        ),
    ),
    unknown_outcome.INVARIANT: Described(
        holds_when=(
            "an interrupted non-replayable call that could not be resolved ends "
            "`outcome_unknown`, and the next model request tells the model so"
        ),
        evidence=(
            "faults at `tool.started`/`tool.returned` (hit `detail.tool_call_id`), "
            "later requests of that call, queries by key, the report's "
            "`tool_calls[].state`, tool messages of later model requests"
        ),
    ),
    budget.INVARIANT: Described(
        holds_when=(
            "consumed iterations, tool calls and tokens never go down across a restart"
            " and never exceed the limits; billed tokens equal the usage of recorded "
            "model results, once each"
        ),
        evidence=(
            "report snapshots in order (`budget`, `model_calls`), against the model "
            "ledger's 200 answers and the tool requests; an answer the engine used "
            "afterwards (its tool calls reached the world, a later turn was asked for,"
            " its reply was posted) has a `recorded` call of its turn in the report; "
            "where the engine reports `model.pending`, each answer has a reservation "
            "reported before it, counted as they come; "
            "INCONCLUSIVE when a budget is missing from the report"
        ),
    ),
    reply.INVARIANT: Described(
        holds_when=(
            "the reply reached the sink at most once; exactly once when the sink can "
            "be queried by key; otherwise the run ends `delivery_uncertain`"
        ),
        evidence=(
            "sink delivery ledger (the sink does not deduplicate), final status; on a "
            "sink that cannot be queried, a POST of the reply after a fault struck "
            "inside the delivery window (`reply.sending` committed, outcome not "
            "recorded) is a blind resend whatever the count, except the first POST of "
            "an interrupted worker that survived and had not posted"
        ),
    ),
    submit.INVARIANT: Described(
        holds_when=(
            "one run, one reply, per run key: a resubmitted RunInput answers the run "
            "the key already has and creates nothing, at once or after the run "
            "finished"
        ),
        evidence=(
            "the run id each `submit_twice` resubmit answered (its fault record's "
            "`observed`), the run ids of the reports and of the sink's deliveries; "
            "after a resubmit of a finished run, any model request of the run key or "
            "reply delivery is a second conversation; after `purge` and `reuse_key`, "
            "the run the new request got (not the purged one) and each reply since, "
            "which must be an answer the model gave the new request's world key"
        ),
    ),
    liveness.INVARIANT: Described(
        holds_when=(
            "after the last fault heals, the run reaches a terminal status within the "
            "scenario's deadline"
        ),
        evidence=(
            "report snapshots, the time of the last heal, the scenario's `deadline_s` "
            "and `expect.status`"
        ),
    ),
    fencing.INVARIANT: Described(
        holds_when=("a worker that lost its lease commits nothing afterwards"),
        evidence=(
            "`run.claimed` hits by worker (ordered by `detail.lease_epoch` where given, "
            "else as heard), later commit-point hits of the fenced worker; engine "
            "`events` rows when exported"
        ),
    ),
    transcript.INVARIANT: Described(
        holds_when=(
            "the model saw every tool result once, none lost or duplicated, and the "
            "final reply is the scripted one"
        ),
        evidence=(
            "the model's per-request transcript problems, the last request's tool "
            "messages, `ok` results against the world's answers, delivered content"
        ),
    ),
    frontier.INVARIANT: Described(
        holds_when=("checkpoint versions only grow and phases follow allowed transitions"),
        evidence=(
            "`detail.frontier_version`/`phase` of after-commit hits, exported "
            "`checkpoints`, report snapshots"
        ),
    ),
}

# Results of every trial that are not the engine's invariants: they say whether the trial
# tested anything, so they are INCONCLUSIVE, never FAIL, when missing.
BESIDE: dict[str, Described] = {
    applied.PLAN: Described(
        holds_when="every planned fault struck (a time kill after the run was terminal did not)",
        evidence="the fault records against the plan; INCONCLUSIVE otherwise",
    ),
    applied.ACTIONS: Described(
        holds_when=(
            "every scenario action (approve, reject, cancel, purge, reuse_key) fired at its point"
        ),
        evidence=(
            "the actions the harness ran against the scenario's `actions`; INCONCLUSIVE otherwise"
        ),
    ),
}
