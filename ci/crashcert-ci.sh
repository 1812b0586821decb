#!/usr/bin/env bash
# Run the crash matrix for an engine and leave CI-friendly results behind.
#
#   ci/crashcert-ci.sh [ENGINE] [extra `crashcert matrix` arguments...]
#
# ENGINE is `reference` (default) or the path of an engine description file
# (harness/CONTRACT.md). Results go to $CRASHCERT_OUT (default: crashcert-out/):
#   junit.xml      one test case per trial, for the CI's test report
#   report.json    every trial's verdicts and evidence
#   trials/        every trial directory
#   failed/        copies of the trial directories that did not PASS (upload these)
# Exit code: the matrix's (0 PASS, 1 FAIL, 2 INCONCLUSIVE, 3 ERROR).
# Works the same on a laptop: set CRASHCERT_PG_DSN to use a Postgres service
# container instead of the embedded one; crashcert is found on PATH or in .venv/.
set -uo pipefail

engine="${1:-reference}"
[ $# -gt 0 ] && shift
out="${CRASHCERT_OUT:-crashcert-out}"
crashcert="${CRASHCERT:-}"
if [ -z "$crashcert" ]; then
    if command -v crashcert >/dev/null 2>&1; then
        crashcert="$(command -v crashcert)"
    elif [ -x .venv/bin/crashcert ]; then
        crashcert=.venv/bin/crashcert
    else
        echo "crashcert-ci: no crashcert on PATH or in .venv/ (pip install crashcert)" >&2
        exit 3
    fi
fi
python_bin="$(dirname "$crashcert")/python"
[ -x "$python_bin" ] || python_bin=python3

mkdir -p "$out"
"$crashcert" matrix --engine "$engine" --out "$out/trials" \
    --junit "$out/junit.xml" --json "$out/report.json" "$@"
status=$?

# Copy what a reviewer needs: each trial that did not PASS, with its rerun command.
if [ -f "$out/report.json" ]; then
    "$python_bin" - "$out" <<'PY'
import json, pathlib, shutil, sys
out = pathlib.Path(sys.argv[1])
report = json.loads((out / "report.json").read_text())
failed = out / "failed"
for trial in report["trials"]:
    if trial["verdict"] != "PASS":
        source = pathlib.Path(trial["directory"])
        target = failed / trial["scenario"] / source.name
        shutil.copytree(source, target, dirs_exist_ok=True)
        print(f"{trial['verdict']} {trial['scenario']} {trial['label']}: {trial['repro']}")
PY
fi
exit $status
