"""Print the hostile-input table: `python -m tests.hostile.table` (from the checkout)."""

from __future__ import annotations

import collections
import pathlib
import tempfile

from tests.hostile import catalog, forked, inputs


def main() -> None:
    outcomes = []
    for case in catalog.CASES:
        with tempfile.TemporaryDirectory(prefix="crashcert-hostile-") as directory:
            outcomes.append(forked.run(case, pathlib.Path(directory)))
    print("| input | outcome | exit | seconds | last line |")
    print("|---|---|---|---|---|")
    for outcome in outcomes:
        lines = outcome.output.strip().splitlines()
        last = (lines[-1] if lines else "").replace("|", "\\\\|")[:110]
        print(
            f"| {outcome.case.name} | {outcome.outcome_class} | {outcome.exit_code} "
            f"| {outcome.seconds:.1f} | {last} |"
        )
    counts = collections.Counter(outcome.outcome_class for outcome in outcomes)
    print()
    print(
        f"inputs tried: {len(outcomes)}; "
        + "; ".join(f"{name}: {counts[name]}" for name in inputs.CLASSES)
    )


if __name__ == "__main__":
    main()
