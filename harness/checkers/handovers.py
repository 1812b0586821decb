"""Lease handovers: each claim after the first, where the run stood when the lease changed
hands, and the planned fault (if any) that explains it.

Load on a shared runner stalls a live worker past its lease as a pause does: another
worker, or the same one once it runs again, claims the run, and a correct engine does what
it does after any interruption. It asks the model again for an answer it had not recorded,
and on a sink that cannot be asked it ends `delivery_uncertain` when the lease changed
hands with the delivery window open. `run.liveness` accepts those endings after such a
handover as it does after a planned fault (reach.accepted_status). Two certify trials at 8
at once on 2 cores ended so (pydantic_ai_6979 under kill@model.pending#1, openclaw_22780
under pause@reply.ready#1) and were failed. An engine's own releases are handovers with
no fault planned too (a run parked for approval and claimed again, a retry after a
backoff): the new holder knows as little, and is judged alike. A black box reports no
claims: its handovers are invisible, and nothing is accepted for them.
"""

from __future__ import annotations

import dataclasses

from harness.checkers import facts
from harness.contract import boundaries
from harness.record import history as history_module


@dataclasses.dataclass(frozen=True)
class Handover:
    claim: history_module.BoundaryHit
    # The run's last hit before the claim (a claim aside): where the lease changed hands.
    at: history_module.BoundaryHit | None
    # An interrupting fault that struck at a hit since the previous claim; None: none did.
    planned: facts.Interruption | None

    def describe(self) -> str:
        where = f" with the run at {facts.describe_hit(self.at)}" if self.at else ""
        why = f"after {self.planned.describe()}" if self.planned else "no fault planned"
        return f"the lease changed hands at {facts.describe_hit(self.claim)}{where} ({why})"


def handovers(history: history_module.TrialHistory) -> list[Handover]:
    """Every claim after the first, in the order the harness heard them."""
    interruptions = facts.interruptions(history)
    found: list[Handover] = []
    previous: history_module.BoundaryHit | None = None
    at: history_module.BoundaryHit | None = None
    for hit in facts.run_hits(history):
        if facts.point(hit) != facts.CLAIM_POINT:
            at = hit
            continue
        if previous is not None:
            planned = next((i for i in interruptions if previous.seq <= _anchor(i) < hit.seq), None)
            found.append(Handover(hit, at, planned))
        previous = hit
    return found


def _anchor(interruption: facts.Interruption) -> int:
    """Where a fault belongs in the run: the hit it struck at. Its own record may come
    after the claim it caused (a killed worker's run is claimed before the kill is
    recorded); a fault without a hit (a time hit: black boxes only) by its record."""
    return interruption.hit.seq if interruption.hit else interruption.fault.seq


def in_delivery_window(history: history_module.TrialHistory) -> list[Handover]:
    """Handovers while the delivery window was open: `reply.sending` committed and the
    delivery not yet recorded. The new holder cannot know whether the reply went out."""
    committed = facts.landed(history)
    return [
        handover
        for handover in handovers(history)
        if handover.at is not None
        and facts.window_point(handover.at, committed) in boundaries.DELIVERY_WINDOW
    ]


@dataclasses.dataclass(frozen=True)
class Repeats:
    """Iterations reserved again for a turn (`model.pending` names its `turn`), and which
    of them a handover no fault planned caused."""

    total: int
    unplanned: list[Handover]  # the handover behind each such repeat, one repeat each


def repeats(history: history_module.TrialHistory) -> Repeats | None:
    """None when a `model.pending` hit names no turn: what was repeated cannot be told."""
    unplanned = [handover for handover in handovers(history) if handover.planned is None]
    reserved: dict[int, int] = {}  # turn -> seq of its last reservation
    total = 0
    blamed: list[Handover] = []
    for hit in facts.run_hits(history):
        if facts.point(hit) != facts.MODEL_PENDING:
            continue
        turn = facts.detail_int(hit, "turn")
        if turn is None:
            return None
        before = reserved.get(turn)
        reserved[turn] = hit.seq
        if before is None:
            continue
        total += 1
        cause = next(
            (h for h in unplanned if before < h.claim.seq < hit.seq and h not in blamed), None
        )
        if cause is not None:
            blamed.append(cause)
    return Repeats(total, blamed)


def budget_spent_on_unplanned(history: history_module.TrialHistory) -> str | None:
    """Why `budget_exhausted` is the load's doing, or None: the iteration budget ran out,
    a handover no fault planned made the engine reserve a turn's iteration again, and
    without those the scripted turns and the planned faults' repeats fit the budget."""
    report = history.final_report
    limit = history.scenario.budgets.iterations
    if report is None or facts.ITERATIONS not in report.budget:
        return None
    found = repeats(history)
    if report.budget[facts.ITERATIONS].used < limit or found is None or not found.unplanned:
        return None
    planned = found.total - len(found.unplanned)
    turns = len(history.scenario.turns)
    if turns + planned > limit:
        return None
    return (
        f"the iteration budget ({limit} for {turns} scripted turns) went to {found.total} "
        f"repeated model.pending, {len(found.unplanned)} after a handover no fault planned "
        f"({found.unplanned[0].describe()}); the scripted turns and the planned faults' "
        f"{planned} fit the budget"
    )
