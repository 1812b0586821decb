"""An engine in its own virtualenv keeps `preload`: the fork server runs under the
interpreter its worker command names (harness/lab/spawner.py), by path, with the standard
library only. The preloaded modules are imported once, in the server; each worker is a fork
of it, running under that virtualenv's Python with its packages, not the harness's."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from harness.lab import processes, spawner

pytestmark = pytest.mark.processes  # starts real subprocesses: the flake hunt runs it

# What the engine imports slowly (a framework): preloaded, so imported once, in the server.
DEPS = """
import os, pathlib
pathlib.Path(os.environ["IMPORTS"]).open("a").write(f"{os.getpid()}\\n")
import only_in_the_engine_venv
"""
ENGINE = """
import sys
import engine_deps

print("prefix", sys.prefix, flush=True)
print("package", engine_deps.only_in_the_engine_venv.WHERE, flush=True)
"""


@pytest.fixture(scope="module")
def engine_venv(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A virtualenv without crashcert, holding a package the harness's venv lacks."""
    venv = tmp_path_factory.mktemp("engine") / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    [site] = (venv / "lib").glob("python3*/site-packages")
    (site / "only_in_the_engine_venv.py").write_text(f"WHERE = {str(site)!r}\n")
    return venv


def test_the_fork_server_runs_under_the_engines_own_interpreter(
    engine_venv: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    python = str(engine_venv / "bin" / "python")
    argv = [python, "-m", "venv_engine", "worker"]
    assert spawner.interpreter(argv) == python
    (tmp_path / "venv_engine.py").write_text(ENGINE)
    (tmp_path / "engine_deps.py").write_text(DEPS)
    imports = tmp_path / "imports.log"
    env = {"PATH": os.environ["PATH"], "IMPORTS": str(imports)}
    os.environ["IMPORTS"] = str(imports)  # the server imports the module with our env
    try:
        server = spawner.ForkServer(["engine_deps"], cwd=str(tmp_path), python=python)
    finally:
        del os.environ["IMPORTS"]
    try:
        workers = [
            processes.Worker(
                f"w{n}", argv, env=env, log_dir=tmp_path, cwd=str(tmp_path), forkserver=server
            )
            for n in (1, 2)
        ]
        for worker in workers:
            assert isinstance(worker.process, spawner.ForkedProcess)
            assert processes.wait_until(lambda w=worker: not w.alive, timeout=20)
            assert worker.returncode == 0
            log = worker.log_path.read_text()
            assert f"prefix {engine_venv}" in log, log
            assert "package " + str(engine_venv) in log, log
    finally:
        server.close()
    # imported once, by the server, never again by a worker
    assert len(imports.read_text().split()) == 1


def test_a_worker_command_that_is_not_python_dash_m_keeps_our_interpreter() -> None:
    assert spawner.interpreter(["./engine-binary", "worker"]) == sys.executable
