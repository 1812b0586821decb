"""pytest plugin (entry point `pytest11`): put the crash suite into any project's CI.

    import pytest

    @pytest.mark.crashcert(engine="path/to/engine.yaml", scenarios=["refund", "email_send"])
    def test_crash_matrix(crashcert_case):
        crashcert_case.check()          # fails with every failing trial's rerun command

The marker expands the test into one case per (scenario, boundary point); each case runs
the scenario's clean baseline once (cached), then kills a worker at every occurrence of its
point and checks every invariant. Fixtures: `crashcert_lab` (Postgres, Toxiproxy and the
engine's template, one per session and engine), `crashcert_out` (trial directories).
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

MARKER = "crashcert"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(engine='reference', scenarios=None): expand the test into the crash matrix "
        "of an engine (one case per scenario and boundary point)",
    )


@dataclasses.dataclass(frozen=True)
class CaseId:
    engine: str
    scenario: str
    point: str

    def __str__(self) -> str:
        return f"{self.scenario}-{self.point}"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "crashcert_case" not in metafunc.fixturenames:
        return
    from harness.contract import boundaries
    from harness.scenario import schema as scenario_module

    marker = metafunc.definition.get_closest_marker(MARKER)
    kwargs = marker.kwargs if marker else {}
    engine = str(kwargs.get("engine", "reference"))
    names = kwargs.get("scenarios") or [s.name for s in scenario_module.load_all()]
    points = kwargs.get("points") or boundaries.all_points()
    cases = [CaseId(engine, name, point) for name in names for point in points]
    metafunc.parametrize("crashcert_case_id", cases, ids=[str(c) for c in cases], scope="function")


class _Session:
    """Labs and baselines shared by all cases of one pytest session."""

    def __init__(self, out: pathlib.Path) -> None:
        self.out = out
        self.labs: dict[str, Any] = {}
        self.baselines: dict[tuple[str, str], Any] = {}
        self._stack: Any = None

    def lab(self, engine_ref: str) -> Any:
        import contextlib

        from harness.engines import commands
        from harness.lab import shared

        if self._stack is None:
            self._stack = contextlib.ExitStack()
        if engine_ref not in self.labs:
            engine = commands.find(engine_ref)
            self.labs[engine_ref] = self._stack.enter_context(shared.open_lab(engine))
        return self.labs[engine_ref]

    def close(self) -> None:
        if self._stack is not None:
            self._stack.close()


@pytest.fixture(scope="session")
def crashcert_out(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return tmp_path_factory.mktemp("crashcert-trials")


@pytest.fixture(scope="session")
def _crashcert_session(crashcert_out: pathlib.Path) -> Iterator[_Session]:
    session = _Session(crashcert_out)
    yield session
    session.close()


@pytest.fixture()
def crashcert_lab(_crashcert_session: _Session) -> Any:
    """The Lab of the reference engine (Postgres, Toxiproxy, migrated template)."""
    return _crashcert_session.lab("reference")


@dataclasses.dataclass
class Case:
    """One (scenario, point) cell of the matrix; `check()` runs and judges it."""

    case_id: CaseId
    session: _Session

    def check(self) -> list[Any]:
        from harness.checkers import verdict
        from harness.planning import plan
        from harness.scenario import schema as scenario_module
        from harness.trial import runner

        lab = self.session.lab(self.case_id.engine)
        key = (self.case_id.engine, self.case_id.scenario)
        base = runner.TrialSpec(
            scenario=scenario_module.find(self.case_id.scenario),
            scenario_ref=self.case_id.scenario,
            engine_ref=self.case_id.engine,
        )
        if key not in self.session.baselines:
            self.session.baselines[key] = runner.run_trial(lab, base, out_dir=self.session.out)
        baseline = self.session.baselines[key]
        occurrences = [
            (point, n)
            for point, n in plan.baseline_trace(baseline.history)
            if point == self.case_id.point
        ]
        if not occurrences:
            pytest.skip(f"{self.case_id.scenario} never reaches {self.case_id.point}")
        outcomes = []
        for steps in plan.kill_plans(occurrences):
            spec = base.model_copy(update={"plan": steps, "label": plan.plan_label(steps)})
            outcomes.append(runner.run_trial(lab, spec, out_dir=self.session.out))
        bad = [o for o in outcomes if o.verdict is not verdict.Verdict.PASS]
        if baseline.verdict is not verdict.Verdict.PASS:
            bad.insert(0, baseline)
        if bad:
            lines = [
                f"{o.verdict.value} {o.spec.label}: "
                + ", ".join(f"{r.invariant}: {r.summary}" for r in o.failing)
                + f"\n  rerun: {o.repro}"
                for o in bad
            ]
            pytest.fail("\n".join(lines), pytrace=False)
        return outcomes


@pytest.fixture()
def crashcert_case(crashcert_case_id: CaseId, _crashcert_session: _Session) -> Case:
    return Case(crashcert_case_id, _crashcert_session)
