"""Faults as a type: the one grammar and the one catalog of fault classes.

A fault is written `ACTION@POINT[#OCCURRENCE][?NAME=VALUE&...]`: `kill@tools.pending#1`,
`db_cut@tools.pending#1?heal_at=tool.settled#1`, `kill@world:tool.effect#2`,
`kill@time:+0.35s`. Each fault class is defined once, in CATALOG: what it does, where it
may strike, what ends it and the params it reads. The plan, the explorer, the nemesis, the
scenario format, the checkers and the CLI read it from here. Pure; it imports no trial
history (the history imports this module, and the scenario format validates with it).
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import TYPE_CHECKING, Any, Literal

import pydantic

from harness import errors
from harness.contract import boundaries
from harness.inputs import limits, validation

# --- params ------------------------------------------------------------------------------

ParamKind = Literal["flag", "seconds", "milliseconds", "point", "choice", "count", "signed_seconds"]


@dataclasses.dataclass(frozen=True)
class Param:
    """A `?name=value` the nemesis understands (harness/nemesis/nemesis.py)."""

    name: str
    kind: ParamKind
    meaning: str
    choices: tuple[str, ...] = ()  # a "choice": the values it may take, the first the default


PARAMS: dict[str, Param] = {
    param.name: param
    for param in (
        Param("same_worker_id", "flag", "restart the killed worker under the same id"),
        Param("grace_ms", "milliseconds", "term: how long SIGTERM is given before SIGKILL"),
        Param("heal_after_s", "seconds", "heal the fault after this long"),
        Param("heal_at", "point", "heal when any worker reports this point, e.g. tool.settled#1"),
        Param("resume_after_s", "seconds", "SIGCONT at the latest after this long"),
        Param("latency_ms", "milliseconds", "the delay added to the link"),
        Param("reset_peer", "flag", "reset the link's connections (TCP RST) instead of cutting it"),
        Param(
            "offset_s", "signed_seconds", "the shift of the worker's wall clock, may be negative"
        ),
        Param(
            "mode",
            "choice",
            "how a response is lost: reset (RST) or hang (held past the client's timeout)",
            choices=("reset", "hang"),
        ),
        Param("after_chunks", "count", "the server-sent events delivered before the cut"),
        Param(
            "when",
            "choice",
            "submit_twice: resubmit at_once (right after the first submit) or after_finish "
            "(once the run is terminal)",
            choices=("at_once", "after_finish"),
        ),
    )
}
# Times are bounded like a scenario's deadline: a heal or a time point beyond it only
# stalls the trial.
MAX_FAULT_S = limits.MAX_DEADLINE_S
MAX_FAULT_LATENCY_MS = limits.MAX_LATENCY_MS
# A skew beyond a day shows nothing a day does not.
MAX_CLOCK_SKEW_S = 86_400
MAX_CHUNKS = 10_000

# --- the catalog -------------------------------------------------------------------------

# After the terminal commit no lease is held: pausing or cutting there proves nothing new.
HOLDS_LEASE_UNTIL = "run.finished"
# The point of a fault that strikes the run as a whole, not a boundary (`submit_twice@run`):
# the harness does it itself (harness/trial/runner.py), no worker reports it.
RUN_POINT = "run"


@dataclasses.dataclass(frozen=True)
class FaultClass:
    name: str
    meaning: str
    # The nemesis mends it later: after `heal_after_s`, or when a worker reports `heal_at`.
    healed: bool = False
    # The record that marks its end (the nemesis writes it); None: over once applied.
    ended_by: str | None = None
    # It strikes a COMMIT in flight, so it needs a `:before_commit` point.
    before_commit: bool = False
    # It still means something at run.finished, after which no lease is held.
    after_release: bool = False
    # While it is not healed, the worker cannot reach Postgres at all.
    cuts_database: bool = False
    # The PARAMS it reads (others are accepted and ignored, as they always were).
    params: tuple[str, ...] = ()
    # Expanded by `--faults` (crashcert matrix, certify, explore).
    matrix: bool = True
    # The world service whose link (worker -> service, through a Toxiproxy proxy) it
    # breaks: "model", "tools" or "sink".
    link: str | None = None
    # It shifts the worker's wall clock (libfaketime preloaded into the worker).
    skews_clock: bool = False
    # It strikes the run as a whole at RUN_POINT: the matrix plans it once per value of its
    # choice param (per scenario), not once per boundary of the baseline.
    per_run: bool = False
    # It acts on the world's response, so only these world points take it; the world
    # applies it in the request's thread (harness/nemesis/world_trigger.py), not the nemesis.
    world_points: tuple[str, ...] = ()


_HEAL_PARAMS = ("heal_after_s", "heal_at")
CATALOG: dict[str, FaultClass] = {
    fault.name: fault
    for fault in (
        FaultClass(
            "kill",
            "SIGKILL the worker's process group while it is held at the point",
            after_release=True,
            params=("same_worker_id",),
        ),
        FaultClass(
            "pause",
            "SIGSTOP the worker past its lease, SIGCONT later",
            ended_by="resume",
            params=("resume_after_s",),
        ),
        FaultClass(
            "db_cut",
            "disable the worker's Toxiproxy proxy, heal later",
            healed=True,
            ended_by="heal",
            cuts_database=True,
            params=_HEAL_PARAMS,
        ),
        FaultClass(
            "commit_lost",
            "at a before_commit point: drop the server->engine direction",
            healed=True,
            ended_by="heal",
            before_commit=True,
            after_release=True,
            params=_HEAL_PARAMS,
        ),
        FaultClass(
            "commit_dropped",
            "at a before_commit point: drop the engine->server direction",
            healed=True,
            ended_by="heal",
            before_commit=True,
            after_release=True,
            params=_HEAL_PARAMS,
        ),
        FaultClass(
            "latency",
            "latency larger than the lease on the worker's connection",
            healed=True,
            ended_by="heal",
            params=("latency_ms", *_HEAL_PARAMS),
        ),
        FaultClass(
            "pg_restart",
            "pg_ctl stop -m immediate, then start again",
            healed=True,
            ended_by="pg_start",
            cuts_database=True,
            params=_HEAL_PARAMS,
        ),
        FaultClass(
            "submit_twice",
            "the client submits the same RunInput again (a retry after a lost "
            "acknowledgement), at once or after the run finished",
            after_release=True,
            params=("when",),
            per_run=True,
        ),
        FaultClass(
            "response_lost",
            "the world applies the effect (or answers), then the response never arrives: "
            "reset, or held past the client's timeout",
            after_release=True,
            params=("mode",),
            world_points=boundaries.WORLD_POINTS,
        ),
        FaultClass(
            "stream_cut",
            "the scripted model's server-sent events end after `after_chunks` chunks, "
            "before the finish reason and usage",
            after_release=True,
            params=("after_chunks",),
            world_points=(boundaries.WORLD_POINTS[0],),
        ),
        *(
            FaultClass(
                f"{name}_cut",
                f"cut the worker's link to the {service} (its own Toxiproxy proxy), slow it "
                "(latency_ms) or reset its connections (reset_peer=true); heal later",
                healed=True,
                ended_by="heal",
                link=service,
                params=("latency_ms", "reset_peer", *_HEAL_PARAMS),
            )
            for name, service in (("tool", "tools"), ("model", "model"), ("sink", "sink"))
        ),
        FaultClass(
            "clock_skew",
            "from the point on, the worker's wall clock is off by offset_s (libfaketime)",
            params=("offset_s",),
            skews_clock=True,
        ),
        FaultClass(
            "term",
            "SIGTERM the worker's process group at the point, as a deploy stops it; SIGKILL "
            "once grace_ms is over if it still lives",
            ended_by="grace_over",
            after_release=True,
            params=("grace_ms",),
        ),
        FaultClass(
            "dup_owner",
            "start a second live worker under the id of the worker held at the point, as a "
            "duplicate pod or a supervisor's mistaken restart does; both live on",
        ),
    )
}
NAMES: tuple[str, ...] = tuple(CATALOG)
MATRIX: tuple[str, ...] = tuple(name for name, fault in CATALOG.items() if fault.matrix)
HEALED = frozenset(name for name, fault in CATALOG.items() if fault.healed)
COMMIT = frozenset(name for name, fault in CATALOG.items() if fault.before_commit)
# Class -> the world service whose link it breaks (tool_cut -> tools).
LINKS = {name: fault.link for name, fault in CATALOG.items() if fault.link}
SKEWS_CLOCK = frozenset(name for name, fault in CATALOG.items() if fault.skews_clock)
# Applied by the world to its own response, not by the nemesis to a worker.
IN_WORLD = frozenset(name for name, fault in CATALOG.items() if fault.world_points)
# The records that end a fault ("heal", "resume", "pg_start"); a kill ends as it happens.
ENDINGS = frozenset(fault.ended_by for fault in CATALOG.values() if fault.ended_by)

if TYPE_CHECKING:
    FaultAction = str
else:  # the catalog's names, so a bad action is refused naming them all
    FaultAction = Literal[NAMES]


def applies_at(fault: str, point: str) -> bool:
    """Where a fault of this class may strike: a commit fault only while a COMMIT is in
    flight (a `:before_commit` point); a lease fault not at run.finished or its twin (no
    lease is held there); a kill anywhere; a fault of the world's response only at its
    world points; a per-run fault at RUN_POINT alone."""
    found = CATALOG[fault]
    if found.per_run or point == RUN_POINT:
        return found.per_run and point == RUN_POINT
    if found.world_points:
        return point in found.world_points
    if found.before_commit:
        return point.endswith(boundaries.BEFORE_COMMIT_SUFFIX)
    return found.after_release or boundaries.base_name(point) != HOLDS_LEASE_UNTIL


def recovery_follows(point: str) -> bool:
    """Whether a fault may strike twice: after one at `point`, the recovering worker can be
    killed again right after it claims the run. Not after run.finished: nothing recovers."""
    return point != HOLDS_LEASE_UNTIL


# --- a step ------------------------------------------------------------------------------


class FaultStep(pydantic.BaseModel):
    """Apply `action` when the engine reports `point` for the `occurrence`-th time."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    action: FaultAction = "kill"
    point: str
    occurrence: int = pydantic.Field(default=1, ge=1)
    params: dict[str, Any] = pydantic.Field(default_factory=dict)

    def label(self) -> str:
        """`kill@run.claimed#1`, with `?name=value&...` when the step has params."""
        text = f"{self.action}@{self.point}#{self.occurrence}"
        if self.params:
            text += "?" + "&".join(
                f"{name}={_param_text(value)}" for name, value in sorted(self.params.items())
            )
        return text


def _param_text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


class PointRef(pydantic.BaseModel):
    """A hit by name: its point and which occurrence of it in the trial."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    point: str
    occurrence: int = pydantic.Field(ge=1)

    def label(self) -> str:
        return f"{self.point}#{self.occurrence}"


# --- the grammar -------------------------------------------------------------------------

FAULT_SYNTAX = re.compile(
    r"^(?P<action>[a-z_]+)@(?P<point>[a-z._:]+|time:\+[0-9.]+s)(#(?P<occurrence>\d+))?"
    r"(\?(?P<params>[a-z_]+=[A-Za-z0-9_.:#-]+(&[a-z_]+=[A-Za-z0-9_.:#-]+)*))?$"
)


def parse(text: str) -> FaultStep:
    """`kill@tools.pending#1` -> FaultStep(kill, tools.pending, 1), or CrashcertError.

    Params follow a `?`: `kill@run.claimed#1?same_worker_id=true`, `db_cut@...?heal_after_s=2`,
    `db_cut@...?heal_at=tool.settled#1` (heal when any worker reports that point).
    """
    match = _match(text)
    point = match["point"]
    if point == RUN_POINT:
        step = _step(text, match)
        _check_params(text, step)
        _check_run_point(text, step)
        return step
    if not (boundaries.is_known(point) or boundaries.is_blackbox_point(point)):
        raise errors.CrashcertError(
            f"bad fault {text!r}: unknown point {point!r}; "
            f"known: {', '.join(boundaries.all_points())}; black box: "
            f"{', '.join(boundaries.WORLD_POINTS)}, time:+SECONDSs"
        )
    seconds = boundaries.time_point_seconds(point)
    if seconds is not None and seconds > MAX_FAULT_S:
        raise errors.CrashcertError(
            f"bad fault {text!r}: {point} is beyond {MAX_FAULT_S:g} seconds, "
            "longer than any scenario's deadline"
        )
    step = _step(text, match)
    _check_run_point(text, step)
    _check_commit_point(text, step)
    _check_link_mode(text, step)
    _check_world_point(text, step)
    _check_heal_at(text, step)
    _check_params(text, step)
    return step


def read_label(label: str) -> FaultStep | None:
    """A label as a history recorded it (FaultStep.label()), read by the grammar alone:
    what was done, even where a rule added since would refuse to plan it. None when the
    text is no fault label."""
    try:
        return _step(label, _match(label))
    except errors.CrashcertError:
        return None


def parse_classes(text: str) -> list[str]:
    """`kill,pause` -> ["kill", "pause"], every one a known fault class, at least one."""
    chosen = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [fault for fault in chosen if fault not in MATRIX]
    if unknown or not chosen:
        raise errors.CrashcertError(
            f"unknown fault classes {unknown or chosen}; known: {', '.join(MATRIX)}"
        )
    return chosen


def _match(text: str) -> re.Match[str]:
    match = FAULT_SYNTAX.match(text.strip())
    if not match:
        raise errors.CrashcertError(
            f"bad fault {text!r}: expected ACTION@POINT[#OCCURRENCE][?NAME=VALUE&...], "
            "e.g. kill@tools.pending#1"
        )
    return match


def _step(text: str, match: re.Match[str]) -> FaultStep:
    try:
        return FaultStep(
            action=match["action"],
            point=match["point"],
            occurrence=int(match["occurrence"] or 1),
            params=_params(match["params"]),
        )
    except pydantic.ValidationError as error:  # one line, naming the part: action, occurrence
        raise errors.CrashcertError(f"bad fault {text!r}: {validation.describe(error)}") from None
    except ValueError as error:
        raise errors.CrashcertError(f"bad fault {text!r}: {error}") from None


def per_run_choices(fault: str) -> list[dict[str, Any]]:
    """The params of each trial the matrix plans for a per-run fault: one per value of its
    choice param (`submit_twice`: when=at_once, when=after_finish)."""
    for name in CATALOG[fault].params:
        if PARAMS[name].kind == "choice":
            return [{name: value} for value in PARAMS[name].choices]
    return [{}]


def _check_run_point(text: str, step: FaultStep) -> None:
    """`submit_twice@run`: a per-run fault strikes the run, nothing else does."""
    per_run = CATALOG[step.action].per_run
    if per_run and step.point != RUN_POINT:
        raise errors.CrashcertError(
            f"bad fault {text!r}: {step.action} strikes the run as a whole: "
            f"write {step.action}@{RUN_POINT}"
        )
    if not per_run and step.point == RUN_POINT:
        whole = [name for name, fault in CATALOG.items() if fault.per_run]
        raise errors.CrashcertError(
            f"bad fault {text!r}: only {', '.join(whole)} strike(s) @{RUN_POINT}; "
            f"{step.action} needs a boundary point"
        )


def _check_commit_point(text: str, step: FaultStep) -> None:
    """A lost or dropped COMMIT needs a COMMIT in flight: a `:before_commit` point. Anywhere
    else nothing is held, the fault strikes no transaction and the checkers see nothing."""
    if not CATALOG[step.action].before_commit or applies_at(step.action, step.point):
        return
    if step.point in boundaries.BEFORE_COMMIT:
        hint = f": use {step.point}{boundaries.BEFORE_COMMIT_SUFFIX}"
    else:
        twins = [p for p in boundaries.all_points() if p.endswith(boundaries.BEFORE_COMMIT_SUFFIX)]
        hint = f", and {step.point} has none; points with one: {', '.join(twins)}"
    raise errors.CrashcertError(
        f"bad fault {text!r}: {step.action} strikes a COMMIT in flight, so it needs a "
        f"{boundaries.BEFORE_COMMIT_SUFFIX} point{hint}"
    )


def _check_params(text: str, step: FaultStep) -> None:
    """A param the class does not read would be ignored: the user meant something else."""
    takes = CATALOG[step.action].params
    unused = sorted(set(step.params) - set(takes))
    if unused:
        reads = f"reads only {', '.join(takes)}" if takes else "takes no param"
        raise errors.CrashcertError(
            f"bad fault {text!r}: {step.action} {reads}, not {', '.join(unused)}"
        )


def _check_world_point(text: str, step: FaultStep) -> None:
    """A lost response or a cut stream is the world's doing: it needs a world point."""
    where = CATALOG[step.action].world_points
    if where and step.point not in where:
        raise errors.CrashcertError(
            f"bad fault {text!r}: {step.action} acts on a response of the world, so it "
            f"strikes only at {', '.join(where)}"
        )


def _check_link_mode(text: str, step: FaultStep) -> None:
    """A link is cut, slowed or reset: one at a time."""
    if step.action in LINKS and step.params.get("reset_peer") and "latency_ms" in step.params:
        raise errors.CrashcertError(
            f"bad fault {text!r}: reset_peer=true and latency_ms exclude each other "
            "(a link is cut, slowed or reset)"
        )


def _check_heal_at(text: str, step: FaultStep) -> None:
    """`db_cut@tools.pending#1?heal_at=tool.settled#1`: heal when any worker reports that."""
    heal_at = step.params.get("heal_at")
    if heal_at is None:
        return
    if not CATALOG[step.action].healed:
        raise errors.CrashcertError(
            f"bad fault {text!r}: heal_at only applies to {', '.join(sorted(HEALED))}"
        )
    if boundaries.parse_ref(str(heal_at)) is None:
        raise errors.CrashcertError(
            f"bad fault {text!r}: heal_at={heal_at} is not a known point "
            "(e.g. heal_at=tool.settled#1)"
        )


def _params(text: str | None) -> dict[str, Any]:
    """`same_worker_id=true&heal_after_s=2.5` -> {"same_worker_id": True, "heal_after_s": 2.5}.

    Every name known, given once, its value of its kind and within bounds; ValueError says
    which is not.
    """
    params: dict[str, Any] = {}
    for item in text.split("&") if text else []:
        name, _, raw = item.partition("=")
        if name not in PARAMS:
            raise ValueError(f"unknown param {name!r}; known: {', '.join(sorted(PARAMS))}")
        if name in params:
            raise ValueError(f"param {name!r} given twice")
        params[name] = _param_value(PARAMS[name], raw)
    return params


def _param_value(param: Param, raw: str) -> Any:
    name = param.name
    if param.kind == "flag":
        if raw not in ("true", "false"):
            raise ValueError(f"{name}={raw}: expected true or false")
        return raw == "true"
    if param.kind == "seconds":
        try:
            # An integer stays one, so the step's label reads as it was written.
            seconds: float = int(raw) if raw.isdigit() else float(raw)
        except ValueError:
            raise ValueError(f"{name}={raw}: expected a number of seconds") from None
        if not (math.isfinite(seconds) and 0 < seconds <= MAX_FAULT_S):
            raise ValueError(f"{name}={raw}: expected seconds above 0, at most {MAX_FAULT_S:g}")
        return seconds
    if param.kind == "milliseconds":
        if not raw.isdigit() or not 0 < int(raw) <= MAX_FAULT_LATENCY_MS:
            raise ValueError(
                f"{name}={raw}: expected whole milliseconds from 1 to {MAX_FAULT_LATENCY_MS}"
            )
        return int(raw)
    if param.kind == "choice":
        if raw not in param.choices:
            raise ValueError(f"{name}={raw}: expected one of {', '.join(param.choices)}")
        return raw
    if param.kind == "count":
        if not raw.isdigit() or int(raw) > MAX_CHUNKS:
            raise ValueError(f"{name}={raw}: expected a whole number from 0 to {MAX_CHUNKS}")
        return int(raw)
    if param.kind == "signed_seconds":
        try:
            offset: float = int(raw) if raw.lstrip("-").isdigit() else float(raw)
        except ValueError:
            raise ValueError(f"{name}={raw}: expected a signed number of seconds") from None
        if not (math.isfinite(offset) and offset != 0 and abs(offset) <= MAX_CLOCK_SKEW_S):
            raise ValueError(
                f"{name}={raw}: expected seconds other than 0, "
                f"at most {MAX_CLOCK_SKEW_S} either way"
            )
        return offset
    return raw  # a point: _check_heal_at knows it
