"""The `?name=value` params of fault steps: each name once, its kind, its bounds.

Read by harness/faults/spec.py, which checks that a class reads the params it is given.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Literal

from harness.inputs import limits

ParamKind = Literal[
    "flag", "seconds", "milliseconds", "point", "choice", "count", "signed_seconds", "name"
]


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
        Param(
            "sync",
            "choice",
            "pg_failover: 1 for synchronous replication (the acknowledged commits survive), "
            "0 for asynchronous (the last of them are lost)",
            choices=("1", "0"),
        ),
        Param(
            "link",
            "name",
            "the engine's store link a store fault strikes (a name under `links:` in its "
            "description); may be left out when it has one",
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


def parse(text: str | None) -> dict[str, Any]:
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
        params[name] = param_value(PARAMS[name], raw)
    return params


def param_value(param: Param, raw: str) -> Any:
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
    if param.kind == "name":
        if not re.match(r"^[a-z][a-z0-9_]{0,30}$", raw):
            raise ValueError(f"{name}={raw}: expected a link name (lower-case letters, digits, _)")
        return raw
    return raw  # a point: _check_heal_at knows it
