"""Print the hostile-input table: `python -m tests.hostile.table` (from the checkout)."""

from __future__ import annotations

import pathlib
import tempfile

from tests.hostile import inputs


def main() -> None:
    outcomes = []
    for case in inputs.CASES:
        with tempfile.TemporaryDirectory(prefix="crashcert-hostile-") as directory:
            outcomes.append(inputs.run(case, pathlib.Path(directory)))
    print("| input | exit | seconds | first line |")
    print("|---|---|---|---|")
    for outcome in outcomes:
        lines = outcome.output.strip().splitlines()
        first = (lines[-1] if lines else "").replace("|", "\\\\|")[:110]
        print(f"| {outcome.case.name} | {outcome.exit_code} | {outcome.seconds:.1f} | {first} |")
    print()
    print(
        f"inputs tried: {len(outcomes)}; clear errors: {sum(o.clear for o in outcomes)}; "
        f"tracebacks: {sum(o.traceback for o in outcomes)}; "
        f"hangs: {sum(o.exit_code is None for o in outcomes)}; "
        f"secrets leaked: {sum(o.leaked for o in outcomes)}; "
        f"internal errors: {sum(o.internal for o in outcomes)}"
    )


if __name__ == "__main__":
    main()
