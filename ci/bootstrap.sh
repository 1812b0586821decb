#!/usr/bin/env bash
# CI entry point.
#   bash ci/bootstrap.sh test              # the pytest suite
#   bash ci/bootstrap.sh matrix [args...]  # crashcert matrix "$@"
# Creates .venv (if missing), installs the project with its dev extras, makes sure the
# Toxiproxy server exists, then runs the command. CI=true makes a missing Toxiproxy fatal.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
    echo "usage: bash ci/bootstrap.sh test | matrix [args...]" >&2
    exit 2
}

[[ $# -ge 1 ]] || usage
command=$1
shift
case "$command" in
    test | matrix) ;;
    *) usage ;;
esac

# System packages a fresh Debian/Ubuntu machine may lack; installed only where we can
# (root with apt-get), otherwise the tests that need them say so.
apt_install() {
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "bootstrap: apt-get install $*" >&2
        apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
    else
        echo "bootstrap: please install: $* (not root, or no apt-get)" >&2
        return 1
    fi
}
if ! command -v pg_config >/dev/null 2>&1 && ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
    apt_install postgresql || true
fi
if [[ $command == test ]] && ! command -v chromium >/dev/null 2>&1; then
    # The timeline report is checked in a real headless browser.
    apt_install chromium || true
fi

python=${PYTHON:-python3}
venv=.venv
# Each command installs what it runs, no more: the test suite certifies third-party engines
# (dbos, langgraph, temporal, restate, openai-agents, pydantic-ai) and reads the reference
# engine's traces (otel); the matrix needs the bundled scenarios' MCP tools (mcp) and the
# clock_skew fault's libfaketime (clock). The test set holds the matrix's, so a venv the
# tests installed serves the matrix too (the matrix set is ~20 s of pip, the test set ~60).
test_extras=dev,otel,dbos,langgraph,mcp,temporal,restate,openai-agents,pydantic-ai
matrix_extras=mcp,clock
if [[ $command == test ]]; then extras=$test_extras; else extras=$matrix_extras; fi
stamp=$venv/.crashcert-installed-$command
test_stamp=$venv/.crashcert-installed-test

if [[ ! -x $venv/bin/python ]]; then
    echo "bootstrap: creating $venv" >&2
    "$python" -m venv "$venv"
fi
# Reinstall only when pyproject.toml changed since the last install (editable: code is live).
fresh() { [[ -f $1 && ! pyproject.toml -nt $1 ]]; }
if ! fresh "$stamp" && ! fresh "$test_stamp"; then
    echo "bootstrap: installing crashcert[$extras] into $venv" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e ".[$extras]"
    touch "$stamp"
fi

if [[ ${CI:-} == "true" ]]; then
    export CRASHCERT_REQUIRE_TOXIPROXY=1
    export CRASHCERT_REQUIRE_CHROMIUM=1
    export CRASHCERT_REQUIRE_LIBFAKETIME=1
fi

# langchain-ai/langgraph#8039: LangGraph 1.2.4 and 1.2.4 with PR #8055's loop, each in a
# cached virtualenv of its own (one venv cannot hold two LangGraphs); built once, rebuilt
# when their pins change. tests/contract/test_langgraph_8039.py skips them when missing.
if [[ $command == test ]]; then
    if pinned=$("$venv/bin/python" ci/langgraph_8039/envs.py 2>&1); then
        echo "bootstrap: pinned LangGraph environments: ${pinned##*$'\n'}" >&2
    elif [[ ${CI:-} == "true" ]]; then
        echo "bootstrap: the pinned LangGraph environments are required (CI): ${pinned: -400}" >&2
        exit 1
    else
        echo "bootstrap: WARNING: pinned LangGraph environments not built; their tests will skip" >&2
    fi
fi

# The Restate server (tests/contract/test_restate_engine.py): the npm package's linux-x64
# binary, pinned, in a cache of its own (restate_front.py finds it there); installed once.
restate_version=1.7.12
restate_dir=$HOME/.cache/crashcert/restate-$restate_version
restate_bin=$restate_dir/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server
if [[ $command == test ]]; then
    if [[ -x $restate_bin ]]; then
        echo "bootstrap: restate-server: $restate_bin" >&2
    elif command -v npm >/dev/null 2>&1 &&
        mkdir -p "$restate_dir" &&
        npm install --prefix "$restate_dir" --no-audit --no-fund --loglevel=error \
            "@restatedev/restate-server@$restate_version" >&2 && [[ -x $restate_bin ]]; then
        echo "bootstrap: restate-server installed: $restate_bin" >&2
    elif [[ ${CI:-} == "true" ]]; then
        echo "bootstrap: the Restate server is required (CI) and npm could not install" \
            "@restatedev/restate-server@$restate_version" >&2
        exit 1
    else
        echo "bootstrap: WARNING: no npm (or its install failed): Restate server not installed;" \
            "tests/contract/test_restate_engine.py will skip" >&2
    fi
fi

# clock_skew preloads libfaketime into workers: the dev extras install the PyPI package
# `libfaketime` (a working build); the harness probes it (harness/lab/faketime.py), or a
# build named by CRASHCERT_LIBFAKETIME.
if faketime=$("$venv/bin/python" -c 'from harness.lab import faketime; print(faketime.find())' 2>&1); then
    echo "bootstrap: libfaketime: $faketime" >&2
elif [[ ${CRASHCERT_REQUIRE_LIBFAKETIME:-} == "1" ]]; then
    echo "bootstrap: libfaketime is required (CI) and none works: ${faketime##*EnvironmentProblem: }" >&2
    exit 1
else
    echo "bootstrap: WARNING: no working libfaketime; clock_skew tests will skip" >&2
fi

if toxiproxy=$("$venv/bin/python" -m harness.lab.toxiproxy_server build); then
    echo "bootstrap: toxiproxy server: $toxiproxy" >&2
elif [[ ${CRASHCERT_REQUIRE_TOXIPROXY:-} == "1" ]]; then
    echo "bootstrap: Toxiproxy is required (CRASHCERT_REQUIRE_TOXIPROXY=1) and could not be built" >&2
    exit 1
else
    echo "bootstrap: WARNING: no Toxiproxy server; network-fault tests will fail" \
        "(set CRASHCERT_SKIP_TOXIPROXY=1 to skip them)" >&2
fi

case "$command" in
    test)
        status=0
        # every test over a second is listed, so the next slow one is visible in the log
        "$venv/bin/python" -m pytest -q --durations=0 --durations-min=1.0 || status=$?
        if [[ $status -eq 5 ]]; then
            echo "bootstrap: pytest collected no tests; that is a failure, not a pass" >&2
            exit 1
        fi
        exit "$status"
        ;;
    matrix)
        exec "$venv/bin/crashcert" matrix "$@"
        ;;
esac
