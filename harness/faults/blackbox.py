"""Black-box mode: faults triggered by the world, for engines that report no boundaries.

harness/CONTRACT.md section 6. The world calls a hook in the request's thread before its
response leaves; the trigger records a hit `world:model.answered#N`, `world:tool.effect#N`
or `world:reply.accepted#N` and applies the plan's faults due there. `time:+Xs` points
strike X seconds after the world first answered the run's model request.

Which worker is hit: the live worker of the trial that holds a TCP connection to the
service being answered (psutil, the peer of the request) is handed to the nemesis like a
boundary reporter, so every fault class works. When no worker can be identified (a time
point, or the connection is gone), a kill strikes every live worker of the trial, and a
fresh worker is started: the run itself is held by at most one of them.

Checkers judge a black-box history through `judge`: world hits are read as the boundary
they stand for (`tool.effect` -> tool.returned, `reply.accepted` -> reply.sent,
`model.answered` -> model.returned), and invariants that need the engine's own boundaries
(`lease.fencing`) say INCONCLUSIVE instead of passing by default.
"""

from __future__ import annotations

import collections
import random
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

import psutil

from harness import checkers
from harness.checkers import facts
from harness.checkers import verdict as verdict_module
from harness.contract import boundaries, run_report
from harness.contract.engines import adapter as adapter_module
from harness.lab import launcher as launcher_module
from harness.trial import history
from harness.trial import recorder as recorder_module
from harness.world import ledger
from harness.world import world as world_module

MODEL_ANSWERED, TOOL_EFFECT, REPLY_ACCEPTED = boundaries.WORLD_POINTS
# The boundary each world point stands for (DESIGN.md's table): the effect happened outside,
# the engine has not recorded it.
EQUIVALENT = {
    MODEL_ANSWERED: "model.returned",
    TOOL_EFFECT: "tool.returned",
    REPLY_ACCEPTED: "reply.sent",
}
# Translated hits get occurrences far from any the engine reports itself.
OCCURRENCE_OFFSET = 1000
# Invariants judged from the engine's own boundaries only: never PASS in a black box.
NEEDS_BOUNDARIES = ("lease.fencing",)
# Invariants INCONCLUSIVE in a black box because the hits they read were not collected.
SHOWN_BY_BOUNDARIES = ("model.once_after_decision", "frontier.monotonic")
NOT_COLLECTED = "black-box mode, the engine's own boundaries not collected"
# Time kills are drawn in this part of the baseline's span (first model answer -> terminal).
TIME_SPAN = (0.05, 0.95)
# Where a time kill landed: the last world point before it and its ledger seq (hit detail).
# A wall-clock offset does not reproduce a trial; the world event before it does.
AFTER_WORLD_POINT, AFTER_LEDGER_SEQ = "after_world_point", "after_ledger_seq"

HitPolicy = Callable[[history.BoundaryHit], None]


class BlackBoxEngine:
    """An engine adapter seen as a black box: the same engine, no control channel."""

    def __init__(self, engine: adapter_module.EngineAdapter) -> None:
        self._engine = engine
        self.name = engine.name
        self.boundaries: tuple[str, ...] = ()
        # What the engine itself reports, for evidence that must not say it reports nothing.
        self.declared_boundaries: tuple[str, ...] = engine.boundaries
        self.lease_ms = engine.lease_ms
        self.preload = engine.preload

    @property
    def cwd(self) -> str | None:
        return self._engine.cwd

    def migrate(self, dsn: str) -> None:
        self._engine.migrate(dsn)

    def worker_command(self) -> list[str]:
        return self._engine.worker_command()

    def worker_env(self) -> Mapping[str, str]:
        return self._engine.worker_env()

    def submit(self, dsn: str, run_input: run_report.RunInput) -> str:
        return self._engine.submit(dsn, run_input)

    def report(self, dsn: str, run_id: str) -> run_report.RunReport:
        return self._engine.report(dsn, run_id)

    def export(self, dsn: str, run_id: str) -> dict[str, list[dict[str, Any]]] | None:
        return self._engine.export(dsn, run_id)


def declared_boundaries(engine: adapter_module.EngineAdapter) -> tuple[str, ...]:
    """The points the engine's description declares, also when it runs as a black box."""
    if isinstance(engine, BlackBoxEngine):
        return engine.declared_boundaries
    return engine.boundaries


def wanted(engine: adapter_module.EngineAdapter, plan: list[history.FaultStep]) -> bool:
    """World triggers are installed for black-box engines and for plans with black-box points."""
    return not engine.boundaries or any(boundaries.is_blackbox_point(s.point) for s in plan)


class WorldTrigger:
    """Turns world events into hits and applies the faults due at them."""

    def __init__(
        self,
        world: world_module.World,
        plan: list[history.FaultStep],
        *,
        run_key: str,
        recorder: recorder_module.Recorder,
        launcher: launcher_module.Launcher,
        policy: HitPolicy,
    ) -> None:
        self._world = world
        self._run_key = run_key
        self._recorder = recorder
        self._launcher = launcher
        self._policy = policy
        self._lock = threading.Lock()
        self._counts: collections.Counter[str] = collections.Counter()
        self._pending = [s for s in plan if boundaries.is_blackbox_point(s.point)]
        self._timers: list[threading.Timer] = []
        self._armed = False
        self._closed = False
        self._last_world: dict[str, Any] = {}  # the last world point hit, for time kills
        self._ports = {
            MODEL_ANSWERED: _port(world.model_url),
            TOOL_EFFECT: _port(world.tools_url),
            REPLY_ACCEPTED: _port(world.reply_url),
        }

    def install(self) -> WorldTrigger:
        hooks = self._world.hooks
        hooks.model_answered = self._model_answered
        hooks.tool_effect_applied = self._tool_effect
        hooks.reply_accepted = self._reply_accepted
        return self

    def close(self) -> None:
        hooks = self._world.hooks
        hooks.model_answered = hooks.tool_effect_applied = hooks.reply_accepted = None
        with self._lock:
            self._closed = True
            timers, self._timers = self._timers, []
        for timer in timers:
            timer.cancel()

    # -- hooks (request threads) -------------------------------------------------------

    def _model_answered(self, entry: ledger.ModelRequest) -> None:
        if entry.run_key != self._run_key:
            return
        self._arm_timers()
        self._hit(MODEL_ANSWERED, {"turn": entry.turn, "ledger_seq": entry.seq})

    def _tool_effect(self, entry: ledger.ToolEffect) -> None:
        detail = {"tool": entry.tool, "key": entry.key, "ledger_seq": entry.seq}
        self._hit(TOOL_EFFECT, detail)

    def _reply_accepted(self, entry: ledger.ReplyDelivery) -> None:
        self._hit(REPLY_ACCEPTED, {"key": entry.key, "ledger_seq": entry.seq})

    def _arm_timers(self) -> None:
        with self._lock:
            if self._armed or self._closed:
                return
            self._armed = True
            for step in self._pending:
                seconds = boundaries.time_point_seconds(step.point)
                if seconds is None:
                    continue
                timer = threading.Timer(seconds, self._hit, args=(step.point, {}))
                timer.daemon = True
                self._timers.append(timer)
                timer.start()

    def _hit(self, point: str, detail: dict[str, Any]) -> None:
        with self._lock:
            if self._closed:
                return
            self._counts[point] += 1
            occurrence = self._counts[point]
            due = [s for s in self._pending if s.point == point and s.occurrence == occurrence]
            for step in due:
                self._pending.remove(step)
            if boundaries.is_world_point(point):
                self._last_world = {
                    AFTER_WORLD_POINT: f"{point}#{occurrence}",
                    AFTER_LEDGER_SEQ: detail.get("ledger_seq"),
                }
            else:  # a time point: record where in the world's story it landed
                detail = {**detail, **self._last_world}
        worker = self._client(self._ports.get(point))
        hit = history.BoundaryHit(
            point=point,
            occurrence=occurrence,
            run_id=None,
            worker_id=worker.worker_id if worker else None,
            pid=worker.pid if worker else None,
            detail=detail,
        )
        recorded = self._recorder.append(hit)
        assert isinstance(recorded, history.BoundaryHit)
        if not due:
            return
        if worker is not None or all(step.action != "kill" for step in due):
            # The nemesis finds the worker by pid (every fault works), restarts Postgres
            # without one, or records that it had no worker to act on.
            self._policy(recorded)
            return
        for step in due:
            self._kill_every_worker(step, recorded)

    def _client(self, port: int | None) -> Any | None:
        """The live worker with a TCP connection to `port` (the request's peer), if one."""
        if port is None:
            return None
        found = []
        for worker in self._launcher.workers.alive():
            if _connected(worker.pid, port):
                found.append(worker)
        return found[0] if len(found) == 1 else None

    def _kill_every_worker(self, step: history.FaultStep, hit: history.BoundaryHit) -> None:
        if step.action != "kill":
            self._record(step, hit, ok=False, note="no worker identified: cannot apply")
            return
        workers = self._launcher.workers.alive()
        for worker in workers:
            worker.kill()
        groups = ", ".join(str(worker.pgid) for worker in workers) or "none alive"
        note = f"SIGKILL every live worker (groups {groups})"
        if AFTER_WORLD_POINT in hit.detail:
            note += (
                f", landed after {hit.detail[AFTER_WORLD_POINT]} "
                f"(world ledger seq {hit.detail.get(AFTER_LEDGER_SEQ)})"
            )
        self._record(step, hit, ok=True, note=note)
        with self._lock:
            if self._closed:
                return
        self._launcher.start()  # the pool is empty: a fresh worker, as a supervisor would

    def _record(
        self, step: history.FaultStep, hit: history.BoundaryHit, *, ok: bool, note: str
    ) -> None:
        self._recorder.append(
            history.FaultApplied(
                action=step.action, step=step.label(), worker_id=None, pid=None, ok=ok, note=note
            )
        )


def _port(url: str) -> int | None:
    return urllib.parse.urlsplit(url).port


def _connected(pid: int, port: int) -> bool:
    try:
        process = psutil.Process(pid)
        family = [process, *process.children(recursive=True)]
        for member in family:
            for connection in member.net_connections(kind="tcp"):
                remote = connection.raddr
                if remote and remote.port == port and connection.status == "ESTABLISHED":
                    return True
    except psutil.Error:
        return False
    return False


# --- judging ---------------------------------------------------------------------------


def is_black_box(trial: history.TrialHistory) -> bool:
    """No hit of the engine's own: only the world (or nothing) reported."""
    return not any(not boundaries.is_blackbox_point(hit.point) for hit in trial.boundary_hits())


def translated(trial: history.TrialHistory) -> history.TrialHistory:
    """The history with world hits as the boundaries they stand for, time hits dropped."""
    renamed: dict[str, str] = {}
    events: list[history.Event] = []
    call_ids = _effect_call_ids(trial)
    for event in trial.events:
        if isinstance(event, history.BoundaryHit) and boundaries.is_blackbox_point(event.point):
            if event.point not in EQUIVALENT:
                continue  # a time point marks no place in the engine's work
            occurrence = OCCURRENCE_OFFSET + event.occurrence
            point = EQUIVALENT[event.point]
            renamed[f"{event.point}#{event.occurrence}"] = f"{point}#{occurrence}"
            detail = {**event.detail, facts.WORLD_POINT_DETAIL: f"{event.point}#{event.occurrence}"}
            if event.point == TOOL_EFFECT and detail.get("ledger_seq") in call_ids:
                detail["tool_call_id"] = call_ids[detail["ledger_seq"]]
            event = event.model_copy(
                update={"point": point, "occurrence": occurrence, "detail": detail}
            )
        events.append(event)
    fixed: list[history.Event] = []
    for event in events:
        if isinstance(event, history.FaultApplied) and event.step and "@" in event.step:
            action, _, where = event.step.partition("@")
            if where in renamed:
                event = event.model_copy(update={"step": f"{action}@{renamed[where]}"})
        fixed.append(event)
    return trial.model_copy(update={"events": fixed})


def _effect_call_ids(trial: history.TrialHistory) -> dict[int, str]:
    """Ledger seq of each tool effect -> the scripted call it belongs to.

    By its idempotency key when the engine names that key for one call of the same tool
    and arguments (report `tool_calls`, tool.started/tool.settled details); else by its
    tool and arguments when one scripted call alone has them. Two calls with equal
    arguments and no named key are not guessed: the checkers then judge by key.
    """
    scripted = facts.scripted_calls(trial)
    owners: dict[str, list[str]] = collections.defaultdict(list)
    for call_id, key in facts.named_keys(trial).items():
        if call_id in scripted:
            owners[key].append(call_id)
    by_call: dict[facts.LogicalCall, list[str]] = collections.defaultdict(list)
    for known in scripted.values():
        by_call[known.call].append(known.id)
    found = {}
    for effect in facts.tool_effects(trial):
        call = facts.logical_call(effect.tool, effect.arguments)
        named = [cid for cid in owners.get(effect.key or "", []) if scripted[cid].call == call]
        candidates = named if named else by_call.get(call, [])
        if len(candidates) == 1:
            found[effect.seq] = candidates[0]
    return found


def judge(trial: history.TrialHistory) -> list[verdict_module.CheckResult]:
    """check_all, reading world hits as boundaries; no PASS without the evidence for it."""
    has_world = any(boundaries.is_blackbox_point(hit.point) for hit in trial.boundary_hits())
    results = checkers.check_all(translated(trial) if has_world else trial)
    if not is_black_box(trial):
        return results
    return [_black_box_result(trial, result) for result in results]


def _black_box_result(
    trial: history.TrialHistory, result: verdict_module.CheckResult
) -> verdict_module.CheckResult:
    declared = trial.declared_boundaries
    unshown = (verdict_module.Verdict.PASS, verdict_module.Verdict.INCONCLUSIVE)
    if result.invariant in NEEDS_BOUNDARIES and result.verdict in unshown:
        # The first reason it cannot be shown, whatever else the checker found missing.
        return _unproven(result, _no_claims(declared))
    if result.verdict is verdict_module.Verdict.INCONCLUSIVE and declared:
        if result.invariant in SHOWN_BY_BOUNDARIES:
            # "not reported" means: not collected in this trial, not "the engine has none".
            return result.model_copy(
                update={
                    "summary": f"{NOT_COLLECTED}: {result.summary}",
                    "evidence": [*result.evidence, NOT_COLLECTED],
                }
            )
    if result.verdict is not verdict_module.Verdict.PASS:
        return result
    time_kills = [
        f for f in trial.faults() if f.ok and f.step and "@time:" in f.step and f.action == "kill"
    ]
    non_replayable = any(tool.replay == "non_replayable" for tool in trial.scenario.tools)
    if result.invariant == "tool.unknown_outcome" and time_kills and non_replayable:
        return _unproven(result, "a time kill cannot be placed inside or outside a tool window")
    return result


def _no_claims(declared: list[str] | None) -> str:
    """Why handovers cannot be seen, in words true of this engine."""
    if declared is None:
        return "no run.claimed was recorded in this trial: handovers are invisible"
    if facts.CLAIM_POINT in declared:
        return (
            "the engine reports run.claimed, but this trial ran it as a black box (no control "
            "channel): handovers are invisible"
        )
    return "the engine reports no run.claimed: handovers are invisible"


def _unproven(result: verdict_module.CheckResult, why: str) -> verdict_module.CheckResult:
    return verdict_module.CheckResult(
        invariant=result.invariant,
        verdict=verdict_module.Verdict.INCONCLUSIVE,
        summary=f"black box: {why}",
        evidence=[f"black box: {why}", f"the checker alone said: {result.summary}"],
    )


def rerun_step(trial: history.TrialHistory, step: history.FaultStep) -> history.FaultStep:
    """The step a rerun should plan: a time kill strikes again at the world point it landed
    after (a wall-clock offset lands elsewhere on another run); any other step as it was."""
    if boundaries.time_point_seconds(step.point) is None:
        return step
    for hit in trial.boundary_hits():
        if hit.point != step.point or hit.occurrence != step.occurrence:
            continue
        point, _, occurrence = str(hit.detail.get(AFTER_WORLD_POINT, "")).rpartition("#")
        if boundaries.is_world_point(point) and occurrence.isdigit():
            return step.model_copy(update={"point": point, "occurrence": int(occurrence)})
    return step


# --- time plans ------------------------------------------------------------------------


def time_plans(
    trial: history.TrialHistory, *, count: int, seed: int
) -> list[list[history.FaultStep]]:
    """`count` seeded kills at moments inside a baseline's span, one trial each."""
    answered = [e.t for e in trial.model if e.run_key == trial.run_key and e.status_code == 200]
    end = trial.finished_at or trial.ended_at
    if not answered or count <= 0 or end <= answered[0]:
        return []
    span = end - answered[0]
    chooser = random.Random(f"{seed}:{trial.scenario.name}")
    moments = sorted({round(span * chooser.uniform(*TIME_SPAN), 2) for _ in range(count)})
    return [
        [history.FaultStep(action="kill", point=f"time:+{max(moment, 0.01):.2f}s")]
        for moment in moments
    ]
