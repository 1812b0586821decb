#!/usr/bin/env bash
# The flake hunt: run every test that starts real processes three times in a row, the
# second beside two CPU hogs, and print each test whose outcome was not the same every time.
#
#   ci/flake_hunt.sh [pytest arguments...]     e.g.  ci/flake_hunt.sh tests/contract -k dbos
#
# Tests are chosen by marker (pyproject.toml `markers`); arguments narrow the choice.
#   FLAKE_MARKERS  the -m expression (default below; empty: no marker filter, e.g. to hunt
#                  in an unmarked file such as tests/contract/test_control.py)
#   FLAKE_RUNS     runs (default 3)      FLAKE_HOG_RUN  which run has the hogs (default 2)
#   FLAKE_OUT      where each run's junit XML and log go (default: a new temporary directory)
#   PYTHON         the interpreter with crashcert installed (default .venv/bin/python)
# On a shared machine, run it under the heavy-trial lock:
#   flock /tmp/crashcert-heavy.lock ci/flake_hunt.sh
# Prints "UNSTABLE <test>: <outcome> (<run>), ..." per unstable test, then "N tests, M unstable".
# Exit 1: some test unstable; 2: none unstable, some failed every run; 0: all stable and
# passing; 3: nothing to hunt (no test selected, or pytest refused its arguments). A run
# that crashed or hung and left no junit XML makes every test absent there: unstable.
set -uo pipefail
cd "$(dirname "$0")/.."

python="${PYTHON:-.venv/bin/python}"
[ -x "$python" ] || python=python3
markers="${FLAKE_MARKERS-(postgres or matrix or toxiproxy or quality or docker or install or processes) and not slow}"
runs="${FLAKE_RUNS:-3}"
hog_run="${FLAKE_HOG_RUN:-2}"
out="${FLAKE_OUT:-$(mktemp -d -t crashcert-flake.XXXXXX)}"
mkdir -p "$out"

hogs=()
stop_hogs() {
    for pid in "${hogs[@]}"; do
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    hogs=()
}
trap stop_hogs EXIT
trap 'stop_hogs; exit 130' INT TERM

select=()
[ -n "$markers" ] && select=(-m "$markers")   # a later -m replaces addopts' "not slow"
labels=()
files=()
for run in $(seq 1 "$runs"); do
    label=quiet
    note=
    if [ "$run" = "$hog_run" ]; then
        label=hogs
        for _ in 1 2; do
            # timeout: a hunt killed with SIGKILL runs no trap; its hogs still end
            timeout "${FLAKE_HOG_S:-3600}" sh -c 'while :; do :; done' &
            hogs+=("$!")
        done
        note=", hog pids ${hogs[*]}"
    fi
    started=$SECONDS
    "$python" -m pytest -q "${select[@]}" --junitxml="$out/run$run.xml" "$@" \
        >"$out/run$run.log" 2>&1
    status=$?
    stop_hogs
    echo "run $run/$runs ($label$note): pytest exit $status in" \
        "$((SECONDS - started))s: $(tail -n 1 "$out/run$run.log")"
    if [ "$status" -eq 4 ] || [ "$status" -eq 5 ]; then  # usage error, no test selected
        echo "flake hunt: run $run ran no test (pytest exit $status; $out/run$run.log)" >&2
        exit 3
    fi
    labels+=("$label")
    files+=("$out/run$run.xml")
done
echo "per-run junit XML and logs: $out"
"$python" ci/flake_outcomes.py --labels "$(IFS=,; echo "${labels[*]}")" "${files[@]}"
