"""Facts derived from a TrialHistory that several checkers share, so no rule is written twice.

Logical tool calls, this run's hits and model requests, faults with the hit where they
struck and the moment they ended, tool-message contents, deliveries of this run's reply.
Hits and world ledgers share one clock (`t`, wall time); `seq` orders within one source.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
from typing import Any

from harness.contract import boundaries
from harness.faults import spec
from harness.record import history as history_module
from harness.scenario import schema
from harness.world import ledger, transcript

# Faults that interrupt a worker, and the records that mark the end of one
# (harness/faults/spec.py); a kill ends the moment it happens.
# A per-run fault (submit_twice) interrupts no worker: it excuses no repeat in any window.
INTERRUPTING = frozenset(name for name, fault in spec.CATALOG.items() if not fault.per_run)
ENDING = spec.ENDINGS
_ENDED_BY = {name: fault.ended_by for name, fault in spec.CATALOG.items() if fault.ended_by}
DATABASE_FAULTS = frozenset(name for name, fault in spec.CATALOG.items() if fault.cuts_database)
# After-commit points that follow an external call rather than a commit.
AFTER_EXTERNAL_CALL = frozenset({"model.returned", "tool.returned", "reply.sent"})
# Where the model's decision for a turn becomes durable.
DECISION_POINTS = frozenset({"tools.pending", "reply.ready"})
CLAIM_POINT = "run.claimed"
MODEL_PENDING = "model.pending"  # an iteration reserved, reported before the call
# The budgets a run report carries (CONTRACT.md section 4), named once for every checker.
ITERATIONS, TOOL_CALLS, TOKENS = "iterations", "tool_calls", "tokens"
# A black box's world hit at a tool's effect (harness/CONTRACT.md section 6).
WORLD_TOOL_EFFECT = "world:tool.effect"


@dataclasses.dataclass(frozen=True)
class LogicalCall:
    """A tool call as the world sees it: the tool and its arguments, whoever asks."""

    tool: str
    arguments: str  # canonical JSON

    def __str__(self) -> str:
        return f"{self.tool}({self.arguments})"


@dataclasses.dataclass(frozen=True)
class ScriptedCall:
    id: str
    turn: int  # 0-based, as ModelRequest.turn (assistant messages before it)
    call: LogicalCall


@dataclasses.dataclass(frozen=True)
class Interruption:
    fault: history_module.FaultApplied
    hit: history_module.BoundaryHit | None  # where it struck, when the step names a point
    start: float
    end: float  # math.inf while not healed; == start for a kill

    def overlaps(self, start: float, end: float) -> bool:
        # Strict at `end`: a fault at the very moment the window closed did not interrupt it.
        return self.start < end and self.end >= start

    def describe(self) -> str:
        where = f" at {hit_name(self.hit)}" if self.hit else ""
        worker = f" worker {self.fault.worker_id}" if self.fault.worker_id else ""
        return (
            f"{self.fault.action}{where}{worker} (fault seq {self.fault.seq}, t={self.start:.3f})"
        )


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def logical_call(tool: str, arguments: Any) -> LogicalCall:
    # Arguments may arrive as the JSON string of an OpenAI tool call.
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass
    return LogicalCall(tool, canonical(arguments))


def scripted_calls(history: history_module.TrialHistory) -> dict[str, ScriptedCall]:
    """tool_call_id -> the logical call the script makes under that id, `{run}` substituted."""
    calls: dict[str, ScriptedCall] = {}
    for turn, scripted in enumerate(history.scenario.turns):
        for call in scripted.tool_calls:
            arguments = schema.substitute_run_key(call.arguments, history.run_key)
            calls[call.id] = ScriptedCall(call.id, turn, logical_call(call.name, arguments))
    return calls


def scripted_count(history: history_module.TrialHistory, call: LogicalCall) -> int:
    """How many logical calls the world may see under `call`'s tool and arguments.

    The world sees (tool, arguments) and a key, never the scripted call's id: two scripted
    calls with equal arguments (the same reminder posted twice) are two logical calls. A
    call the script never makes still counts as one.
    """
    return allowed_calls(scripted_counts(history), call)


def scripted_counts(history: history_module.TrialHistory) -> collections.Counter[LogicalCall]:
    """The script's calls per (tool, arguments), derived once for a checker that asks of
    every call (`allowed_calls`); scripted_count re-derives the script on every call."""
    return collections.Counter(known.call for known in scripted_calls(history).values())


def allowed_calls(counts: collections.Counter[LogicalCall], call: LogicalCall) -> int:
    """scripted_count from `scripted_counts`: a call the script never makes counts as one."""
    return max(1, counts[call])


# Points where the engine names the key of a call it is about to run or has settled.
_KEY_POINTS = frozenset({"tool.started", "tool.settled"})


def named_keys(history: history_module.TrialHistory) -> dict[str, str]:
    """tool_call_id -> the idempotency key the engine says that call carries.

    From the final report's `tool_calls`, then from `detail.key` of the engine's own
    tool.started/tool.settled hits (a black box's world hits name no call id: see
    `hit_call_id`). What the engine says is only used to tell apart requests
    the world cannot (equal arguments); the ledgers stay the truth.
    """
    named: dict[str, str] = {}
    report = history.final_report
    for reported in report.tool_calls if report else []:
        if reported.key:  # a keyless engine names no key: "" is not one
            named.setdefault(reported.id, reported.key)
    for hit in run_hits(history):
        call_id, key = hit.detail.get("tool_call_id"), hit.detail.get("key")
        if boundaries.base_name(point(hit)) in _KEY_POINTS and isinstance(call_id, str):
            if isinstance(key, str) and key:
                named.setdefault(call_id, key)
    return named


def answered_ok(history: history_module.TrialHistory) -> set[str]:
    """Call ids some model request of this run answered with an `ok` tool message."""
    return {
        message.call_id
        for request in model_requests(history)
        for message in tool_messages(request)
        if message.content is not None and message.content.get("status") == "ok"
    }


def tool_spec(history: history_module.TrialHistory, name: str) -> schema.ToolSpec | None:
    try:
        return history.scenario.tool(name)
    except KeyError:
        return None


def is_non_replayable(history: history_module.TrialHistory, name: str) -> bool:
    spec = tool_spec(history, name)
    return spec is not None and spec.replay == "non_replayable"


# --- boundary hits -------------------------------------------------------------------


def _this_run(history: history_module.TrialHistory, run_id: str | None) -> bool:
    return run_id is None or history.run_id is None or run_id == history.run_id


def point(hit: history_module.BoundaryHit) -> str:
    """The boundary a hit marks: its own point, or the one a black box's world hit stands
    for, as the world trigger recorded it (`world:tool.effect` -> `tool.returned`)."""
    return hit.stands_for or hit.point


def marks_a_boundary(hit: history_module.BoundaryHit) -> bool:
    """False for a time hit: it marks no place in the engine's work (CONTRACT.md s. 6)."""
    return hit.stands_for is not None or not boundaries.is_blackbox_point(hit.point)


def boundary_hits(history: history_module.TrialHistory) -> list[history_module.BoundaryHit]:
    """The hits that mark a boundary, of any run: the engine's own and the world's."""
    return [hit for hit in history.boundary_hits() if marks_a_boundary(hit)]


def run_hits(history: history_module.TrialHistory) -> list[history_module.BoundaryHit]:
    """Hits of this run (or with no run id) that mark a boundary, in the order the harness
    recorded them."""
    hits = [hit for hit in boundary_hits(history) if _this_run(history, hit.run_id)]
    return sorted(hits, key=lambda hit: hit.seq)


def is_before_commit(hit: history_module.BoundaryHit) -> bool:
    return point(hit).endswith(boundaries.BEFORE_COMMIT_SUFFIX)


def is_commit_point(hit: history_module.BoundaryHit) -> bool:
    """Reported right after a commit of the engine (not after an external call)."""
    return not is_before_commit(hit) and point(hit) not in AFTER_EXTERNAL_CALL


def commit_sent(history: history_module.TrialHistory) -> dict[int, int]:
    """Commit hit seq -> seq of the `:before_commit` twin after which its COMMIT was sent.

    The engine reports `X:before_commit`, sends COMMIT and reports `X` once the answer is
    back: the commit happened somewhere in between, and a slow link stretches that window
    (an answer delayed past the lease arrives after another worker claimed the run). A
    commit hit without a twin is its own bound.
    """
    twins: dict[tuple[str | None, int | None, str], int] = {}
    sent: dict[int, int] = {}
    for hit in run_hits(history):
        key = (hit.worker_id, hit.pid, boundaries.base_name(point(hit)))
        if is_before_commit(hit):
            twins[key] = hit.seq
        elif is_commit_point(hit):
            sent[hit.seq] = twins.pop(key, hit.seq)
    return sent


def detail_int(hit: history_module.BoundaryHit, name: str) -> int | None:
    value = hit.detail.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def hit_name(hit: history_module.BoundaryHit) -> str:
    """`tools.pending#2`, or `world:tool.effect#2`: the hit as recorded."""
    return f"{hit.point}#{hit.occurrence}"


def describe_hit(hit: history_module.BoundaryHit) -> str:
    worker = f" by {hit.worker_id}" if hit.worker_id else ""
    return f"{hit_name(hit)}{worker} (hit seq {hit.seq}, t={hit.t:.3f})"


def claims(history: history_module.TrialHistory) -> list[history_module.BoundaryHit]:
    return [hit for hit in run_hits(history) if point(hit) == CLAIM_POINT]


def recoveries(history: history_module.TrialHistory) -> list[history_module.BoundaryHit]:
    """Claims after the first one: each means the run was picked up again."""
    return claims(history)[1:]


def hit_call_id(history: history_module.TrialHistory, hit: history_module.BoundaryHit) -> Any:
    """The scripted call a hit names (`detail.tool_call_id`); for a black box's world tool
    effect, which names none, the call its effect belongs to when that can be told
    (`effect_call_ids`). Any: the detail is the engine's word, read as given."""
    if hit.point == WORLD_TOOL_EFFECT:
        seq = hit.detail.get("ledger_seq")
        guessed = effect_call_ids(history).get(seq) if isinstance(seq, int) else None
        if guessed is not None:
            return guessed
    return hit.detail.get("tool_call_id")


def effect_call_ids(history: history_module.TrialHistory) -> dict[int, str]:
    """Ledger seq of each tool effect -> the scripted call it belongs to.

    By its idempotency key when the engine names that key for one call of the same tool
    and arguments (report `tool_calls`, tool.started/tool.settled details); else by its
    tool and arguments when one scripted call alone has them. Two calls with equal
    arguments and no named key are not guessed: the checkers then judge by key.
    """
    scripted = scripted_calls(history)
    owners: dict[str, list[str]] = collections.defaultdict(list)
    for call_id, key in named_keys(history).items():
        if call_id in scripted:
            owners[key].append(call_id)
    by_call: dict[LogicalCall, list[str]] = collections.defaultdict(list)
    for known in scripted.values():
        by_call[known.call].append(known.id)
    found: dict[int, str] = {}
    for effect in tool_effects(history):
        call = logical_call(effect.tool, effect.arguments)
        named = [cid for cid in owners.get(effect.key or "", []) if scripted[cid].call == call]
        candidates = named if named else by_call.get(call, [])
        if len(candidates) == 1:
            found[effect.seq] = candidates[0]
    return found


# --- faults ----------------------------------------------------------------------------


def fault_hit(
    history: history_module.TrialHistory, fault: history_module.FaultApplied
) -> history_module.BoundaryHit | None:
    """The boundary hit the fault struck at, as recorded (a time hit marks none)."""
    if fault.struck_at is None:
        return None
    for hit in boundary_hits(history):
        if hit.point == fault.struck_at.point and hit.occurrence == fault.struck_at.occurrence:
            return hit
    return None


def interruptions(history: history_module.TrialHistory) -> list[Interruption]:
    """Interrupting faults that were applied, each with its hit and the moment it ended."""
    faults = sorted(history.faults(), key=lambda fault: fault.seq)
    used: set[int] = set()
    found: list[Interruption] = []
    for index, fault in enumerate(faults):
        if fault.action not in INTERRUPTING or not fault.ok:
            continue
        ender = _ENDED_BY.get(fault.action)
        # A fault nothing ends (a kill, a lost response) is over the moment it happens.
        end = fault.t if ender is None else math.inf
        for later in faults[index + 1 :]:
            if later.seq in used or later.action != ender or not later.ok:
                continue
            if later.worker_id and fault.worker_id and later.worker_id != fault.worker_id:
                continue
            used.add(later.seq)
            end = later.t
            break
        found.append(Interruption(fault, fault_hit(history, fault), fault.t, end))
    return found


def struck_in(history: history_module.TrialHistory, window: frozenset[str]) -> list[Interruption]:
    """Interruptions that struck at an after-commit point of `window` (e.g. TOOL_WINDOW).

    A `:before_commit` twin is outside while its transaction has not committed: the window
    had not opened yet. If it committed all the same (its answer came back late, or
    Postgres says a lost acknowledgement's transaction committed), the interruption held
    the worker inside the window that commit opened, and counts as struck there.
    """
    found = landed(history)
    return [
        item
        for item in interruptions(history)
        if item.hit and window_point(item.hit, found) in window
    ]


def landed(history: history_module.TrialHistory) -> set[int]:
    """Seqs of `:before_commit` hits whose transaction committed all the same (its answer
    came back, or Postgres said so after a lost acknowledgement)."""
    return set(commit_sent(history).values()) | {lost.hit.seq for lost in lost_acks(history)}


def window_point(hit: history_module.BoundaryHit, landed: set[int]) -> str:
    """The point a worker held at `hit` was at, for a window: a `:before_commit` hit whose
    transaction committed all the same (`landed`) counts as its commit point."""
    if is_before_commit(hit) and hit.seq in landed:
        return boundaries.base_name(point(hit))
    return point(hit)


@dataclasses.dataclass(frozen=True)
class LostAck:
    """A commit whose acknowledgement a fault dropped, yet Postgres says it committed."""

    fault: history_module.FaultApplied
    hit: history_module.BoundaryHit  # the `:before_commit` hit it struck at
    heal: history_module.FaultApplied  # its heal, which read the transaction's fate

    def describe(self) -> str:
        xids = self.heal.observed.get("xids") or []
        xid = f"xid {xids[0]}, " if len(xids) == 1 else ""
        return (
            f"{boundaries.base_name(self.hit.point)} committed under {self.fault.action} at "
            f"{self.hit.point}#{self.hit.occurrence} (fault seq {self.fault.seq}, "
            f"t={self.fault.t:.3f}; {xid}committed as read from Postgres)"
        )


def lost_acks(history: history_module.TrialHistory) -> list[LostAck]:
    """commit_lost/commit_dropped faults whose held transaction really committed.

    The engine never heard the answer, so its boundary after COMMIT is missing; the heal
    record says what Postgres did with the transaction (harness/nemesis/nemesis.py).
    """
    heals = [fault for fault in history.faults() if fault.action == "heal" and fault.ok]
    found = []
    for fault in history.faults():
        if fault.action not in spec.COMMIT or not fault.ok or fault.planned is None:
            continue
        hit = fault_hit(history, fault)
        heal = next((heal for heal in reversed(heals) if _heals(heal, fault)), None)
        if hit is None or heal is None or not is_before_commit(hit):
            continue
        if heal.observed.get("transaction") == "committed":
            found.append(LostAck(fault, hit, heal))
    return found


def _heals(heal: history_module.FaultApplied, fault: history_module.FaultApplied) -> bool:
    """The nemesis heals a fault under the same step, struck at the same hit."""
    return heal.planned == fault.planned and heal.struck_at == fault.struck_at


def database_down_at_end(history: history_module.TrialHistory) -> list[Interruption]:
    return [
        item
        for item in interruptions(history)
        if item.fault.action in DATABASE_FAULTS and math.isinf(item.end)
    ]


# --- world ledgers ---------------------------------------------------------------------


def model_requests(
    history: history_module.TrialHistory, *, answered_only: bool = False
) -> list[ledger.ModelRequest]:
    """This run's model requests in ledger order; `answered_only`: those answered 200."""
    requests = [
        entry
        for entry in history.model
        if entry.run_key == history.run_key and (entry.status_code == 200 or not answered_only)
    ]
    return sorted(requests, key=lambda entry: entry.seq)


def tool_requests(history: history_module.TrialHistory) -> list[ledger.ToolRequest]:
    return sorted(
        (entry for entry in history.tools if isinstance(entry, ledger.ToolRequest)),
        key=lambda entry: entry.seq,
    )


def tool_effects(history: history_module.TrialHistory) -> list[ledger.ToolEffect]:
    return sorted(
        (entry for entry in history.tools if isinstance(entry, ledger.ToolEffect)),
        key=lambda entry: entry.seq,
    )


def tool_queries(history: history_module.TrialHistory) -> list[ledger.ToolQuery]:
    return sorted(
        (entry for entry in history.tools if isinstance(entry, ledger.ToolQuery)),
        key=lambda entry: entry.seq,
    )


def redeploys(history: history_module.TrialHistory, tool: str) -> list[ledger.ToolRedeploy]:
    """When the tool's declaration (its fingerprint) changed during the trial."""
    return sorted(
        (e for e in history.tools if isinstance(e, ledger.ToolRedeploy) and e.tool == tool),
        key=lambda entry: entry.seq,
    )


def expected_reply(history: history_module.TrialHistory) -> str | None:
    reply = history.scenario.final_reply
    return None if reply is None else schema.substitute_run_key(reply, history.run_key)


def _this_runs_reply(
    history: history_module.TrialHistory, entry: ledger.ReplyRequest | ledger.ReplyDelivery
) -> bool:
    """By run id, or by content when a run id is missing."""
    if entry.run_id is not None and history.run_id is not None:
        return entry.run_id == history.run_id
    wanted = expected_reply(history)
    return wanted is not None and entry.content == wanted


def deliveries(history: history_module.TrialHistory) -> list[ledger.ReplyDelivery]:
    """Deliveries of this run's reply."""
    found = [
        entry
        for entry in history.sink
        if isinstance(entry, ledger.ReplyDelivery) and _this_runs_reply(history, entry)
    ]
    return sorted(found, key=lambda entry: entry.seq)


def reply_requests(history: history_module.TrialHistory) -> list[ledger.ReplyRequest]:
    """POSTs of this run's reply, whatever the sink answered."""
    found = [
        entry
        for entry in history.sink
        if isinstance(entry, ledger.ReplyRequest) and _this_runs_reply(history, entry)
    ]
    return sorted(found, key=lambda entry: entry.seq)


# --- transcripts -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ToolMessage:
    call_id: str
    index: int  # position in the request's messages
    content: dict[str, Any] | None  # the parsed JSON object, None when unreadable
    raw: str | None


def tool_messages(request: ledger.ModelRequest) -> list[ToolMessage]:
    found = []
    for index, message in enumerate(request.messages):
        if message.get("role") != "tool":
            continue
        call_id = message.get("tool_call_id")
        text = transcript.text_of(message.get("content"))
        parsed: Any = None
        if text is not None:
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
        found.append(
            ToolMessage(
                str(call_id),
                index,
                parsed if isinstance(parsed, dict) else None,
                text,
            )
        )
    return found


def assistant_call_ids(request: ledger.ModelRequest) -> list[str]:
    ids = []
    for message in request.messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                ids.append(call["id"])
    return ids


def table_rows(history: history_module.TrialHistory, table: str) -> list[dict[str, Any]]:
    """Rows of an engine table for this run (rows without a run id are kept)."""
    rows = (history.engine_tables or {}).get(table) or []
    return [row for row in rows if _this_run(history, _text(row.get("run_id")))]


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def final_status(history: history_module.TrialHistory) -> str | None:
    report = history.final_report
    return None if report is None else report.status


def foreign_notes(history: history_module.TrialHistory, *services: str) -> list[str]:
    """Evidence that requests without the trial's secret reached these world services and
    were refused (harness/world/auth.py): not the engine's, so they count for nothing."""
    refused = [entry for entry in history.foreign if entry.service in services]
    if not refused:
        return []
    shown = "; ".join(f"{entry.method} {entry.path}" for entry in refused[:3])
    more = f" (+{len(refused) - 3} more)" if len(refused) > 3 else ""
    return [
        f"{len(refused)} foreign request(s) to the {'/'.join(services)} refused (no trial "
        f"secret), not counted as the engine's: {shown}{more}"
    ]
