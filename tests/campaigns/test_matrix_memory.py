"""A matrix holds passed trials light (matrix.kept): their own page is written while the
history is whole, memory keeps only what the summary, the grid and --jobs auto read, and
the matrix page shows their facts and verdicts and links to the page for the timeline.
A failing trial is kept whole, its timeline on the matrix page."""

from __future__ import annotations

import pathlib
import pickle

from harness.campaigns import matrix
from harness.checkers import judge, verdict
from harness.report import timeline
from harness.trial import runner
from tests.checkers import builders


def _outcome(directory: pathlib.Path, result: verdict.Verdict) -> runner.TrialOutcome:
    history = builders.clean()
    history.trial_id = directory.name
    history.workers_started_at = history.started_at
    directory.mkdir(parents=True)
    results, _ = judge.judge(history)
    return runner.TrialOutcome(
        spec=runner.TrialSpec(scenario=history.scenario, label="baseline"),
        history=history,
        results=results,
        verdict=result,
        directory=directory,
        repro="crashcert run --scenario refund",
    )


def test_a_passed_trial_is_kept_light_with_its_page_written_whole(tmp_path: pathlib.Path) -> None:
    whole = _outcome(tmp_path / "t-1", verdict.Verdict.PASS)
    kept = matrix.kept(whole)
    assert kept.history.light and not whole.history.light
    # the scenario is one object shared by every trial of a scenario: not counted
    size = [
        len(pickle.dumps(h.model_dump(exclude={"scenario"}))) for h in (kept.history, whole.history)
    ]
    assert size[0] < size[1] / 3
    # what the summary, the grid and --jobs auto read is still there
    assert kept.history.boundary_hits()[:1] == whole.history.boundary_hits()[:1]
    assert kept.history.final_report == whole.history.final_report
    assert kept.history.ended_at == whole.history.ended_at
    assert kept.results == whole.results
    page = (tmp_path / "t-1" / timeline.TRIAL_PAGE).read_text()
    assert 'class="trial-data"' in page  # the own page has the whole timeline...
    assert "run.finished" in page  # ... down to its last event, which light history lacks
    assert "run.finished" not in {hit.point for hit in kept.history.boundary_hits()}


def test_a_failing_trial_is_kept_whole(tmp_path: pathlib.Path) -> None:
    whole = _outcome(tmp_path / "t-2", verdict.Verdict.FAIL)
    kept = matrix.kept(whole)
    assert kept is whole
    assert not (tmp_path / "t-2" / timeline.TRIAL_PAGE).exists()


def test_the_matrix_page_links_a_light_trial_and_keeps_its_whole_page(
    tmp_path: pathlib.Path,
) -> None:
    passed = matrix.kept(_outcome(tmp_path / "t-1", verdict.Verdict.PASS))
    failed = matrix.kept(_outcome(tmp_path / "t-2", verdict.Verdict.FAIL))
    own_page = (tmp_path / "t-1" / timeline.TRIAL_PAGE).read_text()
    views = [timeline.view_of_outcome(o) for o in (passed, failed)]
    page = timeline.write_matrix_report(tmp_path, views).read_text()
    # one timeline on the matrix page: the failing trial's; the passed one links its page
    assert page.count('class="trial-data"') == 1
    assert "its timeline is on" in page and "t-1/" + timeline.TRIAL_PAGE in page
    # ... and that page was not rewritten from the light history
    assert (tmp_path / "t-1" / timeline.TRIAL_PAGE).read_text() == own_page
