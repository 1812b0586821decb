"""How verdicts combine, as properties: `worst` over any verdicts, and `combine` over results."""

from __future__ import annotations

import hypothesis
from hypothesis import strategies as st

from harness.checkers import verdict

V = verdict.Verdict
verdicts = st.sampled_from(list(V))
lists = st.lists(verdicts, max_size=8)
nonempty = st.lists(verdicts, min_size=1, max_size=8)


def result(value: verdict.Verdict) -> verdict.CheckResult:
    return verdict.CheckResult(invariant="x", verdict=value, summary="s")


def test_severity_orders_every_verdict_once_worst_first() -> None:
    assert sorted(verdict.SEVERITY) == sorted(V)
    assert verdict.SEVERITY[0] is V.FAIL and verdict.SEVERITY[-1] is V.PASS


def test_nothing_judged_is_an_error() -> None:
    assert verdict.worst([]) is V.ERROR
    assert verdict.combine([]) is V.ERROR


@hypothesis.given(lists.flatmap(lambda xs: st.tuples(st.just(xs), st.permutations(xs))))
def test_commutative(case: tuple[list[verdict.Verdict], list[verdict.Verdict]]) -> None:
    items, shuffled = case
    assert verdict.worst(items) is verdict.worst(shuffled)


@hypothesis.given(verdicts, verdicts)
def test_commutative_pairs(a: verdict.Verdict, b: verdict.Verdict) -> None:
    assert verdict.worst([a, b]) is verdict.worst([b, a])


@hypothesis.given(verdicts, verdicts, verdicts)
def test_associative(a: verdict.Verdict, b: verdict.Verdict, c: verdict.Verdict) -> None:
    left = verdict.worst([verdict.worst([a, b]), c])
    right = verdict.worst([a, verdict.worst([b, c])])
    assert left is right is verdict.worst([a, b, c])


@hypothesis.given(nonempty, nonempty)
def test_grouping_does_not_matter(xs: list[verdict.Verdict], ys: list[verdict.Verdict]) -> None:
    # Per scenario then overall equals overall at once (empty groups excluded: they are ERRORs).
    assert verdict.worst([verdict.worst(xs), verdict.worst(ys)]) is verdict.worst(xs + ys)


@hypothesis.given(verdicts, lists)
def test_idempotent(a: verdict.Verdict, items: list[verdict.Verdict]) -> None:
    assert verdict.worst([a, a]) is a
    assert verdict.worst(items + items) is verdict.worst(items)


@hypothesis.given(nonempty)
def test_the_worst_is_one_of_them(items: list[verdict.Verdict]) -> None:
    assert verdict.worst(items) in items
    assert all(
        verdict.SEVERITY.index(verdict.worst(items)) <= verdict.SEVERITY.index(item)
        for item in items
    )


@hypothesis.given(lists)
def test_fail_dominates(items: list[verdict.Verdict]) -> None:
    assert verdict.worst([*items, V.FAIL]) is V.FAIL
    assert verdict.worst([V.FAIL, *items]) is V.FAIL


@hypothesis.given(lists)
def test_error_never_combines_to_pass(items: list[verdict.Verdict]) -> None:
    combined = verdict.worst([*items, V.ERROR])
    assert combined is not V.PASS
    assert combined in (V.FAIL, V.ERROR)


@hypothesis.given(lists)
def test_pass_only_when_everything_passed(items: list[verdict.Verdict]) -> None:
    assert (verdict.worst(items) is V.PASS) == (bool(items) and set(items) == {V.PASS})


@hypothesis.given(lists)
def test_combine_is_worst_over_results(items: list[verdict.Verdict]) -> None:
    assert verdict.combine(result(v) for v in items) is verdict.worst(items)
