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
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import pydantic

from harness import errors
from harness.contract import boundaries
from harness.faults import params as params_module
from harness.inputs import validation

# --- params: harness/faults/params.py ------------------------------------------------

Param = params_module.Param
PARAMS = params_module.PARAMS
MAX_FAULT_S = params_module.MAX_FAULT_S
MAX_FAULT_LATENCY_MS = params_module.MAX_FAULT_LATENCY_MS
MAX_CLOCK_SKEW_S = params_module.MAX_CLOCK_SKEW_S
MAX_CHUNKS = params_module.MAX_CHUNKS
_params = params_module.parse

# --- the catalog -------------------------------------------------------------------------

# After the terminal commit no lease is held: pausing or cutting there proves nothing new.
HOLDS_LEASE_UNTIL = "run.finished"
# The point of a fault that strikes the run as a whole, not a boundary (`submit_twice@run`):
# the harness does it itself (harness/trial/runner.py), no worker reports it.
RUN_POINT = "run"
# No trial reaches a point this often (a scenario has at most a few hundred turns): a larger
# occurrence is a typo, and a fault that can never strike.
MAX_OCCURRENCE = 100_000


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
    # It strikes the engine's own store (a server of its description, or a worker's named
    # link to it: harness/lab/store_links.py), not our Postgres.
    store: bool = False
    # It strikes the run as a whole at RUN_POINT: the matrix plans it once per value of its
    # choice param (per scenario), not once per boundary of the baseline.
    per_run: bool = False
    # It acts on the world's response, so only these world points take it; the world
    # applies it in the request's thread (harness/nemesis/world_trigger.py), not the nemesis.
    world_points: tuple[str, ...] = ()
    # It strikes a server every worker shares (our Postgres, the engine's store server),
    # whoever reported the point: no worker is needed, and the timeline draws it in the
    # server's lane.
    shared: bool = False
    # A soak's storm may strike it at any moment, on any live worker, no boundary held
    # (harness/campaigns/soak.py).
    storm: bool = False
    # The engine capability it needs (harness/engines/capabilities.py): an engine that does
    # not offer it is not planned the class (INCONCLUSIVE, never FAIL).
    needs: str | None = None
    # It stops the lab's Postgres: its trial runs alone (harness/lab/gate.py).
    stops_postgres: bool = False
    # The matrix plans it once per value of its choice param at each point (sync=1, sync=0).
    each_choice: bool = False


_HEAL_PARAMS = ("heal_after_s", "heal_at")
CATALOG: dict[str, FaultClass] = {
    fault.name: fault
    for fault in (
        FaultClass(
            "kill",
            "SIGKILL the worker's process group while it is held at the point",
            after_release=True,
            params=("same_worker_id",),
            storm=True,
        ),
        FaultClass(
            "pause",
            "SIGSTOP the worker past its lease, SIGCONT later",
            ended_by="resume",
            params=("resume_after_s",),
            storm=True,
        ),
        FaultClass(
            "db_cut",
            "disable the worker's Toxiproxy proxy, heal later",
            healed=True,
            ended_by="heal",
            cuts_database=True,
            params=_HEAL_PARAMS,
            storm=True,
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
            shared=True,
            stops_postgres=True,
        ),
        FaultClass(
            "pg_failover",
            "promote the streaming standby (pg_basebackup of the primary) and point every "
            "link at it; the primary is stopped hard. sync=1: synchronous replication; "
            "sync=0: asynchronous, WAL shipping paused before the point's commit",
            cuts_database=True,
            params=("sync",),
            shared=True,
            stops_postgres=True,
            each_choice=True,
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
        FaultClass(
            "upgrade",
            "SIGKILL the worker's process group at the point; from then on every worker runs "
            "the engine's next version (its description's `upgrade`, migration first) and the "
            "world declares every tool at a new version",
            ended_by="upgraded",
            after_release=True,
            needs="upgrade",
        ),
        FaultClass(
            "store_cut",
            "cut the worker's named link to the engine's own store (its own Toxiproxy "
            "proxy), slow it (latency_ms) or reset its connections (reset_peer=true); heal later",
            healed=True,
            ended_by="heal",
            params=("link", "latency_ms", "reset_peer", *_HEAL_PARAMS),
            store=True,
        ),
        FaultClass(
            "store_response_lost",
            "from the point on, the store's responses to the worker on its named link are "
            "swallowed (what the worker sends still lands: a completion ack lost); heal later",
            healed=True,
            ended_by="heal",
            after_release=True,
            params=("link", *_HEAL_PARAMS),
            store=True,
        ),
        FaultClass(
            "server_restart",
            "SIGKILL the engine's own store server (its data kept), then start it again",
            healed=True,
            ended_by="server_start",
            params=_HEAL_PARAMS,
            store=True,
            shared=True,
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
# Classes that strike the engine's own store: an engine with no `server:` cannot take them.
STORE = frozenset(name for name, fault in CATALOG.items() if fault.store)
# Applied by the world to its own response, not by the nemesis to a worker.
IN_WORLD = frozenset(name for name, fault in CATALOG.items() if fault.world_points)
# Classes that strike a shared server, and the records that end them ("pg_start").
SHARED = frozenset(name for name, fault in CATALOG.items() if fault.shared)
SHARED_ENDINGS = frozenset(ending for name in SHARED if (ending := CATALOG[name].ended_by))
STOPS_POSTGRES = frozenset(name for name, fault in CATALOG.items() if fault.stops_postgres)
# What a soak's storm strikes at random, in catalog order (the seed picks among them).
STORM: tuple[str, ...] = tuple(name for name, fault in CATALOG.items() if fault.storm)
# Class -> the engine capability it needs (upgrade -> upgrade).
NEEDS = {name: fault.needs for name, fault in CATALOG.items() if fault.needs}
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
    occurrence: int = pydantic.Field(default=1, ge=1, le=MAX_OCCURRENCE)
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
    occurrence: int = pydantic.Field(ge=1, le=MAX_OCCURRENCE)

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
    _check_time_point(text, step)
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
    """The params of each trial the matrix plans for a per-run fault (or, at each point, for
    an `each_choice` one): one per value of its choice param (`submit_twice`: when=at_once,
    when=after_finish; `pg_failover`: sync=1, sync=0)."""
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
    if per_run and step.occurrence != 1:
        raise errors.CrashcertError(
            f"bad fault {text!r}: a run is submitted once, so {step.action}@{RUN_POINT} has "
            f"no occurrence #{step.occurrence}; write {step.action}@{RUN_POINT}"
        )
    if not per_run and step.point == RUN_POINT:
        whole = [name for name, fault in CATALOG.items() if fault.per_run]
        raise errors.CrashcertError(
            f"bad fault {text!r}: only {', '.join(whole)} strike(s) @{RUN_POINT}; "
            f"{step.action} needs a boundary point"
        )


def _check_time_point(text: str, step: FaultStep) -> None:
    """`time:+Xs` names no worker: only a kill (of every live worker) strikes there; any
    other class would find nobody to act on and only make the trial INCONCLUSIVE."""
    if step.action != "kill" and boundaries.time_point_seconds(step.point) is not None:
        raise errors.CrashcertError(
            f"bad fault {text!r}: at a time point only kill strikes (every live worker); "
            f"{step.action} needs a boundary or world point, which names the worker"
        )


def check_plan(texts: Sequence[str], steps: Sequence[FaultStep]) -> None:
    """One plan's faults: the same fault twice would strike the same hit twice (a kill of a
    process already dead, counted as applied), so it is refused, naming it."""
    seen: set[str] = set()
    for text, step in zip(texts, steps, strict=True):
        key = f"{step.action}@{step.point}#{step.occurrence}"  # params or not
        if key in seen:
            raise errors.CrashcertError(
                f"bad fault {text!r}: {key} is given twice; a fault strikes a hit once "
                "(for a later hit, write its occurrence: #2)"
            )
        seen.add(key)
    stopping = [step.label() for step in steps if step.action in STOPS_POSTGRES]
    if "pg_failover" in {step.action for step in steps} and len(stopping) > 1:
        # One standby per trial, and after the promotion the lab's primary is no longer
        # the server: a second failover or a restart would strike the wrong one.
        raise errors.CrashcertError(
            f"bad plan {', '.join(stopping)}: a plan with pg_failover stops Postgres once "
            "(one standby per trial); leave out the other"
        )


def stopping_once(steps: list[FaultStep]) -> list[FaultStep]:
    """`steps` without what `check_plan` would refuse beside a failover: every step that
    stops Postgres after the first, in a plan with pg_failover (explore draws freely)."""
    if not any(step.action == "pg_failover" for step in steps):
        return steps
    stops = [step for step in steps if step.action in STOPS_POSTGRES]
    return [step for step in steps if step.action not in STOPS_POSTGRES or step is stops[0]]


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
    linked = step.action in LINKS or step.action == "store_cut"
    if linked and step.params.get("reset_peer") and "latency_ms" in step.params:
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
    ref = boundaries.parse_ref(str(heal_at))
    if ref is not None and not 1 <= ref[1] <= MAX_OCCURRENCE:
        raise errors.CrashcertError(
            f"bad fault {text!r}: heal_at={heal_at}: occurrences count from 1 to {MAX_OCCURRENCE}"
        )
    if ref is None:
        raise errors.CrashcertError(
            f"bad fault {text!r}: heal_at={heal_at} is not a known point "
            "(e.g. heal_at=tool.settled#1)"
        )
