"""A scenario's `actions`: the harness approves, rejects or cancels from outside, as an
operator or client would, through the engine's optional commands (CONTRACT.md, section 5).

An action fires once its point came: a boundary hit (`tool.started#1`) or, for approve and
reject, a report showing the call awaiting approval. A command that fails (Postgres down
on purpose, say) is tried again at the next poll. What never fired is recorded as not
applied, and the trial is INCONCLUSIVE (`scenario.actions`): it proved nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from harness import errors
from harness.contract import run_report
from harness.record import history
from harness.record import recorder as recorder_module
from harness.scenario import schema

log = logging.getLogger(__name__)

# How often the runner looks for an action's point while one is pending.
POLL_S = 0.1


class Actor:
    def __init__(
        self,
        engine: Any,
        dsn: str,
        run_id: str,
        scenario: schema.Scenario,
        recorder: recorder_module.Recorder,
    ) -> None:
        self._engine = engine
        self._dsn = dsn
        self._run_id = run_id
        self._recorder = recorder
        # purge and reuse_key come once the run is terminal (harness/trial/retention.py)
        self._pending = [a for a in scenario.actions if a.do not in schema.AFTER_FINISH]
        self._errors: dict[int, str] = {}

    @property
    def waiting(self) -> bool:
        return bool(self._pending)

    def step(self) -> None:
        """Fire every pending action whose point has come."""
        report: run_report.RunReport | None = None
        for action in list(self._pending):
            if not self._engine.can(action.do):
                self._pending.remove(action)
                self._record(action, 0, ok=False, note=f"the engine has no {action.do} command")
                continue
            point = action.point
            if point is not None:
                if not self._reached(*point):
                    continue
            else:
                if report is None:
                    report = self._report()
                if report is None or not _awaiting(report, action.call):
                    continue
            requested = self._recorder.tick()
            try:
                self._engine.act(self._dsn, action.do, self._run_id, action.call)
            except errors.CrashcertError as error:
                self._errors[id(action)] = str(error)
                log.info("%s not applied yet: %s", action.do, error)
                continue
            self._pending.remove(action)
            self._record(action, requested, ok=True)

    def close(self) -> None:
        """Record what never fired, with the last reason it did not."""
        for action in self._pending:
            note = self._errors.get(id(action), f"its point ({action.at}) never came")
            self._record(action, 0, ok=False, note=note)
        self._pending = []

    def _reached(self, point: str, occurrence: int) -> bool:
        return any(
            hit.point == point and hit.occurrence >= occurrence
            for hit in self._recorder.boundary_hits()
        )

    def _report(self) -> run_report.RunReport | None:
        try:
            report: run_report.RunReport = self._engine.report(self._dsn, self._run_id)
        except errors.CrashcertError as error:
            log.info("run report unavailable for an action: %s", error)
            return None
        return report

    def _record(self, action: schema.Action, requested: int, *, ok: bool, note: str = "") -> None:
        self._recorder.append(
            history.ActionTaken(
                do=action.do,
                call=action.call,
                at=action.at,
                requested_seq=requested,
                ok=ok,
                note=note,
            )
        )


def _awaiting(report: run_report.RunReport, call: str | None) -> bool:
    return any(c.id == call and c.state == "awaiting_approval" for c in report.tool_calls)
