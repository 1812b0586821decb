"""crashcert installed as a user installs it: a wheel (built from the sdist) in a fresh
virtualenv, every verb run from an unrelated directory with relative paths.

Each verdict is compared with the one the checkout gives for the same command: the
checkout's own `crashcert` runs the same argv from the same kind of unrelated directory.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator

import pytest
import yaml

from harness.lab import toxiproxy_server

pytestmark = [pytest.mark.install, pytest.mark.postgres, pytest.mark.matrix]
ROOT = pathlib.Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT_S = 600
# the refund's windows where a kill tests recovery hardest (the full set runs in the suite)
MATRIX_POINTS = "tools.pending,tool.returned,reply.sending"
VERB_TIMEOUT_S = 600
CHECKOUT_BIN = pathlib.Path(sys.executable).parent
# What the tool reads at run time; an editable install found these in the checkout.
PACKAGE_DATA = (
    "harness/scenarios/refund.yaml",
    "harness/CONTRACT.md",
    "harness/INCIDENTS.md",
    "harness/report/templates/timeline.js",
    "harness/report/templates/trial.html",
    "harness/report/templates/matrix.html",
    "harness/lab/postgres/watchdog.py",
    "harness/lab/forkserver.py",  # run by path, under the engine's interpreter
    "crashcert_probe.py",  # the reference engine reports through it
    "reference_engine/engine.yaml",
    "reference_engine/sql/queries.sql",
    "reference_engine/sql/migrations/001_init.sql",
    "reference_engine/sql/next/004_checkpoint_format_2.sql",  # the upgrade's migration
)


@dataclasses.dataclass
class Installed:
    bin: pathlib.Path
    wheel: pathlib.Path
    sdist: pathlib.Path


def _run(
    argv: list[str], *, cwd: pathlib.Path, timeout: float = VERB_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}
    }
    env["CRASHCERT_CACHE"] = str(toxiproxy_server.cache_dir())  # the built Toxiproxy
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    base = tmp_path_factory.mktemp("install")
    dist = base / "dist"
    # Without flags `build` makes the sdist, then the wheel *from the sdist*: whatever the
    # sdist lacks, the wheel lacks too.
    source = base / "source"
    # symlinks=True: harness/scenarios stays the link a clone has, as the sdist sees it
    shutil.copytree(
        ROOT,
        source,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "*.egg-info", "build", "dist", "crashcert-trials", "__pycache__"
        ),
    )
    built = _run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(source)],
        cwd=base,
        timeout=INSTALL_TIMEOUT_S,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    [wheel] = dist.glob("*.whl")
    [sdist] = dist.glob("*.tar.gz")
    venv = base / "venv"
    # The checkout's pip installs into the fresh venv (`--python`): a pip of the venv's own
    # costs 2.6 s to install and tests nothing of ours. No bytecode compiled ahead (2.4 s):
    # what the tool imports is compiled as it runs, as from any read-only install.
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    pip = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--quiet",
            "--no-compile",
            "--disable-pip-version-check",
            "--prefer-binary",
            f"{wheel}[test]",
        ],
        cwd=base,
        timeout=INSTALL_TIMEOUT_S,
    )
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    yield Installed(bin=venv / "bin", wheel=wheel, sdist=sdist)


def _elsewhere(tmp_path: pathlib.Path, name: str) -> pathlib.Path:
    """An unrelated working directory: no checkout above it, nothing of ours in it."""
    directory = tmp_path / name
    directory.mkdir()
    return directory


def _both(
    installed: Installed,
    tmp_path: pathlib.Path,
    args: list[str],
    *,
    tag: str = "",
    prepare: object = None,
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """The same argv with the installed tool and with the checkout's, each from its own dir,
    at once: each starts a lab of its own and mostly waits on its trials."""
    argvs = []
    for name, bindir in (("installed", installed.bin), ("checkout", CHECKOUT_BIN)):
        cwd = _elsewhere(tmp_path, name + tag)
        if callable(prepare):
            prepare(cwd)
        argvs.append(([str(bindir / "crashcert"), *args], cwd))
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        mine, theirs = pool.map(lambda job: _run(job[0], cwd=job[1]), argvs)
    return mine, theirs


def _last_verdict(output: str) -> str:
    for line in reversed(output.splitlines()):
        word = line.strip().split(" ")[0] if line.strip() else ""
        if word in {"PASS", "FAIL", "INCONCLUSIVE", "ERROR"}:
            return word
    raise AssertionError(f"no verdict line in:\n{output[-3000:]}")


def test_wheel_and_sdist_carry_what_the_tool_reads(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    missing = [name for name in PACKAGE_DATA if name not in names]
    assert not missing, f"the wheel lacks {missing}"
    bundled = {path.name for path in (ROOT / "scenarios").glob("*.yaml")}
    assert {f"harness/scenarios/{name}" for name in bundled} <= names
    checked = _run(
        [
            sys.executable,
            "-m",
            "twine",
            "check",
            "--strict",
            str(installed.wheel),
            str(installed.sdist),
        ],
        cwd=installed.wheel.parent,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_version_scenarios_and_toxiproxy_from_anywhere(
    installed: Installed, tmp_path: pathlib.Path
) -> None:
    cwd = _elsewhere(tmp_path, "anywhere")
    version = _run([str(installed.bin / "crashcert"), "--version"], cwd=cwd)
    assert version.returncode == 0 and "crashcert, version 0.1.0" in version.stdout
    listed = _run([str(installed.bin / "crashcert"), "scenarios"], cwd=cwd)
    assert listed.returncode == 0, listed.stderr
    # grouped: a heading per group, then one indented line per scenario
    names = {line.split()[0] for line in listed.stdout.splitlines() if line.startswith("  ")}
    assert names == {path.stem for path in (ROOT / "scenarios").glob("*.yaml")}
    found = _run([str(installed.bin / "crashcert"), "toxiproxy", "path"], cwd=cwd)
    assert found.returncode == 0 and found.stdout.strip().endswith("toxiproxy-server")


def test_run_with_a_kill_and_relative_out(installed: Installed, tmp_path: pathlib.Path) -> None:
    args = ["run", "--scenario", "refund", "--fault", "kill@tool.returned#1", "--out", "out"]
    mine, theirs = _both(installed, tmp_path, args)
    assert mine.returncode == theirs.returncode == 0, mine.stdout[-3000:] + mine.stderr[-2000:]
    assert _last_verdict(mine.stdout) == _last_verdict(theirs.stdout) == "PASS"
    trials = list((tmp_path / "installed" / "out").glob("*/refund/*/history.jsonl"))
    assert len(trials) == 1  # written where the user said, relative to their directory


def _verdicts(report: pathlib.Path) -> dict[str, str]:
    trials = json.loads(report.read_text())["trials"]
    return {f"{trial['scenario']} {trial['label']}": trial["verdict"] for trial in trials}


def test_matrix_and_its_report(installed: Installed, tmp_path: pathlib.Path) -> None:
    matrix = [
        "matrix",
        "--scenario",
        "refund",
        "--points",
        MATRIX_POINTS,
        "--out",
        "m",
        "--json",
        "matrix.json",
    ]
    mine, theirs = _both(installed, tmp_path, matrix)
    assert mine.returncode == theirs.returncode == 0, mine.stdout[-3000:] + mine.stderr[-2000:]
    installed_verdicts = _verdicts(tmp_path / "installed" / "matrix.json")
    assert len(installed_verdicts) > 3  # the baseline and a kill at each occurrence
    assert installed_verdicts == _verdicts(tmp_path / "checkout" / "matrix.json")
    assert list((tmp_path / "installed" / "m").glob("*/report.html"))  # templates found


def test_soak(installed: Installed, tmp_path: pathlib.Path) -> None:
    # The installed tool only: the checkout's soak is tests/campaigns/test_soak.py's.
    soak = ["soak", "--runs", "10", "--workers", "2", "--storm-s", "3", "--out", "s"]
    done = _run([str(installed.bin / "crashcert"), *soak], cwd=_elsewhere(tmp_path, "installed"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "runs=10" in done.stdout and '"verdict": "PASS"' in done.stdout, done.stdout[-3000:]


def test_certify_an_engine_described_in_the_users_tree(
    installed: Installed, tmp_path: pathlib.Path
) -> None:
    def copy_engine(cwd: pathlib.Path) -> None:
        engine = cwd / "engines"
        engine.mkdir()
        for name in ("naive_engine.py", "naive_engine.yaml"):
            shutil.copy(ROOT / "tests" / "contract" / name, engine / name)

    args = [
        "certify",
        "--engine",
        "engines/naive_engine.yaml",
        "--scenario",
        "refund",
        "--points",
        "tool.returned,reply.sent",
        "--json",
        "cert.json",
        "--out",
        "c",
    ]
    mine, theirs = _both(installed, tmp_path, args, prepare=copy_engine)
    assert mine.returncode == theirs.returncode == 0, mine.stdout[-3000:] + mine.stderr[-2000:]
    certs = [
        yaml.safe_load((tmp_path / name / "cert.json").read_text())
        for name in ("installed", "checkout")
    ]
    # Its invariants earn AT-LEAST-ONCE, but two points of eight are no certificate: capped.
    assert [c["evidence_level"] for c in certs] == ["AT-LEAST-ONCE"] * 2
    assert [c["level"] for c in certs] == ["NONE"] * 2
    assert all("AT-LEAST-ONCE needs kill struck" in c["title"] for c in certs), certs[0]["title"]


def test_incident_export_and_replay(installed: Installed, tmp_path: pathlib.Path) -> None:
    cwd = _elsewhere(tmp_path, "incident")
    tool = str(installed.bin / "crashcert")
    ran = _run(
        [tool, "run", "--scenario", "refund", "--fault", "kill@tool.started#2", "--out", "t"],
        cwd=cwd,
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    [trial] = [path.parent for path in (cwd / "t").glob("*/refund/*/history.jsonl")]
    exported = _run([tool, "incident", "export", "--trial", os.path.relpath(trial, cwd)], cwd=cwd)
    assert exported.returncode == 0, exported.stderr
    (cwd / "incident.yaml").write_text(exported.stdout)
    replayed = _run([tool, "replay", "incident.yaml", "--out", "r"], cwd=cwd)
    assert replayed.returncode == 0, replayed.stdout[-3000:] + replayed.stderr[-2000:]
    assert "PASS" in replayed.stdout


PLUGIN_TEST = """
import pytest

@pytest.mark.crashcert(engine="reference", scenarios=["refund"], points=["tool.returned"])
def test_crash_matrix(crashcert_case):
    crashcert_case.check()
"""


def test_pytest_plugin_in_a_scratch_project(installed: Installed, tmp_path: pathlib.Path) -> None:
    project = _elsewhere(tmp_path, "project")
    (project / "test_team.py").write_text(PLUGIN_TEST)
    done = _run(
        [str(installed.bin / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=project
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout
