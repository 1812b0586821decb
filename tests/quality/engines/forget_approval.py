"""Broken variant of the reference engine: an approval counts only on the claim that the
decision woke; a run resumed after that (its worker died) asks for approval again, and
since the decision was already made nobody answers: the tool never runs
(openai/openai-agents-python#4244).

    python tests/quality/engines/forget_approval.py worker   (see forget_approval.yaml)
"""

from __future__ import annotations

import sys

from reference_engine import checkpoint, cli, decide
from reference_engine import state as state_module

_tools_pending = decide._tools_pending
# The run parks on its first claim; the decision wakes it for its second.
WOKEN_CLAIM = 2


def tools_pending(
    run: state_module.RunState, point: checkpoint.Checkpoint, known: state_module.Known
) -> decide.Action:
    if run.attempts > WOKEN_CLAIM:
        for call in run.tool_calls:
            # BROKEN: a resumed run re-interrupts instead of honouring the stored approval
            if call.state == "awaiting_approval" and call.approval == "approved":
                return decide.AwaitApproval(call.id)
    return _tools_pending(run, point, known)


def install() -> None:
    decide._tools_pending = tools_pending


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
