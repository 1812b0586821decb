"""Properties of the engine's pure decisions (decide.py) over generated durable states.

The literal cases live in test_engine_decide.py; here Hypothesis looks for a state where a
worker acts on a run it does not hold, spends past a budget, re-executes an effect it may
not, or resends a reply it cannot prove lost.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from reference_engine import decide
from reference_engine import state as S
from tests.engine.test_engine_decide import EPOCH, ME, RUN, budget, known, point, run

PHASES = st.sampled_from(["model_ready", "model_pending", "tools_pending", "reply_ready"])
STATUSES = st.sampled_from(sorted(S.TERMINAL | {"running", "pending", "waiting"}))
# A checkpoint the worker must never get as far as reading when it may not act.
GARBAGE = st.one_of(st.none(), st.integers(), st.text(max_size=5), st.just({"turn": "x"}))
REPLAY = st.sampled_from(["replayable", "non_replayable"])


@given(
    status=STATUSES,
    owner=st.sampled_from([ME, "w-other", None]),
    epoch=st.integers(min_value=0, max_value=6),
    cancel=st.booleans(),
    phase=PHASES,
    checkpoint=GARBAGE,
)
def test_a_worker_acts_only_on_a_run_it_holds_under_its_own_epoch(
    status: str, owner: str | None, epoch: int, cancel: bool, phase: str, checkpoint: Any
) -> None:
    state = run(
        phase,
        checkpoint,
        status=status,
        lease_owner=owner,
        lease_epoch=epoch,
        cancel_requested=cancel,
    )
    action = decide.next_action(state, known())
    holds = status == "running" and owner == ME and epoch == EPOCH
    if not holds:
        assert isinstance(action, decide.Stop), action
    elif cancel:  # honoured first, even over a checkpoint that does not validate
        assert isinstance(action, decide.Cancel), action
    else:
        assert not isinstance(action, decide.Stop | decide.Cancel), action


@given(
    limit=st.integers(min_value=1, max_value=50),
    used=st.integers(min_value=0, max_value=60),
    tokens=st.integers(min_value=1, max_value=10_000),
    tokens_used=st.integers(min_value=0, max_value=12_000),
)
def test_no_model_call_is_opened_past_a_budget(
    limit: int, used: int, tokens: int, tokens_used: int
) -> None:
    spent = budget(iterations=limit, iterations_used=used, tokens=tokens, tokens_used=tokens_used)
    action = decide.next_action(run("model_ready", point(), budget=spent), known())
    if used >= limit or tokens_used >= tokens:
        assert isinstance(action, decide.Finish) and action.status == "budget_exhausted", action
    else:
        assert isinstance(action, decide.OpenModelCall) and action.attempt == 1, action


def _declaration(replay: str, fingerprint: str, **flags: bool) -> dict[str, Any]:
    return {"replay": replay, "fingerprint": fingerprint, **flags}


def _started(declaration: dict[str, Any] | None) -> S.ToolCall:
    return S.ToolCall(
        id="cmd-1",
        turn=0,
        position=0,
        tool_call_id="call_1",
        name="refund_order",
        arguments="{}",
        key=decide.tool_key(RUN, 0, "call_1"),
        declaration=declaration,
        state="started",
        started_epoch=EPOCH - 1,
    )


@given(
    was=REPLAY,
    now=st.one_of(st.none(), REPLAY),
    same_fingerprint=st.booleans(),
    queryable=st.booleans(),
)
def test_an_interrupted_call_is_replayed_only_when_replay_is_harmless(
    was: str, now: str | None, same_fingerprint: bool, queryable: bool
) -> None:
    original = _declaration(was, "f1")
    current = (
        None
        if now is None
        else _declaration(now, "f1" if same_fingerprint else "f2", queryable=queryable)
    )
    recovery = decide.recover_tool(_started(original), current)
    if isinstance(recovery, decide.Replay):
        assert was == now == "replayable" and same_fingerprint
    if isinstance(recovery, decide.Query):
        assert current is not None and current["queryable"]
    if current is None:
        assert isinstance(recovery, decide.Unknown)


@given(honoured_then=st.booleans(), honoured_now=st.booleans(), replay=REPLAY)
def test_not_applied_is_no_licence_to_resend_without_an_honoured_key(
    honoured_then: bool, honoured_now: bool, replay: str
) -> None:
    call = _started(_declaration(replay, "f1", honours_idempotency_key=honoured_then))
    current = _declaration(replay, "f1", honours_idempotency_key=honoured_now)
    recovery = decide.after_query_not_applied(call, current)
    assert isinstance(recovery, decide.Replay) == (honoured_then and honoured_now)


@given(status_code=st.integers(min_value=100, max_value=599))
def test_a_reply_is_sent_again_only_when_the_sink_says_it_never_arrived(status_code: int) -> None:
    answer = decide.reply_after_query(status_code)
    assert answer in ("delivered", "send", "uncertain")
    assert (answer == "send") == (status_code == 404)
    assert (answer == "delivered") == (status_code == 200)


CALL_IDS = st.text(min_size=1, max_size=12)


@given(a=st.tuples(st.integers(0, 30), CALL_IDS), b=st.tuples(st.integers(0, 30), CALL_IDS))
def test_tool_keys_are_stable_and_name_one_logical_call(
    a: tuple[int, str], b: tuple[int, str]
) -> None:
    """The model chooses tool-call ids (any text, colons included): two different calls of
    one run must never share a key, or a service would take the second for a retry."""
    assert decide.tool_key(RUN, *a) == decide.tool_key(RUN, *a)
    assert (decide.tool_key(RUN, *a) == decide.tool_key(RUN, *b)) == (a == b)
