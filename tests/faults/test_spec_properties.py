"""Properties of the fault grammar (harness/faults/spec.py), with Hypothesis.

Every valid step reads back from its label unchanged; every text is either a step or a
CrashcertError of one line, never another exception; texts broken in a known way are
refused.
"""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness import errors
from harness.contract import boundaries
from harness.faults import spec

ENGINE_POINTS = boundaries.all_points()
BEFORE_COMMIT_POINTS = [p for p in ENGINE_POINTS if p.endswith(boundaries.BEFORE_COMMIT_SUFFIX)]
time_points = st.builds(
    lambda hundredths: f"time:+{hundredths / 100:.2f}s",
    st.integers(min_value=0, max_value=int(spec.MAX_FAULT_S * 100)),
)
any_point = st.one_of(
    st.sampled_from(ENGINE_POINTS), st.sampled_from(boundaries.WORLD_POINTS), time_points
)
seconds = st.one_of(
    st.integers(min_value=1, max_value=int(spec.MAX_FAULT_S)),
    st.floats(min_value=0, max_value=spec.MAX_FAULT_S, exclude_min=True),
)
point_refs = st.builds(
    lambda point, occurrence: point if occurrence is None else f"{point}#{occurrence}",
    st.sampled_from(ENGINE_POINTS),
    st.none() | st.integers(min_value=1, max_value=10**6),
)
PARAM_VALUES = {
    "flag": st.booleans(),
    "seconds": seconds,
    "milliseconds": st.integers(min_value=1, max_value=spec.MAX_FAULT_LATENCY_MS),
    "point": point_refs,
    "count": st.integers(min_value=0, max_value=spec.MAX_CHUNKS),
    # a clock shift either way, never 0 (no shift is no fault)
    "signed_seconds": st.one_of(
        st.integers(min_value=-spec.MAX_CLOCK_SKEW_S, max_value=spec.MAX_CLOCK_SKEW_S),
        st.floats(min_value=-spec.MAX_CLOCK_SKEW_S, max_value=spec.MAX_CLOCK_SKEW_S),
    ).filter(lambda offset: offset != 0),
}


def param_values(param: spec.Param) -> st.SearchStrategy[object]:
    if param.kind == "choice":
        return st.sampled_from(param.choices)
    return PARAM_VALUES[param.kind]


PER_RUN = frozenset(name for name, fault in spec.CATALOG.items() if fault.per_run)


@st.composite
def steps(draw: st.DrawFn) -> spec.FaultStep:
    action = draw(st.sampled_from(spec.NAMES))
    fault = spec.CATALOG[action]
    if fault.per_run:
        point = spec.RUN_POINT
    elif fault.world_points:
        point = draw(st.sampled_from(fault.world_points))
    else:
        point = draw(st.sampled_from(BEFORE_COMMIT_POINTS) if fault.before_commit else any_point)
    # The params its class reads: any other is refused (issue 33).
    names = [name for name in fault.params if name != "heal_at" or fault.healed]
    chosen = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
    params = {name: draw(param_values(spec.PARAMS[name])) for name in chosen}
    if action in spec.LINKS and params.get("reset_peer"):
        params.pop("latency_ms", None)  # a link is cut, slowed or reset: one at a time
    occurrence = draw(st.integers(min_value=1, max_value=10**9))
    return spec.FaultStep(action=action, point=point, occurrence=occurrence, params=params)


@given(steps())
def test_a_step_reads_back_from_its_label(step: spec.FaultStep) -> None:
    assert spec.parse(step.label()) == step
    assert spec.read_label(step.label()) == step


def _refused(text: str) -> str:
    with pytest.raises(errors.CrashcertError) as raised:
        spec.parse(text)
    message = str(raised.value)
    assert message.startswith(f"bad fault {text!r}: ") and "\n" not in message, message
    return message


def _broken(step: spec.FaultStep, how: str) -> str:
    """The step's label, broken in one way."""
    label = step.label()
    more = "&" if step.params else "?"
    if how == "action":
        return "explode" + label.removeprefix(step.action)
    if how == "point":
        return label.replace(f"@{step.point}#", f"@nowhere.{step.point}#", 1)
    if how == "occurrence":
        return label.replace(f"#{step.occurrence}", "#0", 1)
    if how == "separator":
        return label.replace("@", "", 1)
    if how == "param name":
        return f"{label}{more}bogus=1"
    return f"{label}{more}latency_ms=0"  # out of bounds, or given twice


BREAKS = ("action", "point", "occurrence", "separator", "param name", "param value")


@given(steps(), st.sampled_from(BREAKS))
def test_a_broken_label_is_refused_in_one_line(step: spec.FaultStep, how: str) -> None:
    _refused(_broken(step, how))


@given(
    st.sampled_from(sorted(spec.COMMIT)),
    st.sampled_from([p for p in ENGINE_POINTS if p not in BEFORE_COMMIT_POINTS]),
)
def test_a_commit_fault_away_from_a_commit_is_refused(action: str, point: str) -> None:
    assert "strikes a COMMIT in flight" in _refused(f"{action}@{point}")
    assert not spec.applies_at(action, point)


@given(
    st.sampled_from(sorted(set(spec.NAMES) - spec.HEALED - spec.IN_WORLD - PER_RUN)),
    st.sampled_from(ENGINE_POINTS),
)
def test_heal_at_is_refused_for_what_is_never_healed(action: str, point: str) -> None:
    assert "heal_at only applies to" in _refused(f"{action}@{point}#1?heal_at=tool.settled#1")


FAULT_ALPHABET = string.ascii_letters + string.digits + "@#?&=:._+-s \n\t\x00é٣"


@given(st.one_of(st.text(), st.text(alphabet=FAULT_ALPHABET)))
def test_any_text_is_a_step_or_a_crashcert_error(text: str) -> None:
    try:
        step = spec.parse(text)
    except errors.CrashcertError as error:
        assert "\n" not in str(error)
        return
    assert spec.parse(step.label()) == step


@given(steps(), st.integers(min_value=0, max_value=40), st.text(alphabet=FAULT_ALPHABET))
def test_a_mangled_label_is_a_step_or_a_crashcert_error(
    step: spec.FaultStep, cut: int, noise: str
) -> None:
    label = step.label()
    text = label[:cut] + noise + label[cut:]
    try:
        spec.parse(text)
    except errors.CrashcertError:
        pass
    read = spec.read_label(text)  # a stored label is read without raising, whatever it is
    assert read is None or spec.read_label(read.label()) == read
