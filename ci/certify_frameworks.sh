#!/usr/bin/env bash
# Regenerate docs/frameworks.md's dated certification table: certify every framework
# example on the `refund` scenario (black-box kills at every world event and two seeded time
# kills; the hardened LangGraph agent in boundary mode too), print the table rows that
# `crashcert certify --markdown` writes and rewrite them between the markers in
# docs/frameworks.md. Heavy: where the machine is shared, set CRASHCERT_LOCK to its lock file
# and each certification takes it alone (flock), so others get it between them.
#   bash ci/certify_frameworks.sh [out_dir]   (needs crashcert[dbos,langgraph,temporal,restate,openai-agents,pydantic-ai]
#   and the Restate server, which ci/bootstrap.sh installs with npm)
# CERTIFY_ONLY=REGEX certifies only the descriptions whose path matches; the table is then
# rewritten from every certificate in out_dir (*.md), earlier runs' and other helpers' too.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

out=${1:-crashcert-trials/frameworks}
mkdir -p "$out"
crashcert=${CRASHCERT:-.venv/bin/crashcert}
lock_fd=
if [[ -n ${CRASHCERT_LOCK:-} ]]; then
    exec {lock_fd}>>"$CRASHCERT_LOCK"
fi
certify() {  # description mode
    local name
    if [[ -n ${CERTIFY_ONLY:-} && ! $1 =~ $CERTIFY_ONLY ]]; then
        return 0
    fi
    name=$(basename "$1" .yaml)-$2
    echo "certify: $1 --mode $2" >&2
    if [[ -n $lock_fd ]]; then
        flock "$lock_fd"
    fi
    start=$(date +%s)
    status=0
    "$crashcert" certify --engine "$1" --scenario refund --mode "$2" --jobs 2 \
        --out "$out/$name" --markdown "$out/$name.md" --json "$out/$name.json" >"$out/$name.log" || status=$?
    echo "certify: $name exit $status in $(($(date +%s) - start)) s" >&2
    if [[ -n $lock_fd ]]; then
        flock -u "$lock_fd"
    fi
}
for description in tests/contract/dbos_engine/dbos_engine.yaml \
    tests/contract/dbos_engine/dbos_engine_keyed.yaml \
    tests/contract/dbos_engine/dbos_engine_reserved.yaml \
    tests/contract/langgraph_engine/langgraph_naive.yaml \
    tests/contract/temporal_engine/temporal_naive.yaml \
    tests/contract/temporal_engine/temporal_hardened.yaml \
    tests/contract/restate_engine/restate_naive.yaml \
    tests/contract/restate_engine/restate_hardened.yaml \
    tests/contract/openai_agents_engine/openai_agents_naive.yaml \
    tests/contract/openai_agents_engine/openai_agents_hardened.yaml \
    tests/contract/pydantic_ai_engine/pydantic_ai_naive.yaml \
    tests/contract/pydantic_ai_engine/pydantic_ai_hardened.yaml; do
    certify "$description" blackbox
done
certify tests/contract/langgraph_engine/langgraph_hardened.yaml both

# The rows certify wrote, under the header, printed and put between the markers of the
# "Certified frameworks" table in docs/frameworks.md.
"${PYTHON:-.venv/bin/python}" -m harness.report.certify_doc docs/frameworks.md "$out"/*.md
