"""`submit_twice@run`: the client submits the same RunInput again, as a client retrying
after a lost acknowledgement would, right after the first submit (`when=at_once`) or once
the run is terminal (`when=after_finish`). A correct engine answers the run it already
has and creates nothing (CONTRACT.md, section 5); `run.single_submit` judges.

Each resubmit is recorded as the fault it is (FaultApplied, action `submit_twice`) with
the run id the engine answered in `observed`, so plan.applied sees it struck.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from harness import errors
from harness.contract import run_report
from harness.faults import spec
from harness.record import history
from harness.record import recorder as recorder_module

log = logging.getLogger(__name__)

ACTION = "submit_twice"
AT_ONCE, AFTER_FINISH = spec.PARAMS["when"].choices
# What the record's `observed` holds: the run id the resubmit answered, the first one's.
RUN_ID, FIRST_RUN_ID = "run_id", "first_run_id"


def when(step: spec.FaultStep) -> str:
    return str(step.params.get("when", AT_ONCE))


def planned(plan: list[spec.FaultStep], moment: str) -> list[spec.FaultStep]:
    """The plan's resubmits due at `moment` (AT_ONCE or AFTER_FINISH)."""
    return [step for step in plan if step.action == ACTION and when(step) == moment]


def resubmit(
    engine: Any,
    dsn: str,
    run_input: run_report.RunInput,
    step: spec.FaultStep,
    *,
    first_run_id: str,
    recorder: recorder_module.Recorder,
) -> str | None:
    """Submit `run_input` again; the run id the engine answered, None when it refused."""
    try:
        run_id = str(engine.submit(dsn, run_input))
    except errors.CrashcertError as error:
        # A refusal creates nothing, but the fault did not strike as planned: INCONCLUSIVE.
        log.info("resubmit refused: %s", error)
        _record(recorder, step, ok=False, note=f"the engine refused the resubmit: {error}")
        return None
    same = "the same run" if run_id == first_run_id else "a run other than the first"
    _record(
        recorder,
        step,
        ok=True,
        note=f"submitted the same input again ({when(step)}): the engine answered {same}",
        observed={RUN_ID: run_id, FIRST_RUN_ID: first_run_id},
    )
    return run_id


def _record(
    recorder: recorder_module.Recorder,
    step: spec.FaultStep,
    *,
    ok: bool,
    note: str,
    observed: dict[str, Any] | None = None,
) -> None:
    recorder.append(
        history.FaultApplied(
            action=ACTION,
            step=step.label(),
            planned=step,
            ok=ok,
            note=note,
            observed=observed or {},
        )
    )


def await_terminal(
    engine: Any, dsn: str, run_ids: list[str], *, server: Any, deadline: float, poll_s: float
) -> None:
    """Let each run a resubmit answered end (a second run, or the first one reopened), so
    what it does outside (model calls, a second reply) is in the world's ledgers."""
    for run_id in dict.fromkeys(run_ids):
        while time.monotonic() < deadline:
            try:
                if engine.report(dsn, run_id).terminal:
                    break
            except errors.CrashcertError as error:  # Postgres down on purpose: ask again
                log.info("report of resubmitted run %s unavailable: %s", run_id, error)
            remaining = max(0.0, deadline - time.monotonic())
            server.wait_for(
                lambda hit, wanted=run_id: hit.point == "run.finished" and hit.run_id == wanted,
                timeout=min(poll_s, remaining),
            )
