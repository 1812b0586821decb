"""Workers as real subprocesses against the simulated world and the embedded Postgres."""

from __future__ import annotations

import collections
import http.server
import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from harness.contract import run_report
from harness.scenario import schema
from harness.world import hooks as hooks_module
from harness.world import world as world_module
from reference_engine import commands, inputs, transitions
from tests import fix_engine, fix_world

pytestmark = pytest.mark.postgres

TERMINAL = schema.TERMINAL_STATUSES
DEADLINE_S = 30

ONE_TURN: dict[str, Any] = {
    "name": "one-turn",
    "input": {"user": "Say hi to {run}."},
    "turns": [{"content": "Hi {run}.", "usage": {"prompt_tokens": 5, "completion_tokens": 2}}],
}


def refund(**tool_overrides: Any) -> dict[str, Any]:
    data = schema.find("refund").model_dump(mode="json")
    for tool in data["tools"]:
        if tool["name"] == "refund_order":
            tool.update(tool_overrides)
    return data


def report(engine: fix_engine.Engine, run_id: str) -> run_report.RunReport:
    return run_report.RunReport.model_validate_json(json.dumps(engine.status(run_id)))


def wait_status(
    engine: fix_engine.Engine, run_id: str, *statuses: str, timeout: float = DEADLINE_S
) -> run_report.RunReport:
    wanted = set(statuses) or TERMINAL

    def reached() -> run_report.RunReport | None:
        current = report(engine, run_id)
        return current if current.status in wanted else None

    return typing_cast(fix_world.wait_for(reached, timeout=timeout, what=f"run {wanted}"))


def typing_cast(value: Any) -> run_report.RunReport:
    assert isinstance(value, run_report.RunReport)
    return value


def events(dsn: str, run_id: str) -> list[tuple[str, str | None, dict[str, Any]]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT kind, worker_id, data FROM events WHERE run_id = %s ORDER BY id", (run_id,)
        ).fetchall()
    return [(kind, worker, data) for kind, worker, data in rows]


def no_problems(world: world_module.World) -> None:
    problems = [p for e in world.snapshot().model for p in e.problems]
    assert problems == []


# -- the happy path ------------------------------------------------------------------------


def test_refund_succeeds_with_exactly_the_scripted_calls(
    engine: fix_engine.Engine, make_world: fix_world.MakeWorld
) -> None:
    world = make_world(refund())
    run_id = engine.submit(fix_engine.run_input(world))
    engine.start_worker(world)
    final = wait_status(engine, run_id)
    assert final.status == "succeeded", final.reason
    snap = world.snapshot()
    assert [e.turn for e in snap.model] == [0, 1, 2]
    assert len(snap.tool_effects("refund_order")) == 1
    assert len(snap.deliveries()) == 1
    run_key = engine.export(run_id)["runs"][0]["run_key"]
    expected = schema.substitute_run_key(world.scenario.final_reply, run_key)
    assert snap.deliveries()[0].content == expected
    no_problems(world)
    assert [c.state for c in final.model_calls] == ["recorded"] * 3
    assert [c.state for c in final.tool_calls] == ["succeeded", "succeeded"]
    assert final.budget["iterations"].used == 3 and final.budget["tool_calls"].used == 2
    assert final.budget["tokens"].used == sum(t.usage.total_tokens for t in world.scenario.turns)
    assert final.delivery.state == "delivered"
    keys = {r.key for r in snap.tool_requests()}
    assert keys == {c.key for c in final.tool_calls}
    kinds = [kind for kind, _, _ in events(engine.dsn, run_id)]
    assert kinds[0] == "run.created" and kinds[-1] == "run.succeeded"
    exported = engine.export(run_id)
    assert [c["version"] for c in exported["checkpoints"]] == list(range(1, 10))


def test_skip_locked_spreads_runs_over_workers_without_double_claims(
    engine: fix_engine.Engine, make_world: fix_world.MakeWorld
) -> None:
    world = make_world(ONE_TURN)
    db = engine.connector()
    run_ids = [
        commands.create_run(db, inputs.RunInput.model_validate(fix_engine.run_input(world)))[0]
        for _ in range(200)
    ]
    workers = [engine.start_worker(world, worker_id=f"w-{i}") for i in range(4)]
    assert len(workers) == 4

    def all_done() -> bool:
        with psycopg.connect(engine.dsn) as conn:
            row = conn.execute(
                "SELECT count(*) FROM runs WHERE status IN ('pending', 'running')"
            ).fetchone()
        return row is not None and row[0] == 0

    fix_world.wait_for(all_done, timeout=120, what="200 runs finished")
    with psycopg.connect(engine.dsn) as conn:
        statuses: dict[str, int] = dict(
            conn.execute("SELECT status, count(*) FROM runs GROUP BY 1").fetchall()
        )
        claims = conn.execute(
            "SELECT run_id, worker_id FROM events WHERE kind = 'run.claimed'"
        ).fetchall()
    assert statuses == {"succeeded": 200}
    per_run = collections.Counter(str(run_id) for run_id, _ in claims)
    assert set(per_run) == set(run_ids) and set(per_run.values()) == {1}
    per_worker = collections.Counter(worker for _, worker in claims)
    assert set(per_worker) == {f"w-{i}" for i in range(4)}, per_worker
    assert len(world.snapshot().deliveries()) == 200


# -- crashes -------------------------------------------------------------------------------


class Gate:
    """A world hook that holds the answer of one tool's effect until the test says so."""

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.reached = threading.Event()
        self.release = threading.Event()

    def __call__(self, effect: Any) -> None:
        if effect.tool == self.tool and not self.reached.is_set():
            self.reached.set()
            self.release.wait(timeout=DEADLINE_S)


def test_kill_after_refund_applied_recovers_by_query_without_a_second_refund(
    engine: fix_engine.Engine, make_world: fix_world.MakeWorld
) -> None:
    gate = Gate("refund_order")
    world = make_world(refund(), hooks=hooks_module.WorldHooks(tool_effect_applied=gate))
    run_id = engine.submit(fix_engine.run_input(world))
    first = engine.start_worker(world, worker_id="w-doomed")
    fix_world.wait_for(gate.reached.is_set, timeout=DEADLINE_S, what="refund applied")
    engine.kill(first)  # the effect happened; its answer is lost with the worker
    gate.release.set()
    engine.start_worker(world, worker_id="w-heir")
    final = wait_status(engine, run_id)
    assert final.status == "succeeded", final.reason
    snap = world.snapshot()
    assert len(snap.tool_effects("refund_order")) == 1
    assert [q.found for q in snap.tool_queries()] == [True]
    assert [e.turn for e in snap.model] == [0, 1, 2]  # no model call repeated
    assert len(snap.deliveries()) == 1
    no_problems(world)
    trail = events(engine.dsn, run_id)
    assert [w for k, w, _ in trail if k == "run.claimed"] == ["w-doomed", "w-heir"]
    doomed = [(k, d.get("tool_call_id")) for k, w, d in trail if w == "w-doomed"]
    assert ("tool.started", "call_refund") in doomed
    assert ("tool.succeeded", "call_refund") not in doomed  # its answer died with it


def test_sigkill_while_tool_started_finishes_after_lease_expiry(
    engine: fix_engine.Engine, make_world: fix_world.MakeWorld
) -> None:
    world = make_world(refund(behaviour={"result": {"refund_id": "rf-1"}, "latency_ms": 3000}))
    run_id = engine.submit(fix_engine.run_input(world))
    first = engine.start_worker(world, worker_id="w-doomed")

    def refund_started() -> bool:
        return any(
            c.name == "refund_order" and c.state == "started"
            for c in report(engine, run_id).tool_calls
        )

    fix_world.wait_for(refund_started, timeout=DEADLINE_S, what="refund started")
    engine.kill(first)
    engine.start_worker(world, worker_id="w-heir")
    final = wait_status(engine, run_id)
    assert final.status == "succeeded", final.reason
    snap = world.snapshot()
    # The doomed request may or may not have got out, and may land after the heir asked by
    # key: the heir never sends it again, so the refund happens at most once.
    effects = snap.tool_effects("refund_order")
    assert len(effects) <= 1
    assert len(snap.tool_requests("refund_order")) <= 1
    refund_call = next(c for c in final.tool_calls if c.name == "refund_order")
    assert refund_call.state in ("succeeded", "outcome_unknown")
    if refund_call.state == "outcome_unknown":
        told = [m for r in snap.model for m in r.messages if m.get("role") == "tool"]
        assert any("outcome_unknown" in str(m.get("content")) for m in told)
    assert len(snap.deliveries()) == 1
    no_problems(world)


def test_approval_wait_survives_a_kill_and_approves_nothing_by_itself(
    engine: fix_engine.Engine, make_world: fix_world.MakeWorld
) -> None:
    world = make_world(refund(requires_approval=True))
    run_id = engine.submit(fix_engine.run_input(world))
    first = engine.start_worker(world, worker_id="w-first")
    waiting = wait_status(engine, run_id, "waiting")
    command = engine.status(run_id)["tool_calls"][-1]
    assert command["state"] == "awaiting_approval" and command["name"] == "refund_order"
    engine.kill(first)
    engine.start_worker(world, worker_id="w-second")
    # a second run parked by the new worker proves it was live and polling meanwhile
    other = engine.submit(fix_engine.run_input(world))
    wait_status(engine, other, "waiting")
    assert report(engine, run_id).status == "waiting"
    assert world.snapshot().tool_effects("refund_order") == []
    assert waiting.budget["tool_calls"].used == 1  # the lookup only
    result = engine.cli("approve", command["command_id"])
    assert result["result"] == "approved"
    final = wait_status(engine, run_id)
    assert final.status == "succeeded", final.reason
    assert len(world.snapshot().tool_effects("refund_order")) == 1
    again = engine.cli("approve", command["command_id"], check=False)
    assert again.returncode == 1 and "already succeeded" in again.stderr


def test_rejected_call_is_never_executed_and_the_model_is_told(
    engine: fix_engine.Engine, make_world: fix_world.MakeWorld
) -> None:
    world = make_world(refund(requires_approval=True))
    run_id = engine.submit(fix_engine.run_input(world))
    engine.start_worker(world)
    wait_status(engine, run_id, "waiting")
    command = engine.status(run_id)["tool_calls"][-1]
    assert engine.cli("reject", command["command_id"])["result"] == "rejected"
    final = wait_status(engine, run_id)
    assert final.status == "succeeded" and final.tool_calls[-1].state == "rejected"
    assert world.snapshot().tool_effects("refund_order") == []
    last_request = world.snapshot().model[-1].messages
    answer = json.loads(last_request[-1]["content"])
    assert last_request[-1]["role"] == "tool" and answer["status"] == "error"


# -- endings other than success ------------------------------------------------------------


def test_cancel_while_a_tool_runs_settles_nothing_afterwards(
    engine: fix_engine.Engine, make_world: fix_world.MakeWorld
) -> None:
    gate = Gate("refund_order")
    world = make_world(refund(), hooks=hooks_module.WorldHooks(tool_effect_applied=gate))
    run_id = engine.submit(fix_engine.run_input(world))
    engine.start_worker(world)
    fix_world.wait_for(gate.reached.is_set, timeout=DEADLINE_S, what="refund applied")
    assert engine.cli("cancel", run_id)["result"] == "cancel_requested"
    gate.release.set()
    final = wait_status(engine, run_id)
    assert final.status == "cancelled"
    assert final.tool_calls[-1].state == "cancelled"
    assert [e.turn for e in world.snapshot().model] == [0, 1]
    assert world.snapshot().deliveries() == []
    kinds = [k for k, _, _ in events(engine.dsn, run_id)]
    assert "tool.succeeded" not in kinds[kinds.index("run.cancel_requested") :]


def test_iteration_budget_exhaustion(
    engine: fix_engine.Engine, make_world: fix_world.MakeWorld
) -> None:
    world = make_world(refund())
    budgets = {"iterations": 2, "tool_calls": 4, "tokens": 5000}
    run_id = engine.submit(fix_engine.run_input(world, budgets=budgets))
    engine.start_worker(world)
    final = wait_status(engine, run_id)
    assert final.status == "budget_exhausted" and "iteration" in (final.reason or "")
    assert len(world.snapshot().model) == 2
    assert final.budget["iterations"].used == 2
    assert world.snapshot().deliveries() == []


def test_token_budget_exhaustion_bills_the_recorded_usage(
    engine: fix_engine.Engine, make_world: fix_world.MakeWorld
) -> None:
    world = make_world(schema.find("token_budget"))
    run_id = engine.submit(fix_engine.run_input(world))
    engine.start_worker(world)
    final = wait_status(engine, run_id)
    assert final.status == "budget_exhausted" and "token" in (final.reason or "")
    usages = [e.usage["total_tokens"] for e in world.snapshot().model if e.usage]
    assert final.budget["tokens"].used == sum(usages) == 1380
    assert len(world.snapshot().tool_effects()) == 2  # the third decision is not acted on


@pytest.fixture
def broken_model() -> Iterator[str]:
    """An OpenAI endpoint that answers 500 to everything."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = json.dumps({"error": {"message": "boom", "type": "server_error"}}).encode()
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_poisoned_run_is_dead_lettered_after_max_attempts(
    engine: fix_engine.Engine, make_world: fix_world.MakeWorld, broken_model: str
) -> None:
    world = make_world(ONE_TURN)
    run_id = engine.submit(fix_engine.run_input(world, max_attempts=2))
    engine.start_worker(world, OPENAI_BASE_URL=broken_model, CRASHCERT_RETRY_LIMIT="1")
    final = wait_status(engine, run_id)
    assert final.status == "dead_lettered" and "model" in (final.reason or "")
    assert final.attempts == 2
    assert [c.state for c in final.model_calls] == ["failed", "failed"]
    assert final.budget["iterations"].used == 2 and final.budget["tokens"].used == 0


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ({"v": 2, "transcript": [], "turn": 0}, "unknown checkpoint version 2"),
        ({"v": 1, "transcript": "not a list"}, "malformed checkpoint"),
    ],
)
def test_bad_checkpoints_fail_closed(
    engine: fix_engine.Engine, make_world: fix_world.MakeWorld, payload: Any, reason: str
) -> None:
    world = make_world(ONE_TURN)
    run_id = engine.submit(fix_engine.run_input(world))
    with psycopg.connect(engine.dsn, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")  # bypass the frontier guard
        conn.execute(
            "UPDATE frontiers SET checkpoint = %s WHERE run_id = %s",
            (json.dumps(payload), run_id),
        )
    engine.start_worker(world)
    final = wait_status(engine, run_id)
    assert final.status == "failed" and reason in (final.reason or ""), final.reason
    assert world.snapshot().model == []


def test_frontier_without_its_audit_rows_fails_closed(
    engine: fix_engine.Engine, make_world: fix_world.MakeWorld
) -> None:
    world = make_world(ONE_TURN)
    run_id = engine.submit(fix_engine.run_input(world))
    with psycopg.connect(engine.dsn, autocommit=True) as conn:
        cp = conn.execute(
            "SELECT checkpoint FROM frontiers WHERE run_id = %s", (run_id,)
        ).fetchone()
        assert cp is not None
        bad = {
            **cp[0],
            "decision": {
                "tool_calls": [{"id": "call_x", "name": "lookup_order", "arguments": "{}"}]
            },
        }
        conn.execute("SET session_replication_role = replica")
        conn.execute(
            "UPDATE frontiers SET phase = 'tools_pending', checkpoint = %s WHERE run_id = %s",
            (json.dumps(bad), run_id),
        )
    engine.start_worker(world)
    final = wait_status(engine, run_id)
    assert final.status == "failed" and "tool_calls rows hold []" in (final.reason or "")
    assert world.snapshot().model == [] and world.snapshot().tool_requests() == []


def test_sigterm_releases_the_lease_and_exits_zero(
    engine: fix_engine.Engine, make_world: fix_world.MakeWorld
) -> None:
    gate = Gate("refund_order")
    world = make_world(refund(), hooks=hooks_module.WorldHooks(tool_effect_applied=gate))
    run_id = engine.submit(fix_engine.run_input(world))
    worker = engine.start_worker(world, worker_id="w-term")
    fix_world.wait_for(gate.reached.is_set, timeout=DEADLINE_S, what="refund applied")
    worker.terminate()  # SIGTERM while the refund is in flight
    gate.release.set()
    assert worker.wait(timeout=DEADLINE_S) == 0
    current = report(engine, run_id)
    # the transition in progress was finished (refund settled), then the lease released
    assert current.status == "pending" and current.tool_calls[-1].state == "succeeded"
    engine.start_worker(world)
    assert wait_status(engine, run_id).status == "succeeded"
    assert len(world.snapshot().tool_effects("refund_order")) == 1
    assert world.snapshot().tool_queries() == []


def test_submit_rejects_bad_input_without_storing(engine: fix_engine.Engine) -> None:
    result = engine.cli("submit", "--input", "-", stdin='{"run_key": "x"}', check=False)
    assert result.returncode == 1 and "messages" in result.stderr
    unknown = engine.cli("status", str(uuid.uuid4()), check=False)
    assert unknown.returncode == 1 and "no run" in unknown.stderr


def test_postgres_restart_under_a_worker_is_survived_without_a_second_refund(
    engine: fix_engine.Engine, make_world: fix_world.MakeWorld, restartable_pg: Any
) -> None:
    gate = Gate("refund_order")
    world = make_world(refund(), hooks=hooks_module.WorldHooks(tool_effect_applied=gate))
    run_id = engine.submit(fix_engine.run_input(world))
    worker = engine.start_worker(world, worker_id="w-survivor", CRASHCERT_LEASE_MS="5000")
    fix_world.wait_for(gate.reached.is_set, timeout=DEADLINE_S, what="refund applied")
    restartable_pg.stop_immediate()  # the worker's settle will hit a dead database
    gate.release.set()
    restartable_pg.start()
    final = wait_status(engine, run_id, timeout=60)
    assert final.status == "succeeded", final.reason
    assert worker.poll() is None  # a transient outage never ends the worker
    snap = world.snapshot()
    assert len(snap.tool_effects("refund_order")) == 1
    assert len(snap.deliveries()) == 1
    no_problems(world)


class ReplyGate:
    """Holds the sink's answer to the first accepted reply until the test says so."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()

    def __call__(self, delivery: Any) -> None:
        if not self.reached.is_set():
            self.reached.set()
            self.release.wait(timeout=DEADLINE_S)


@pytest.mark.parametrize(
    ("queryable", "status"), [(True, "succeeded"), (False, "delivery_uncertain")]
)
def test_kill_after_the_sink_took_the_reply_never_delivers_twice(
    engine: fix_engine.Engine, make_world: fix_world.MakeWorld, queryable: bool, status: str
) -> None:
    gate = ReplyGate()
    scenario = {**ONE_TURN, "sink": {"queryable": queryable}}
    world = make_world(scenario, hooks=hooks_module.WorldHooks(reply_accepted=gate))
    run_id = engine.submit(fix_engine.run_input(world))
    first = engine.start_worker(world, worker_id="w-doomed")
    fix_world.wait_for(gate.reached.is_set, timeout=DEADLINE_S, what="reply accepted")
    engine.kill(first)
    gate.release.set()
    engine.start_worker(world, worker_id="w-heir")
    final = wait_status(engine, run_id)
    assert final.status == status, final.reason
    assert len(world.snapshot().deliveries()) == 1
    assert [q.status_code for q in world.snapshot().reply_queries()] == [200 if queryable else 405]
    assert final.delivery.state == ("delivered" if queryable else "uncertain")


def test_reconcile_command_recovers_an_abandoned_lease(
    engine: fix_engine.Engine, make_world: fix_world.MakeWorld
) -> None:
    world = make_world(ONE_TURN)
    run_id = engine.submit(fix_engine.run_input(world))
    # claimed, then never heard of again
    lease = transitions.Transitions(engine.connector()).claim("w-vanished", 100)
    assert lease is not None and lease.run_id == run_id

    def reconciled() -> bool:
        return bool(engine.cli("reconcile", "--once")["reconciled"])

    fix_world.wait_for(reconciled, timeout=DEADLINE_S, what="abandoned lease reconciled")
    assert report(engine, run_id).status == "pending"
    engine.start_worker(world)
    assert wait_status(engine, run_id).status == "succeeded"


def test_redaction_keeps_prompts_and_outputs_out_of_the_event_trail(
    engine: fix_engine.Engine, make_world: fix_world.MakeWorld
) -> None:
    world = make_world(refund())
    run_id = engine.submit(fix_engine.run_input(world))
    engine.start_worker(world, CRASHCERT_REDACT="1")
    assert wait_status(engine, run_id).status == "succeeded"
    trail = json.dumps([data for _, _, data in events(engine.dsn, run_id)])
    assert "refunded in full" not in trail and "rf-1" not in trail
    assert '"redacted": true' in trail
    # the durable rows keep the full bodies; only the trail is redacted
    assert "rf-1" in json.dumps(engine.export(run_id)["tool_calls"])


def test_submit_is_idempotent_on_the_run_key(
    engine: fix_engine.Engine, make_world: fix_world.MakeWorld
) -> None:
    run_input = fix_engine.run_input(make_world(ONE_TURN))
    first = engine.cli("submit", "--input", "-", stdin=json.dumps(run_input))
    again = engine.cli("submit", "--input", "-", stdin=json.dumps(run_input))
    assert first["run_id"] == again["run_id"] and first["created"] and not again["created"]
