"""Two pinned LangGraph environments for langchain-ai/langgraph#8039, cached and rebuilt
only when their pins change (tests/contract/test_langgraph_8039.py; ci/bootstrap.sh test).

    python ci/langgraph_8039/envs.py        # builds what is missing, prints {name: python}

`1.2.4`: LangGraph as the issue was filed, with the checkpoint packages of that week.
`1.2.4+pr8055`: the same, with PR #8055's change to `pregel/_loop.py` applied (every
`put_writes` future awaited before the superseding `put`). No released LangGraph has it:
the PR and #8050 were closed unmerged, and 1.2.5 to 1.2.24 keep the 1.2.4 loop. The
patch is the PR's own diff of that file (its base has the same `_loop.py` as 1.2.4).

One virtualenv per name under $CRASHCERT_CACHE/langgraph-8039 (default
~/.cache/crashcert), 0700, installed from the package index with pip; a stamp holds the
pins it was built with.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
PATCH = HERE / "pr8055_loop.patch"
PINS = [
    "langgraph==1.2.4",
    "langgraph-checkpoint==4.1.1",
    "langgraph-checkpoint-postgres==3.1.0",
    "langgraph-prebuilt==1.1.0",
    "langgraph-sdk==0.4.2",
    "langchain-core==1.8.3",
    "psycopg[binary]==3.3.9",
]
ENVS = {"1.2.4": None, "1.2.4+pr8055": PATCH}
TIMEOUT_S = 600


def cache_root() -> pathlib.Path:
    base = os.environ.get("CRASHCERT_CACHE") or os.path.expanduser("~/.cache/crashcert")
    return pathlib.Path(base) / "langgraph-8039"


def _stamp(patch: pathlib.Path | None) -> str:
    return json.dumps({"pins": PINS, "patch": patch.read_text() if patch else None})


def python_of(name: str) -> pathlib.Path:
    return cache_root() / name / "bin" / "python"


def build(name: str) -> pathlib.Path:
    """The environment's Python, built first if it is missing or its pins changed."""
    patch = ENVS[name]
    venv = cache_root() / name
    stamp = venv / ".crashcert-pins"
    if stamp.is_file() and stamp.read_text() == _stamp(patch):
        return python_of(name)
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=TIMEOUT_S)
    os.chmod(venv, 0o700)
    python = python_of(name)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *PINS],
        check=True,
        timeout=TIMEOUT_S,
    )
    if patch is not None:
        site = subprocess.run(
            [
                str(python),
                "-c",
                "import langgraph, os; print(os.path.dirname(langgraph.__path__[0]))",
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.strip()
        # The diff is of libs/langgraph/langgraph/...: strip libs/langgraph/ (and a/, b/).
        subprocess.run(
            ["patch", "-p3", "-d", site, "-i", str(patch), "--forward", "--quiet"],
            check=True,
            timeout=60,
        )
    stamp.write_text(_stamp(patch))
    return python


def main() -> None:
    print(json.dumps({name: str(build(name)) for name in ENVS}))


if __name__ == "__main__":
    main()
