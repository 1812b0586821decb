"""`--jobs auto`: how many trials run at once, decided by measured load rather than cores.

Pure: it is fed one sample per finished trial and answers with the number of trials to keep
in flight (harness/pool/autojobs.py measures and schedules). Trials mostly wait (on leases,
on the world), so cores say little; what says the machine is full is CPU pressure
(/proc/pressure/cpu, `some avg10`), the load average per core, the share of CPU time left
idle, and the trials themselves getting slower: a worker's start to its first boundary is
CPU work (fork, imports, a connection), so it grows when the machine is busy; it is compared
with the first trials of the same kind only (an engine whose workers fork from a warm server
starts in 20 ms, one that execs Python in 500 ms: a campaign of both is not 25x slower when
the second kind comes up). Where idle CPU is measured it decides, with the trials'
slowdown: pressure and load read high on 2 cores while half the CPU idles (trials wake
several processes at once; Postgres's fsync waits count in the load), so they decide only
where idle CPU is not measured. It starts at START,
grows by one while every signal says there is room and shrinks by one when one says busy,
never above `cap` nor below 1. After each change it waits for `limit` trials to finish and,
where idle CPU is measured, for an idle reading taken wholly after the change, so that it
judges the machine at the new level and one busy spell is not counted twice.

Load may still stall a worker past its lease at 7-8 trials on 2 cores: the run changes
hands with no fault planned, and `run.liveness` judges what a correct engine does then
(harness/checkers/handovers.py) instead of the pool giving up the speed for it.
"""

from __future__ import annotations

import dataclasses
import statistics

START = 2
CAP_PER_CORE = 4
# Percent of the last 10 s in which some runnable task waited for a CPU.
PRESSURE_BUSY = 60.0
PRESSURE_ROOM = 30.0
# One-minute load average per core.
LOAD_BUSY = 2.0
LOAD_ROOM = 1.25
# The share of CPU time idle over the last few seconds (/proc/stat); where it is known it
# decides room in place of pressure and load.
IDLE_ROOM = 0.30
IDLE_BUSY = 0.05
# Worker start to first boundary, as a multiple of the first trials' median.
SLOWER_BUSY = 2.0
SLOWER_ROOM = 1.4
# Latencies below this compare as this: a few milliseconds either way are the scheduler's
# jitter, not load. Workers forked from a warm server reach their first boundary in 5-15 ms
# on an idle machine; judged against a 6 ms reference, a 12 ms start read "2x slower" and
# held a certify at one trial on an idle machine. Under real load starts take 50 ms and more.
LATENCY_FLOOR_S = 0.02
# The first trials' latencies make the reference; the trials after a change are judged.
REFERENCE_TRIALS = 3


@dataclasses.dataclass(frozen=True)
class Sample:
    """The machine as seen when a trial finished; None where a signal is not available."""

    pressure: float | None = None  # CPU `some avg10`, percent
    load: float | None = None  # one-minute load average divided by cores
    latency: float | None = None  # the trial's worker start to first boundary, seconds
    kind: str = ""  # what started the workers (the engine): latencies compare within a kind
    idle: float | None = None  # share of CPU time idle lately (autojobs.IdleMeter), 0 to 1
    # which reading of the meter `idle` is (they are numbered from 1, one per window)
    idle_window: int | None = None


@dataclasses.dataclass(frozen=True)
class Decision:
    limit: int
    reason: str  # "start", "room", "busy: ...", "hold", "wait"


class Controller:
    def __init__(self, cores: int, *, start: int = START, cap: int | None = None) -> None:
        self.cap = max(1, cap if cap is not None else CAP_PER_CORE * max(1, cores))
        self.limit = min(max(1, start), self.cap)
        self.history: list[int] = [self.limit]  # every limit chosen, in order
        self._first: dict[str, list[float]] = {}  # per kind
        self._samples = 0
        self._window: list[float] = []  # latencies since the last change, per their reference
        self._since_change = 0
        self._idle_seen = 0  # the newest idle reading's number
        self._idle_settled = 0  # the first idle reading taken wholly after the last change

    def reference(self, kind: str = "") -> float | None:
        """The median latency of a kind's first trials (None until REFERENCE_TRIALS of that
        kind reported one)."""
        first = self._first.get(kind, [])
        if len(first) < REFERENCE_TRIALS:
            return None
        return statistics.median(first)

    def observe(self, sample: Sample) -> Decision:
        self._samples += 1
        self._since_change += 1
        if sample.latency is not None:
            first = self._first.setdefault(sample.kind, [])
            if len(first) < REFERENCE_TRIALS:
                first.append(sample.latency)
            reference = self.reference(sample.kind)
            if reference is not None:
                latency = max(sample.latency, LATENCY_FLOOR_S)
                self._window.append(latency / max(reference, LATENCY_FLOOR_S))
        if sample.idle_window is not None:
            self._idle_seen = max(self._idle_seen, sample.idle_window)
        if self._samples < REFERENCE_TRIALS or self._since_change < self.limit:
            return Decision(self.limit, "wait")  # judge trials that ran at this level
        if sample.idle is not None and (sample.idle_window or 0) < self._idle_settled:
            return Decision(self.limit, "wait")  # this reading began before the change
        busy = self._busy(sample)
        if busy is not None:
            return self._change(self.limit - 1, f"busy: {busy}")
        if self._room(sample):
            return self._change(self.limit + 1, "room")
        return Decision(self.limit, "hold")

    def _slowdown(self) -> float | None:
        if not self._window:
            return None
        return statistics.median(self._window)

    def _busy(self, sample: Sample) -> str | None:
        if sample.idle is not None:
            if sample.idle < IDLE_BUSY:
                return f"CPU {100 * (1 - sample.idle):.0f}% busy"
        elif sample.pressure is not None and sample.pressure >= PRESSURE_BUSY:
            return f"CPU pressure {sample.pressure:.0f}%"
        elif sample.load is not None and sample.load >= LOAD_BUSY:
            return f"load {sample.load:.1f} per core"
        slowdown = self._slowdown()
        if slowdown is not None and slowdown >= SLOWER_BUSY:
            return f"trials start {slowdown:.1f}x slower"
        return None

    def _room(self, sample: Sample) -> bool:
        if sample.idle is not None:
            if sample.idle < IDLE_ROOM:
                return False
        elif (sample.pressure is not None and sample.pressure >= PRESSURE_ROOM) or (
            sample.load is not None and sample.load >= LOAD_ROOM
        ):
            return False
        slowdown = self._slowdown()
        if slowdown is not None and slowdown >= SLOWER_ROOM:
            return False
        # without latencies (a black box reports no boundaries) the machine's signals decide
        return not self._first or any(self.reference(kind) is not None for kind in self._first)

    def _change(self, wanted: int, reason: str) -> Decision:
        limit = min(max(1, wanted), self.cap)
        if limit == self.limit:
            return Decision(limit, "hold")
        self.limit = limit
        self.history.append(limit)
        self._window = []
        self._since_change = 0
        # the reading after the newest one was already running when the limit changed
        self._idle_settled = self._idle_seen + 2
        return Decision(limit, reason)

    def describe(self) -> str:
        """For the summary: where it started, the most it ran, where it ended."""
        return f"auto ({self.history[0]} to {max(self.history)}, ended at {self.limit})"
