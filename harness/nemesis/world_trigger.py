"""The world as a fault trigger, for engines that report no boundaries (black-box mode).

harness/CONTRACT.md section 6. The world calls a hook in the request's thread before its
response leaves; the trigger records a hit `world:model.answered#N`, `world:tool.effect#N`
or `world:reply.accepted#N`, carrying the boundary it stands for (`model.returned`,
`tool.returned`, `reply.sent`: the checkers judge it so, as recorded), and applies the
plan's faults due there. `time:+Xs` points
strike X seconds after the world first answered the run's model request.

Which worker is hit: the live worker of the trial that holds a TCP connection to the
service being answered (psutil, the peer of the request) is handed to the nemesis like a
boundary reporter, so every fault class works. When no worker can be identified (a time
point, or the connection is gone), a kill strikes every live worker of the trial, and a
fresh worker is started: the run itself is held by at most one of them.

`response_lost` and `stream_cut` are the world's own doing: the trigger records the fault,
then tells the world's server, in the request's thread, to lose the response it is about
to send (harness/world/http.py: reset, hang or cut). The effect is real, its answer never
arrives; no worker is touched.
"""

from __future__ import annotations

import collections
import threading
import urllib.parse
from collections.abc import Callable
from typing import Any

import psutil

from harness.contract import boundaries
from harness.faults import spec
from harness.lab import launcher as launcher_module
from harness.planning import plan as plan_module
from harness.record import history
from harness.record import recorder as recorder_module
from harness.world import http, ledger
from harness.world import world as world_module

MODEL_ANSWERED, TOOL_EFFECT, REPLY_ACCEPTED = boundaries.WORLD_POINTS

# The contract's variables naming the service that answers at each world point (the
# tools by one transport or the other, world_links.ENV).
WORLD_VARIABLES = {
    MODEL_ANSWERED: ("OPENAI_BASE_URL",),
    TOOL_EFFECT: ("CRASHCERT_TOOLS_URL", "CRASHCERT_TOOLS_MCP_URL"),
    REPLY_ACCEPTED: ("CRASHCERT_REPLY_URL",),
}

HitPolicy = Callable[[history.BoundaryHit], None]


class WorldTrigger:
    """Turns world events into hits and applies the faults due at them."""

    def __init__(
        self,
        world: world_module.World,
        plan: list[spec.FaultStep],
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
            TOOL_EFFECT: _port(world.tools_endpoint),
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
        detail = {"turn": entry.turn, "ledger_seq": entry.seq}
        self._hit(MODEL_ANSWERED, detail, streamed=entry.stream)

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

    def _hit(self, point: str, detail: dict[str, Any], *, streamed: bool = False) -> None:
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
                    plan_module.AFTER_WORLD_POINT: f"{point}#{occurrence}",
                    plan_module.AFTER_LEDGER_SEQ: detail.get("ledger_seq"),
                }
            else:  # a time point: record where in the world's story it landed
                detail = {**detail, **self._last_world}
        worker = self._client(point)
        hit = history.BoundaryHit(
            point=point,
            occurrence=occurrence,
            run_id=None,
            worker_id=worker.worker_id if worker else None,
            pid=worker.pid if worker else None,
            detail=detail,
            stands_for=boundaries.STANDS_FOR.get(point),  # what the checkers read it as
        )
        recorded = self._recorder.append(hit)
        assert isinstance(recorded, history.BoundaryHit)
        for step in [s for s in due if s.action in spec.IN_WORLD]:
            self._lose_response(step, recorded, streamed=streamed)
        due = [s for s in due if s.action not in spec.IN_WORLD]
        if not due:
            return
        if worker is not None or all(step.action != "kill" for step in due):
            # The nemesis finds the worker by pid (every fault works), restarts Postgres
            # without one, or records that it had no worker to act on.
            self._policy(recorded)
            return
        for step in due:
            self._kill_every_worker(step, recorded)

    def _lose_response(
        self, step: spec.FaultStep, hit: history.BoundaryHit, *, streamed: bool
    ) -> None:
        """Have the server lose the response it is about to send, and record it: the
        record lands before the response would have left, so before the engine can react."""
        if step.action == "stream_cut":
            if not streamed:
                note = "the request did not ask to stream: no stream to cut, answered whole"
                self._record(step, hit, ok=False, note=note)
                return
            chunks = step.params.get("after_chunks")
            fate = http.Fate("cut", after_chunks=None if chunks is None else int(chunks))
            where = "half" if chunks is None else str(chunks)
            note = f"stream cut after {where} of its chunks, before its last (no [DONE])"
        else:
            mode = str(step.params.get("mode", "reset"))
            fate = http.Fate("hang" if mode == "hang" else "reset")
            note = (
                "response lost: held until the client gave up, then reset"
                if mode == "hang"
                else "response lost: connection reset (RST) after the effect was recorded"
            )
        if not http.lose_response(fate):  # not served by the world's HTTP server
            self._record(step, hit, ok=False, note="this response cannot be lost here")
            return
        # In the lane of the worker whose answer it was (the timeline draws it there).
        self._record(step, hit, ok=True, note=note, worker_id=hit.worker_id)

    def _client(self, point: str) -> Any | None:
        """The live worker with a TCP connection to the service answering at `point` (the
        request's peer), if one. A worker whose link to it runs through its own Toxiproxy
        proxy (tool_cut, model_cut, sink_cut) is connected to that proxy, not to the
        service, whose peer is then Toxiproxy: it is found by the port it was given."""
        port = self._ports.get(point)
        if port is None:
            return None
        found = []
        for worker in self._launcher.workers.alive():
            given = [self._launcher.world_url(worker.worker_id, v) for v in WORLD_VARIABLES[point]]
            ports = {port, *(_port(url) for url in given if url)} - {None}
            if any(_connected(worker.pid, each) for each in ports if each is not None):
                found.append(worker)
        return found[0] if len(found) == 1 else None

    def _kill_every_worker(self, step: spec.FaultStep, hit: history.BoundaryHit) -> None:
        if step.action != "kill":
            self._record(step, hit, ok=False, note="no worker identified: cannot apply")
            return
        workers = self._launcher.workers.alive()
        for worker in workers:
            worker.kill()
        groups = ", ".join(str(worker.pgid) for worker in workers) or "none alive"
        note = f"SIGKILL every live worker (groups {groups})"
        if plan_module.AFTER_WORLD_POINT in hit.detail:
            note += (
                f", landed after {hit.detail[plan_module.AFTER_WORLD_POINT]} "
                f"(world ledger seq {hit.detail.get(plan_module.AFTER_LEDGER_SEQ)})"
            )
        self._record(step, hit, ok=True, note=note)
        with self._lock:
            if self._closed:
                return
        self._launcher.start()  # the pool is empty: a fresh worker, as a supervisor would

    def _record(
        self,
        step: spec.FaultStep,
        hit: history.BoundaryHit,
        *,
        ok: bool,
        note: str,
        worker_id: str | None = None,
    ) -> None:
        struck_at = spec.PointRef(point=hit.point, occurrence=hit.occurrence)
        self._recorder.append(
            history.FaultApplied(
                action=step.action,
                planned=step,
                struck_at=struck_at,
                ok=ok,
                note=note,
                worker_id=worker_id,
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
