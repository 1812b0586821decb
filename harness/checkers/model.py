"""Model-call invariants: `model.once_after_decision` and `model.count`.

Turns are numbered as the model ledger numbers them: the count of assistant messages in
the request (0-based). A boundary's `detail.turn` is trusted only when it agrees with the
ledger (a decision cannot be committed before the model answered that turn).
"""

from __future__ import annotations

import collections
import dataclasses
import math

from harness.checkers import facts, reach, verdict
from harness.contract import boundaries
from harness.record import history as history_module
from harness.world import ledger

ONCE_AFTER_DECISION = "model.once_after_decision"
COUNT = "model.count"
# Statuses that end a run before the model is needed again.
_STOPPED_EARLY = frozenset({"budget_exhausted", "cancelled"})


@dataclasses.dataclass(frozen=True)
class Decision:
    turn: int
    t: float  # when it became durable
    where: str
    how: str  # "detail.turn", "time order" or "lost ack"
    seq: int = 0  # the hit's seq (for a lost ack, its `:before_commit` hit's)
    name: str = ""  # where, in short: `tools.pending#2`


@dataclasses.dataclass(frozen=True)
class _Commit:
    t: float  # certainly durable by then (its acknowledgement came back)
    where: str
    turn: int | None  # detail.turn when the engine gave it
    lost_ack: bool = False
    sent_t: float | None = None  # when its COMMIT left, if earlier (a slow answer)
    seq: int = 0
    name: str = ""

    def overlaps(self, start: float, end: float) -> bool:
        """Whether it may have committed inside (start, end)."""
        return start < self.t and (self.t if self.sent_t is None else self.sent_t) < end

    def acknowledged_within(self, start: float, end: float) -> bool:
        return start < self.t < end


def _decision_commits(history: history_module.TrialHistory) -> list[_Commit]:
    """Decision hits, and decisions that committed though a fault dropped their ack."""
    sent = facts.commit_sent(history)
    times = {hit.seq: hit.t for hit in facts.run_hits(history)}
    commits = [
        _Commit(
            hit.t,
            facts.describe_hit(hit),
            facts.detail_int(hit, "turn"),
            sent_t=times.get(sent.get(hit.seq, hit.seq)),
            seq=hit.seq,
            name=facts.hit_name(hit),
        )
        for hit in facts.run_hits(history)
        if facts.point(hit) in facts.DECISION_POINTS
    ]
    for lost in facts.lost_acks(history):
        if boundaries.base_name(facts.point(lost.hit)) in facts.DECISION_POINTS:
            turn = facts.detail_int(lost.hit, "turn")
            name = f"{facts.hit_name(lost.hit)}, ack lost, committed"
            commits.append(
                _Commit(
                    lost.fault.t, lost.describe(), turn, lost_ack=True, seq=lost.hit.seq, name=name
                )
            )
    return sorted(commits, key=lambda commit: commit.t)


def _by_turn(requests: list[ledger.ModelRequest]) -> dict[int, list[ledger.ModelRequest]]:
    turns: dict[int, list[ledger.ModelRequest]] = collections.defaultdict(list)
    for request in requests:
        turns[request.turn].append(request)
    return dict(sorted(turns.items()))


def decisions(
    history: history_module.TrialHistory, notes: list[str] | None = None
) -> dict[int, Decision]:
    """turn -> the hit where its decision was committed (tools.pending or reply.ready).

    `detail.turn` is used when every labelled decision hit agrees with the ledger (it may
    have committed between the first answer of its turn and the first request of a later
    turn: a COMMIT whose answer crossed a slow link counts from when it left); otherwise
    the engine numbers turns differently and time order decides.
    """
    notes = notes if notes is not None else []
    answered = _by_turn(facts.model_requests(history, answered_only=True))
    every = facts.model_requests(history)
    hits = _decision_commits(history)

    def span(turn: int) -> tuple[float, float]:
        first = answered[turn][0].t if turn in answered else math.inf
        later = [request.t for request in every if request.turn > turn]
        return first, min(later, default=math.inf)

    labelled = [(hit, hit.turn) for hit in hits if hit.turn is not None]
    disagreeing = [(hit, turn) for hit, turn in labelled if not hit.overlaps(*span(turn))]
    trust = bool(labelled) and not disagreeing
    if disagreeing:
        hit, turn = disagreeing[0]
        notes.append(
            f"{hit.where} says turn {turn}, which the model ledger contradicts; "
            "decisions are placed by time order"
        )
    found: dict[int, Decision] = {}
    for turn in answered:
        first, horizon = span(turn)
        for hit in hits:
            if trust and hit.turn not in (None, turn):
                continue
            # without trusted turn labels only the acknowledgement's time places a decision
            inside = hit.overlaps if trust else hit.acknowledged_within
            if inside(first, horizon):
                how = "detail.turn" if trust and hit.turn is not None else "time order"
                how = "lost ack" if hit.lost_ack else how
                found[turn] = Decision(turn, hit.t, hit.where, how, hit.seq, hit.name)
                break
    return found


def check_once_after_decision(history: history_module.TrialHistory) -> verdict.CheckResult:
    notes: list[str] = []
    failures: list[str] = []
    answered = _by_turn(facts.model_requests(history, answered_only=True))
    if not answered:
        nothing = "no model request was answered"
        notes = [f"{nothing}: no decision to repeat"]
        unproven = reach.nothing_to_judge(ONCE_AFTER_DECISION, nothing, history, notes)
        ended = f"; the run ended {facts.final_status(history)} as expected"
        return unproven or verdict.decide(
            ONCE_AFTER_DECISION, failures=[], notes=notes, passed=nothing + ended
        )
    found = decisions(history, notes)
    every = _by_turn(facts.model_requests(history))
    for turn in answered:
        decision = found.get(turn)
        if decision is None:
            notes.append(f"turn {turn}: no decision hit (tools.pending/reply.ready) reported")
            continue
        late = [request for request in every.get(turn, []) if request.t > decision.t]
        for request in late:
            failures.append(
                f"turn {turn}: model request seq {request.seq} (t={request.t:.3f}, status "
                f"{request.status_code}) after its decision was committed at {decision.where}"
            )
        if not late:
            notes.append(
                f"turn {turn}: decision at {decision.where} "
                f"(by {decision.how}); no model request for the turn after it"
            )
    unknowns = []
    if not found:
        unknowns.append(
            "no decision boundary (tools.pending/reply.ready) was reported: cannot tell when "
            "decisions were committed"
        )
    return verdict.decide(
        ONCE_AFTER_DECISION,
        failures=failures,
        notes=notes,
        unknowns=unknowns,
        passed=_no_call_after(found, list(answered)),
    )


def _no_call_after(found: dict[int, Decision], answered: list[int]) -> str:
    """The fact a PASS rests on: where each answered turn's decision committed."""
    judged = [found[turn] for turn in answered if turn in found]
    if len(judged) == 1:
        one = judged[0]
        text = (
            f"decision for turn {one.turn} committed at hit seq {one.seq} ({one.name}), no "
            f"model call for turn {one.turn} after it"
        )
    else:
        text = "decisions committed, no model call for a turn after its own: " + ", ".join(
            f"turn {one.turn} at hit seq {one.seq} ({one.name})" for one in judged
        )
    undecided = [turn for turn in answered if turn not in found]
    if undecided:
        text += f"; turns {undecided} reported no decision, not judged"
    return text


def _none_answered(every: list[ledger.ModelRequest], passed: str) -> str:
    """A count PASS with no answered request: the run stopped early, or none was served."""
    if not every:
        return passed
    return f"no model request was answered ({len(every)} refused or failed), none over the count"


@dataclasses.dataclass(frozen=True)
class _Windows:
    """What every turn's model window is judged against, gathered once per history."""

    requests: list[ledger.ModelRequest]
    pending_at: list[float]  # when model.pending hits of this run were reported
    interruptions: list[facts.Interruption]
    recoveries: list[history_module.BoundaryHit]

    @classmethod
    def of(
        cls, history: history_module.TrialHistory, requests: list[ledger.ModelRequest]
    ) -> _Windows:
        """`requests`: the run's model requests (facts.model_requests), read once by the caller."""
        return cls(
            requests=requests,
            pending_at=[
                hit.t
                for hit in facts.run_hits(history)
                if boundaries.base_name(facts.point(hit)) == "model.pending"
            ],
            interruptions=facts.interruptions(history),
            recoveries=facts.recoveries(history),
        )

    def interrupted(self, start: float, end: float) -> list[str]:
        """Interruptions of a model window: faults active in it, and claims no fault
        explains."""
        faults = [item for item in self.interruptions if item.overlaps(start, end)]
        described = [item.describe() for item in faults]
        unpaired = sorted(faults, key=lambda item: item.start)
        for claim in self.recoveries:
            if not start < claim.t < end:
                continue
            causes = [item for item in unpaired if item.start <= claim.t]
            if causes:
                unpaired.remove(causes[-1])  # this claim is the recovery from that fault
            else:
                described.append(f"recovery {facts.describe_hit(claim)}")
        return described

    def start(self, first: ledger.ModelRequest) -> float:
        """When turn `first.turn`'s model window opened: its earliest model.pending hit after
        the previous turn's last request, or the first request itself when none was reported.

        A fault at model.pending (before the request leaves) may still cost one extra call:
        the interrupted worker can survive (pause) and send its request late.
        """
        earlier = [r.t for r in self.requests if r.turn < first.turn]
        after = max(earlier, default=-math.inf)
        opened = [t for t in self.pending_at if after < t <= first.t]
        return min([*opened, first.t])


def check_count(history: history_module.TrialHistory) -> verdict.CheckResult:
    notes: list[str] = facts.foreign_notes(history, "model")
    failures: list[str] = []
    scripted = len(history.scenario.turns)
    every = facts.model_requests(history)
    status = facts.final_status(history)
    for request in every:
        if request.turn >= scripted:
            error = f": {request.error}" if request.error else ""
            failures.append(
                f"model request seq {request.seq} asks for turn {request.turn}, beyond the "
                f"script's {scripted} turns (status {request.status_code}{error})"
            )
    answered = _by_turn(facts.model_requests(history, answered_only=True))
    report = history.final_report
    unknowns: list[str] = []
    passed = "model calls per turn within 1 + the interruptions of its window: "
    if not every:
        if status in _STOPPED_EARLY:
            notes.append(f"no model request; the run ended {status}")
            passed = f"no model request; the run ended {status} before it needed one"
        elif report is None or not report.terminal:
            # The run never got going: run.liveness says so; nothing was miscounted.
            unknowns.append(f"no model request, because {reach.cut_short(history)}")
        else:
            failures.append(
                f"no model request at all for a scenario of {scripted} turns "
                f"(final status {status})"
            )
    found = decisions(history)
    windows = _Windows.of(history, every)
    counted: list[str] = []
    for turn, requests in answered.items():
        start = windows.start(requests[0])
        decision = found.get(turn)
        later = [request.t for request in every if request.turn > turn]
        end = decision.t if decision else min(later, default=math.inf)
        interrupted = windows.interrupted(start, end)
        allowed = 1 + len(interrupted)
        seqs = ", ".join(str(request.seq) for request in requests)
        line = (
            f"turn {turn}: {len(requests)} model calls answered (seq {seqs}), allowed {allowed}"
            f" = 1 + {len(interrupted)} interruption(s) of its model window"
            + (f": {'; '.join(interrupted)}" if interrupted else "")
        )
        (failures if len(requests) > allowed else notes).append(line)
        plural = "s" if len(interrupted) > 1 else ""
        more = f" ({len(interrupted)} interruption{plural})" if interrupted else ""
        counted.append(f"turn {turn} {len(requests)} of {allowed}{more}")
    if status == "succeeded":
        for turn in range(scripted):
            if turn not in answered:
                failures.append(
                    f"turn {turn}: the run succeeded but the model never answered this turn"
                )
    return verdict.decide(
        COUNT,
        failures=failures,
        notes=notes,
        unknowns=unknowns,
        passed=passed + ", ".join(counted) if counted else _none_answered(every, passed),
    )
