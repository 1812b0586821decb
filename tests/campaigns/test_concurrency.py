"""`--jobs auto`: the pure controller fed samples (its decisions), and the pool that follows
it (never more in flight than it says, results in order)."""

from __future__ import annotations

import threading

import pytest

from harness import errors
from harness.pool import autojobs, concurrency
from harness.trial import interrupt

Sample = concurrency.Sample
CALM = Sample(pressure=5.0, load=0.3, latency=0.08)


def _feed(controller: concurrency.Controller, sample: Sample, count: int) -> list[str]:
    return [controller.observe(sample).reason for _ in range(count)]


def test_it_starts_at_two_and_waits_for_the_first_trials() -> None:
    controller = concurrency.Controller(cores=2)
    assert controller.limit == 2 and controller.cap == 8
    assert _feed(controller, CALM, 2) == ["wait", "wait"]
    assert controller.reference() is None
    assert controller.observe(CALM).reason == "room"  # the third sets the reference
    assert controller.limit == 3 and controller.reference() == pytest.approx(0.08)


def test_it_grows_one_at_a_time_after_limit_trials_at_each_level_up_to_the_cap() -> None:
    controller = concurrency.Controller(cores=1)  # cap 4
    reasons = _feed(controller, CALM, 40)
    assert controller.limit == 4 and controller.history == [2, 3, 4]
    # three trials to learn, then three more at 3 before growing to 4
    assert reasons[:6] == ["wait", "wait", "room", "wait", "wait", "room"]
    assert reasons[-1] == "hold"  # at the cap


def test_cpu_pressure_shrinks_and_stops_growth() -> None:
    controller = concurrency.Controller(cores=2, start=4)
    assert _feed(controller, CALM, 4)[-2:] == ["wait", "room"]  # four trials at four
    assert controller.limit == 5
    _feed(controller, Sample(pressure=45.0, load=0.3, latency=0.08), 5)
    assert controller.limit == 5  # between room and busy: it holds
    reasons = _feed(controller, Sample(pressure=80.0, load=0.3, latency=0.08), 5)
    busy = "busy: CPU pressure 80%"
    # one step down at once, then four trials at four before the next step
    assert reasons == [busy, "wait", "wait", "wait", busy]
    assert controller.history == [4, 5, 4, 3]


def test_slower_trials_shrink_it_and_it_never_goes_below_one() -> None:
    controller = concurrency.Controller(cores=2, start=1)
    _feed(controller, Sample(latency=0.1), 3)  # no PSI, no load: latency alone decides
    assert controller.limit == 2
    slow = Sample(latency=0.35)
    reasons = _feed(controller, slow, 10)
    assert "busy: trials start 3.5x slower" in reasons
    assert controller.limit == 1 and min(controller.history) == 1


def test_latencies_compare_within_their_kind() -> None:
    """A quality module mixes engines whose workers fork from a warm server (20 ms to the
    first boundary) with engines that exec Python (500 ms): the exec'd kind coming up is not
    the machine slowing down. The old controller judged 0.5 s against the first trials'
    20 ms and held at one trial while half the CPU idled (a module ran 60 s, not 37 s)."""
    controller = concurrency.Controller(cores=2, start=1)
    windows = iter(range(1, 1000))  # a fresh idle reading with every trial

    def feed(latency: float, kind: str, count: int) -> list[str]:
        samples = (
            Sample(idle=0.5, idle_window=next(windows), latency=latency, kind=kind)
            for _ in range(count)
        )
        return [controller.observe(sample).reason for sample in samples]

    feed(0.02, "reference", 3)
    assert controller.limit == 2
    reasons = feed(0.5, "ignore_approval", 3) + feed(0.02, "reference", 2)
    reasons += feed(0.5, "ignore_approval", 8)
    assert not [reason for reason in reasons if reason.startswith("busy")], reasons
    assert controller.limit >= 4, controller.history
    # the same kind slower is still the machine slowing down
    assert "busy: trials start 3.0x slower" in feed(0.06, "reference", 12)


def test_milliseconds_of_jitter_in_fast_starts_are_not_a_slower_machine() -> None:
    """Workers forked from a warm server started 6 ms before their first boundary in a
    certify's first trials, 9-14 ms later on, the machine 60% idle: the old controller read
    "2x slower" and held the whole certify at one trial (shard 1/4: 612 trials in 449 s,
    against 1,212 in 269 s before the starts got faster)."""
    controller = concurrency.Controller(cores=2)
    windows = iter(range(1, 1000))

    def feed(latency: float, count: int) -> list[str]:
        samples = (
            Sample(idle=0.6, idle_window=next(windows), latency=latency) for _ in range(count)
        )
        return [controller.observe(sample).reason for sample in samples]

    reasons = feed(0.006, 3)
    while controller.limit < controller.cap and len(reasons) < 60:
        reasons += feed(0.014, 1)
    assert not [reason for reason in reasons if reason.startswith("busy")], reasons
    assert controller.history == [2, 3, 4, 5, 6, 7, 8], controller.history
    # starts that really slow down still say so, from the floor up
    assert "busy: trials start 3.0x slower" in feed(0.06, 12)


def test_load_average_per_core_is_a_busy_signal() -> None:
    controller = concurrency.Controller(cores=2, start=3)
    _feed(controller, CALM, 3)
    limit = controller.limit
    _feed(controller, Sample(pressure=None, load=2.5, latency=0.08), limit)
    assert controller.limit == limit - 1


def test_without_boundaries_the_machine_alone_decides() -> None:
    controller = concurrency.Controller(cores=2)
    _feed(controller, Sample(pressure=1.0, load=0.1, latency=None), 3)
    assert controller.limit == 3 and controller.reference() is None
    assert controller.describe() == "auto (2 to 3, ended at 3)"


def test_pressure_file_is_read_and_its_absence_is_none(tmp_path) -> None:
    path = tmp_path / "cpu"
    path.write_text(
        "some avg10=28.38 avg60=31.83 avg300=17.76 total=4468962894\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )
    assert autojobs.pressure(path) == pytest.approx(28.38)
    assert autojobs.pressure(tmp_path / "missing") is None


def test_jobs_parse_numbers_and_auto_and_refuse_the_rest() -> None:
    assert autojobs.parse("3") == 3
    assert isinstance(autojobs.parse("auto"), autojobs.Auto)
    for text in ("0", "-1", "many"):
        with pytest.raises(errors.CrashcertError):
            autojobs.parse(text)


def test_the_pool_follows_the_controller_and_keeps_the_order() -> None:
    busy = iter([80.0] * 6 + [5.0] * 100)  # busy first: it shrinks to 1, then grows
    auto = autojobs.Auto(
        concurrency.Controller(cores=1, start=2), machine=lambda: Sample(pressure=next(busy))
    )
    lock = threading.Lock()
    state = {"now": 0, "most": 0, "seen": []}

    def work(item: int) -> int:
        with lock:
            state["now"] += 1
            state["seen"].append((state["now"], auto.controller.limit))
        threading.Event().wait(0.01)
        with lock:
            state["now"] -= 1
        return item * 10

    results = interrupt.run_pool(work, list(range(30)), jobs=auto)
    assert results == [item * 10 for item in range(30)]
    assert all(now <= limit + 1 for now, limit in state["seen"])  # a shrink lets one finish
    assert 1 in auto.controller.history and auto.controller.limit > 1
    assert interrupt.describe(auto).startswith("auto (2 to ")
    assert interrupt.describe(3) == "3"


def test_idle_cpu_decides_where_it_is_measured() -> None:
    """On 2 cores a certify read pressure 30-62% and load 1.2-1.5 per core while 40-75% of
    the CPU idled: those alone held it at 2-5 trials, or shrank it. Idle CPU decides."""
    controller = concurrency.Controller(cores=2)
    spare = Sample(pressure=45.0, load=1.5, latency=0.08, idle=0.5, idle_window=1)
    _feed(controller, spare, 3)
    assert controller.limit == 3
    little = Sample(pressure=45.0, load=1.5, latency=0.08, idle=0.2, idle_window=3)
    _feed(controller, little, 6)
    assert controller.limit == 3  # little idle CPU: it holds
    full = Sample(pressure=45.0, load=1.5, latency=0.08, idle=0.02, idle_window=3)
    assert _feed(controller, full, 1) == ["busy: CPU 98% busy"] and controller.limit == 2
    # pressure and load past their busy marks do not shrink it while the CPU idles
    loud = Sample(pressure=80.0, load=2.5, latency=0.08, idle=0.5, idle_window=5)
    assert _feed(controller, loud, 3) == ["wait", "room", "wait"] and controller.limit == 3
    # where idle CPU is not measured, they still do
    blind = Sample(pressure=80.0, load=1.5, latency=0.08)
    assert _feed(controller, blind, 2) == ["wait", "busy: CPU pressure 80%"]
    assert controller.limit == 2


def test_one_idle_reading_is_judged_once() -> None:
    """Literal from a main job's trace (86de193): the meter reads every 2 s while trials end
    every 0.3 s, so one busy reading (3% idle) shrank it 4 -> 1 in 0.6 s, and the machine then
    idled at one trial. After a change it waits for a reading taken wholly at the new level."""
    controller = concurrency.Controller(cores=2, start=4)
    _feed(controller, Sample(latency=0.03, idle=0.4, idle_window=1), 4)
    assert controller.limit == 5
    stale = Sample(pressure=27.5, load=0.71, latency=0.03, idle=0.03, idle_window=2)
    reasons = _feed(controller, stale, 12)
    assert reasons[0] == "wait"  # reading 2 was running when it grew to 5
    controller = concurrency.Controller(cores=2, start=4)
    _feed(controller, Sample(latency=0.03, idle=0.03, idle_window=1), 4)
    assert controller.limit == 3
    reasons = _feed(controller, Sample(latency=0.03, idle=0.03, idle_window=2), 12)
    assert set(reasons) == {"wait"} and controller.limit == 3  # not 2, 1, 1 ...
    # the reading after that began after the change: it counts, once
    reasons = _feed(controller, Sample(latency=0.03, idle=0.03, idle_window=3), 12)
    assert reasons.count("busy: CPU 97% busy") == 1 and controller.limit == 2


def test_idle_share_is_read_over_a_window_of_proc_stat(tmp_path) -> None:
    stat = tmp_path / "stat"
    now = [0.0]
    meter = autojobs.IdleMeter(stat, clock=lambda: now[0])
    #        cpu user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text("cpu  100 0 100 700 100 0 0 0 50 0\ncpu0 1 2 3\n")
    assert meter() is None  # no window yet
    stat.write_text("cpu  200 0 200 800 100 0 0 0 90 0\n")
    now[0] = 1.0
    assert meter() is None  # shorter than the window: nothing new
    now[0] = autojobs.IDLE_WINDOW_S
    assert meter() == pytest.approx(100 / 300)  # 100 idle ticks of 300, guest not counted
    assert meter.readings == 1
    assert autojobs.IdleMeter(tmp_path / "missing")() is None
