"""Hostile fault texts given to `crashcert run --fault` (and the matrix's fault classes):
each is refused before the lab starts, naming the fault, or taken when it means something."""

from __future__ import annotations

from harness.faults import spec
from tests.hostile import inputs

Case = inputs.Case


def _point(action: str) -> str:
    """A point where the class strikes, so that only the part under test is wrong."""
    fault = spec.CATALOG[action]
    if fault.per_run:
        return spec.RUN_POINT
    if fault.world_points:
        return fault.world_points[0] + "#1"
    if fault.before_commit:
        return "tools.pending:before_commit#1"
    return "tools.pending#1"


def _run(name: str, *faults: str, says: str | None = None, **fields: object) -> Case:
    args = ["run", "--scenario", "refund"]
    for fault in faults:
        args += ["--fault", fault]
    return Case(name, args, says=says, **fields)  # type: ignore[arg-type]


# A param each class does not read (the first of PARAMS it lacks).
_UNREAD = {
    action: next(name for name in sorted(spec.PARAMS) if name not in fault.params)
    for action, fault in spec.CATALOG.items()
}
_VALUES = {
    "after_chunks": "2",
    "grace_ms": "500",
    "heal_after_s": "1",
    "heal_at": "tool.settled#1",
    "latency_ms": "100",
    "mode": "reset",
    "offset_s": "5",
    "reset_peer": "true",
    "resume_after_s": "1",
    "same_worker_id": "true",
    "when": "at_once",
}

CASES: list[Case] = [
    *[
        _run(f"{action} with an unknown param", f"{action}@{_point(action)}?bogus=1", says="bogus")
        for action in spec.CATALOG
    ],
    *[
        _run(
            f"{action} with {param}, which it does not read",
            f"{action}@{_point(action)}?{param}={_VALUES[param]}",
            says=f"not {param}|{param}",
        )
        for action, param in _UNREAD.items()
    ],
    # the grammar
    _run("an empty fault", "", says="expected ACTION@POINT"),
    _run("a fault of spaces", "   ", says="expected ACTION@POINT"),
    _run("a bare @", "@", says="expected ACTION@POINT"),
    _run("an action without a point", "kill", says="expected ACTION@POINT"),
    _run("an action and @ only", "kill@", says="expected ACTION@POINT"),
    _run("an upper-case action", "KILL@tool.started#1", says="expected ACTION@POINT"),
    _run(
        "a Cyrillic letter in the action", "k\u0456ll@tool.started#1", says="expected ACTION@POINT"
    ),
    _run("two faults in one text", "kill@tool.started#1,kill@tool.returned#1"),
    _run("a newline in a fault", "kill@tool.started#1\nkill@tool.returned#1"),
    _run("a negative occurrence", "kill@tool.started#-1", says="expected ACTION@POINT"),
    _run("an occurrence that is a word", "kill@tool.started#abc"),
    _run("a fractional occurrence", "kill@tool.started#1.5"),
    _run("an empty occurrence", "kill@tool.started#"),
    _run("an occurrence of 10^24", "kill@tool.started#1000000000000000000000000"),
    _run("an occurrence of 5000 digits", "kill@tool.started#" + "9" * 5000),
    _run("a point with a trailing dot", "kill@tool.started.#1", says="unknown point"),
    _run("a point that is only a suffix", "kill@:before_commit#1", says="unknown point"),
    _run("before_commit twice", "commit_lost@tools.pending:before_commit:before_commit#1"),
    _run("a boundary with no before_commit twin", "commit_lost@tool.returned:before_commit#1"),
    _run("commit_dropped at model.returned", "commit_dropped@model.returned#1"),
    _run("an empty param list", "kill@tool.started#1?"),
    _run("a param without a value", "db_cut@tools.pending#1?heal_after_s="),
    _run("a param without a name", "db_cut@tools.pending#1?=1"),
    _run("a param given twice", "db_cut@tools.pending#1?heal_after_s=1&heal_after_s=2"),
    _run("a trailing &", "db_cut@tools.pending#1?heal_after_s=1&"),
    # values
    _run("heal_after_s=0", "db_cut@tools.pending#1?heal_after_s=0", says="heal_after_s"),
    _run("heal_after_s=nan", "db_cut@tools.pending#1?heal_after_s=nan", says="heal_after_s"),
    _run("heal_after_s=inf", "db_cut@tools.pending#1?heal_after_s=inf", says="heal_after_s"),
    _run("heal_after_s=1e-400", "db_cut@tools.pending#1?heal_after_s=1e-400"),
    _run("heal_after_s of 5000 digits", "db_cut@tools.pending#1?heal_after_s=" + "9" * 5000),
    _run("heal_at an unknown point", "db_cut@tools.pending#1?heal_at=nowhere#1", says="heal_at"),
    _run("heal_at occurrence 0", "db_cut@tools.pending#1?heal_at=tool.settled#0"),
    _run("heal_at and heal_after_s both", "db_cut@tools.pending#1?heal_at=x&heal_after_s=1"),
    _run("latency_ms=-1", "latency@tools.pending#1?latency_ms=-1", says="latency_ms"),
    _run("latency_ms=1e12", "latency@tools.pending#1?latency_ms=1e12", says="latency_ms"),
    _run("latency_ms=abc", "latency@tools.pending#1?latency_ms=abc", says="latency_ms"),
    _run("reset_peer=maybe", "tool_cut@tools.pending#1?reset_peer=maybe", says="reset_peer"),
    _run("reset_peer=1", "tool_cut@tools.pending#1?reset_peer=1", says="reset_peer"),
    _run("same_worker_id=yes", "kill@run.claimed#1?same_worker_id=yes", says="same_worker_id"),
    _run("after_chunks=-1", "stream_cut@world:model.answered#1?after_chunks=-1"),
    _run("after_chunks=10^9", "stream_cut@world:model.answered#1?after_chunks=1000000000"),
    _run("offset_s=nan", "clock_skew@tools.pending#1?offset_s=nan", says="offset_s"),
    _run("offset_s=10^12", "clock_skew@tools.pending#1?offset_s=1000000000000"),
    _run("mode=bogus", "response_lost@world:model.answered#1?mode=bogus", says="mode"),
    _run("when=never", "submit_twice@run?when=never", says="when"),
    _run("resume_after_s=-3", "pause@tools.pending#1?resume_after_s=-3"),
    # where a class strikes
    _run("submit_twice@run#5", "submit_twice@run#5", says="no occurrence #5"),
    _run("submit_twice@run#2", "submit_twice@run#2", says="no occurrence #2"),
    _run("submit_twice at a boundary", "submit_twice@tool.started#1", says="@run"),
    _run("kill@run", "kill@run", says="needs a boundary point"),
    _run("pause@run", "pause@run", says="needs a boundary point"),
    _run("response_lost at a boundary", "response_lost@tool.started#1"),
    _run("stream_cut at the tool effect", "stream_cut@world:tool.effect#1"),
    _run("an unknown world point", "kill@world:nowhere#1", says="unknown point"),
    _run("clock_skew@time:+1s", "clock_skew@time:+1s", says="only kill strikes"),
    _run("pause@time:+1s", "pause@time:+1s", says="only kill strikes"),
    _run("db_cut@time:+2s", "db_cut@time:+2s", says="only kill strikes"),
    _run("tool_cut@time:+0.5s", "tool_cut@time:+0.5s", says="only kill strikes"),
    _run("a time point of 1e3 written as 1e3", "kill@time:+1e3s"),
    _run("a time point of a lone dot", "kill@time:+.s"),
    _run("a negative time point", "kill@time:+-1s"),
    _run("a time point of 5000 digits", "kill@time:+" + "9" * 5000 + "s"),
    # the same fault twice
    _run("the same kill twice", "kill@tool.started#1", "kill@tool.started#1", says="given twice"),
    _run(
        "the same kill twice, once with a param",
        "kill@run.claimed#1",
        "kill@run.claimed#1?same_worker_id=true",
        says="given twice",
    ),
    _run(
        "the same db_cut twice",
        "db_cut@tools.pending#1?heal_after_s=1",
        "db_cut@tools.pending#1?heal_after_s=2",
        says="given twice",
    ),
    _run("submit_twice twice", "submit_twice@run", "submit_twice@run", says="given twice"),
    # fault classes of the matrix
    Case("an empty --faults", ["matrix", "--faults", ""], says="fault classes"),
    Case("--faults of commas", ["matrix", "--faults", ",,,"], says="fault classes"),
    Case("--faults with a space in a name", ["matrix", "--faults", "db cut"]),
    Case("--faults of a point", ["matrix", "--faults", "tool.started"]),
    Case("explore --faults bogus", ["explore", "--scenario", "refund", "--faults", "bogus"]),
    Case("certify --faults bogus", ["certify", "--faults", "bogus"]),
    Case("--points of commas", ["matrix", "--points", ",,"]),
    Case("--points with a time point", ["matrix", "--points", "time:+1s"]),
    Case("--points of 5000 names", ["matrix", "--points", ",".join(["x"] * 5000)]),
]
