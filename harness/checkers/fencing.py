"""`lease.fencing`: a worker that lost its lease commits nothing afterwards.

A worker W loses the lease when another worker claims the run while W is alive; from then
until W claims again, W must send no COMMIT (judged from its commit hits: the COMMIT left
after the hit's `:before_commit` twin), and (with engine tables) write no event. A commit
whose COMMIT was already in flight at the claim may have landed first: not judged from
hits. Calls to the world by a stale worker cannot be attributed to it: not judged here.
At the attempt limit a worker may end a lapsed run dead_lettered without claiming it: that
finish is a handover too, never a stale commit (CONTRACT.md section 5).

Claims are taken in the order the harness heard them, unless they name their `lease_epoch`:
a worker that stalls between its claim's COMMIT and its report (a starved CPU) may report
after a newer claim that superseded it. A claim with a lower epoch than one already heard
took the lease from nobody: its worker is fenced by the newer claim from then on.
"""

from __future__ import annotations

from typing import Any

from harness.checkers import facts, reach, verdict
from harness.contract import boundaries
from harness.record import history as history_module

INVARIANT = "lease.fencing"
FINISH_POINT = "run.finished"
DEAD_LETTERED = "dead_lettered"
CLAIM_KINDS = frozenset({facts.CLAIM_POINT, "claimed"})
EPOCH = "lease_epoch"  # a claim's detail: grows with every claim of the run
# Worker events after which the worker is dead: it exited, or crashed on its own.
GONE = frozenset({"exited", "crashed"})


def _dead_before(history: history_module.TrialHistory, worker: str, seq: int) -> bool:
    for event in history.events:
        if event.seq >= seq:
            continue
        if isinstance(event, history_module.WorkerEvent) and event.event in GONE:
            if event.worker_id == worker:
                return True
        if isinstance(event, history_module.FaultApplied) and event.action == "kill":
            if event.worker_id == worker and event.ok:
                return True
    return False


def _interrupted_at(history: history_module.TrialHistory, worker: str, t: float) -> bool:
    """A fault (pause, database cut ...) held `worker` at `t`: its lease may have lapsed."""
    return any(
        item.fault.worker_id == worker and item.start <= t <= item.end
        for item in facts.interruptions(history)
    )


def _dead_letters_lapsed(
    history: history_module.TrialHistory,
    hit: history_module.BoundaryHit,
    holder: str | None,
    claims_seen: int,
) -> bool:
    """CONTRACT.md section 5, "Attempts and dead letters": at the attempt limit, a worker
    that finds the run's lease lapsed ends it dead_lettered without claiming it (a claim
    would count a fourth attempt of three). That finish takes the run over like a claim;
    it is no stale commit when the holder was gone, or held by a fault, at the time."""
    if holder is None or hit.worker_id == holder:
        return False
    if boundaries.base_name(facts.point(hit)) != FINISH_POINT or not facts.is_commit_point(hit):
        return False
    status = hit.detail.get("status", facts.final_status(history))
    if status != DEAD_LETTERED or claims_seen < history.scenario.max_attempts:
        return False
    return _dead_before(history, holder, hit.seq) or _interrupted_at(history, holder, hit.t)


def _from_hits(
    history: history_module.TrialHistory, failures: list[str], notes: list[str], held: list[str]
) -> int:
    """Judge the boundary hits; returns the number of handovers seen. `held` gets what each
    handover shows when nothing fails."""
    holder: str | None = None
    fenced: dict[str, history_module.BoundaryHit] = {}  # worker -> claim that fenced it
    handovers = 0
    unattributed = 0
    sent = facts.commit_sent(history)
    claims_seen = 0
    newest: tuple[int, history_module.BoundaryHit] | None = None  # highest epoch heard
    for hit in facts.run_hits(history):
        worker = hit.worker_id
        if worker is None:
            unattributed += 1
            continue
        if _dead_letters_lapsed(history, hit, holder, claims_seen):
            assert holder is not None
            handovers += 1
            fenced.pop(worker, None)
            where = f"{facts.describe_hit(hit)}"
            if not _dead_before(history, holder, hit.seq):
                fenced[holder] = hit  # the interrupted holder may commit nothing after it
            notes.append(
                f"{worker} ended the run dead_lettered at {where} after all {claims_seen} "
                f"attempts, without a claim, while {holder}'s lease lapsed"
            )
            held.append(f"{worker} dead-lettered the lapsed run at {where} after {holder}")
            holder = worker
            continue
        if facts.point(hit) == facts.CLAIM_POINT:
            claims_seen += 1
            epoch = facts.detail_int(hit, EPOCH)
            if newest is not None and epoch is not None and epoch < newest[0]:
                fenced[worker] = newest[1]  # superseded before it was heard
                notes.append(
                    f"{facts.describe_hit(hit)} names lease_epoch {epoch}, below "
                    f"{newest[0]} of {facts.describe_hit(newest[1])} heard before it: "
                    f"reported late, it took the lease from nobody"
                )
                continue
            if epoch is not None:
                newest = (epoch, hit)
            fenced.pop(worker, None)
            if holder is not None and holder != worker:
                handovers += 1
                where = f"{facts.hit_name(hit)} (hit seq {hit.seq})"
                if _dead_before(history, holder, hit.seq):
                    notes.append(
                        f"handover from {holder} (gone) to {worker} at {facts.describe_hit(hit)}"
                    )
                    held.append(f"{holder} was gone when {worker} claimed at {where}")
                else:
                    fenced[holder] = hit
                    notes.append(
                        f"{holder} lost its lease to {worker} at {facts.describe_hit(hit)} "
                        "while still alive"
                    )
                    held.append(
                        f"{holder} lost its lease to {worker} at {where} and committed "
                        "nothing after it"
                    )
            holder = worker
            continue
        if worker in fenced and facts.is_commit_point(hit):
            claim = fenced[worker]
            if sent.get(hit.seq, hit.seq) > claim.seq:
                failures.append(
                    f"{worker} committed {facts.describe_hit(hit)} after losing its lease at "
                    f"{facts.describe_hit(claim)}"
                )
            else:
                notes.append(
                    f"{worker}'s COMMIT of {facts.describe_hit(hit)} was in flight when "
                    f"{facts.describe_hit(claim)} happened (sent after hit seq "
                    f"{sent[hit.seq]}): it may have landed first, not judged from hits"
                )
    if unattributed:
        notes.append(f"{unattributed} hits name no worker and were not judged")
    return handovers


def _row_text(row: dict[str, Any]) -> str:
    return (
        f"event id {row.get('id')} kind {row.get('kind')} by {row.get('worker_id')} "
        f"(lease_epoch {row.get('lease_epoch')})"
    )


def _from_events(
    history: history_module.TrialHistory, failures: list[str], notes: list[str], held: list[str]
) -> None:
    rows = facts.table_rows(history, "events")
    rows.sort(key=lambda row: row.get("id") or 0)
    holder: str | None = None
    fenced: dict[str, dict[str, Any]] = {}
    for row in rows:
        worker = row.get("worker_id")
        if not isinstance(worker, str):
            continue
        if row.get("kind") in CLAIM_KINDS:
            fenced.pop(worker, None)
            if holder is not None and holder != worker:
                fenced[holder] = row
            holder = worker
        elif worker in fenced:
            failures.append(
                f"{_row_text(row)} written after {worker} lost its lease at "
                f"{_row_text(fenced[worker])}"
            )
    notes.append(f"{len(rows)} engine events checked")
    held.append(f"none of {len(rows)} engine events written by a worker after it lost its lease")


def check(history: history_module.TrialHistory) -> verdict.CheckResult:
    failures: list[str] = []
    notes: list[str] = []
    held: list[str] = []  # the facts a PASS rests on
    handovers = _from_hits(history, failures, notes, held)
    if facts.table_rows(history, "events"):
        _from_events(history, failures, notes, held)
    if any(item.fault.action == "pause" for item in facts.interruptions(history)):
        notes.append(
            "in-flight remote calls are not fenceable: world requests by a paused, stale "
            "worker are not judged"
        )
    if not handovers:
        nothing = "no lease handover happened"
        notes.insert(0, nothing)
        held.insert(0, f"{nothing}: no worker lost its lease")
        if not failures:
            if unproven := reach.nothing_to_judge(INVARIANT, nothing, history, notes):
                return unproven
    return verdict.decide(
        INVARIANT,
        failures=failures,
        notes=notes,
        passed="; ".join(held),
    )
