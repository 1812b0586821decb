"""An engine in its own virtualenv keeps `preload`: the fork server runs under the
interpreter its worker command names (harness/lab/spawner.py), by path, with the standard
library only. The preloaded modules are imported once, in the server; each worker is a fork
of it, running under that virtualenv's Python with its packages, not the harness's."""

from __future__ import annotations

import logging
import os
import pathlib
import subprocess
import sys

import pytest

from harness import errors
from harness.engines import commands
from harness.lab import processes, shared, spawner
from tests import fix_engine

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


def test_a_preload_the_servers_interpreter_cannot_import_is_named_with_that_interpreter(
    engine_venv: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    python = str(engine_venv / "bin" / "python")
    with pytest.raises(errors.EnvironmentProblem) as raised:
        spawner.ForkServer(["a_framework_nobody_installed"], cwd=str(tmp_path), python=python)
    message = str(raised.value)
    assert python in message
    assert "ModuleNotFoundError: No module named 'a_framework_nobody_installed'" in message


def test_the_lab_runs_without_a_fork_server_that_cannot_import_its_preload(
    engine_venv: pathlib.Path, tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The engine's env reaches the server (its PYTHONPATH finds the module); a server that
    still cannot import is no lab error: workers are exec'd and each trial is written."""
    python = str(engine_venv / "bin" / "python")
    (tmp_path / "deps").mkdir()
    (tmp_path / "deps" / "engine_deps.py").write_text("import only_in_the_engine_venv\n")
    description = tmp_path / "engine.yaml"
    description.write_text(
        "name: venv_engine\n"
        'migrate: ["true"]\n'
        f'worker: ["{python}", "-m", "venv_engine", "worker"]\n'
        "preload: [engine_deps]\n"
        'submit: ["true"]\n'
        'status: ["true"]\n'
        f"env: {{PYTHONPATH: {tmp_path / 'deps'}}}\n"
    )
    engine = commands.load(description)
    server = shared._start_forkserver(engine)
    assert server is not None  # found through the description's PYTHONPATH
    server.close()
    description.write_text(description.read_text().replace("deps}", "nowhere}"))
    caplog.set_level(logging.WARNING)
    assert shared._start_forkserver(commands.load(description)) is None
    assert "No module named 'engine_deps'" in caplog.text
    assert "workers of venv_engine start with exec instead" in caplog.text


def _described(directory: pathlib.Path, name: str, preload: str) -> commands.CommandEngine:
    description = directory / f"{name}.yaml"
    description.write_text(
        f"name: {name}\n"
        'migrate: ["true"]\n'
        f'worker: ["{sys.executable}", "-m", "{name}", "worker"]\n'
        f"preload: [{preload}]\n"
        'submit: ["true"]\n'
        'status: ["true"]\n'
    )
    return commands.load(description)


def test_a_variant_shares_the_server_that_imported_its_preload_on_the_way(
    tmp_path: pathlib.Path,
) -> None:
    """A variant preloading a module the lab's preload imports (reference_engine.worker,
    imported by reference_engine.preload) forks from the lab's server. Compared by the
    names alone, 42 variants of tests/quality exec'd Python for every worker unseen."""
    engine = _described(tmp_path, "lab_engine", "json")
    server = spawner.ForkServer(engine.preload, cwd=str(tmp_path))
    try:
        assert "json.decoder" in server.modules and "json" in server.modules
        lab = fix_engine.lab_of(engine, server)
        assert lab.with_engine(_described(tmp_path, "variant", "json.decoder")).forkserver is server
        # what the server never imported still gets exec'd workers
        assert lab.with_engine(_described(tmp_path, "other", "xml.dom")).forkserver is None
    finally:
        server.close()
