"""Benchmark: how fast a worker of an engine in its own virtualenv starts, with and
without `preload` (the fork server runs under the engine's interpreter). Prints figures;
asserts nothing.

    .venv/bin/python ci/bench_worker_start.py [--workers 10]

The engine's virtualenv reaches the `openai` package of ours through a .pth file, as a
framework would be installed there; its worker imports it (about a second) and prints one
line. Start time = process start requested -> that line in the worker's log.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.lab import processes, spawner  # noqa: E402

ENGINE = "import openai\nprint('ready', flush=True)\n"


def _venv(root: pathlib.Path) -> str:
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [site] = (venv / "lib").glob("python3*/site-packages")
    (site / "ours.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return str(venv / "bin" / "python")


def _starts(
    python: str, root: pathlib.Path, count: int, server: spawner.ForkServer | None
) -> list[float]:
    seconds = []
    for n in range(count):
        started = time.monotonic()
        worker = processes.Worker(
            f"w{n}-{'fork' if server else 'exec'}",
            [python, "-m", "venv_engine"],
            env={"PATH": os.environ["PATH"]},
            log_dir=root,
            cwd=str(root),
            forkserver=server,
        )
        while "ready" not in worker.log_path.read_text():
            time.sleep(0.002)
        seconds.append(time.monotonic() - started)
        worker.reap(timeout=10)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        python = _venv(root)
        (root / "venv_engine.py").write_text(ENGINE)
        cold = _starts(python, root, args.workers, None)
        server = spawner.ForkServer(["openai"], cwd=str(root), python=python)
        try:
            warm = _starts(python, root, args.workers, server)
        finally:
            server.close()
    print(f"engine interpreter: {python} (its own virtualenv)")
    print(f"worker start without preload: median {statistics.median(cold) * 1000:.0f} ms")
    print(
        f"worker start with preload (fork server under that interpreter): "
        f"median {statistics.median(warm) * 1000:.0f} ms, max {max(warm) * 1000:.0f} ms"
    )
    print(f"ratio: {statistics.median(cold) / statistics.median(warm):.0f}x")


if __name__ == "__main__":
    main()
