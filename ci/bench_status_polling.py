"""Benchmark: the CPU a black-box certification spends asking for run reports, with a
status command per poll and with a status server (one process). Prints figures; asserts
nothing.

    .venv/bin/python ci/bench_status_polling.py

The engine is tests/contract/naive_engine.py (written from the contract alone), certified
as a black box on refund (kills at every world effect). Polling CPU with a command =
the number of status calls x the CPU of one status process (measured alone, 20 times);
with a server = the server process's own CPU. Total = the harness's CPU plus its reaped
children's (workers, status processes) during the certification.
"""

from __future__ import annotations

import pathlib
import resource
import statistics
import sys
import tempfile
from typing import Any

import psutil

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.campaigns import certify  # noqa: E402
from harness.engines import commands  # noqa: E402
from harness.lab import shared  # noqa: E402
from harness.scenario import schema  # noqa: E402

CONTRACT = REPO / "tests" / "contract"


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _children_cpu() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime


def _certify(description: pathlib.Path) -> dict[str, Any]:
    engine = commands.load(description)
    calls = {"status": 0}
    run = engine._run

    def counted(what: str, *args: Any, **kwargs: Any) -> str:
        calls[what] = calls.get(what, 0) + 1
        return run(what, *args, **kwargs)

    engine._run = counted  # type: ignore[method-assign]
    with shared.open_lab(engine) as lab, tempfile.TemporaryDirectory() as out:
        before = _cpu()
        cert = certify.certify(
            lab,
            [("refund", schema.find("refund"))],
            out_dir=pathlib.Path(out),
            engine_ref=str(description),
            mode="blackbox",
            points=["world:tool.effect"],
            time_kills=0,
            jobs=2,
        )
        total = _cpu() - before
        server = engine._server
        server_cpu = 0.0
        if server is not None and server._process is not None:
            times = psutil.Process(server._process.pid).cpu_times()
            server_cpu = times.user + times.system
        result = {
            "level": cert.level.value,
            "trials": len(cert.trials),
            "total_cpu_s": total,
            "status_calls": calls["status"],
            "server_asks": server.asked if server is not None else 0,
            "server_cpu_s": server_cpu,
        }
    return result


def _one_status_cpu(description: pathlib.Path) -> float:
    """CPU of one status process, measured alone: 20 calls on an unknown run (the engine
    connects, queries, prints; an unknown run makes it fail after the query)."""
    engine = commands.load(description)
    with shared.open_lab(engine) as lab:
        dsn = lab.clone_database("cc_bench_status_alone")
        samples = []
        for _ in range(20):
            before = _children_cpu()
            try:
                engine._run("status", engine._argv(engine.description.status, run_id="x"), dsn)
            except Exception:
                pass
            samples.append(_children_cpu() - before)
    return statistics.mean(samples)


def main() -> None:
    command = _certify(CONTRACT / "naive_engine.yaml")
    server = _certify(CONTRACT / "naive_engine_status_server.yaml")
    one = _one_status_cpu(CONTRACT / "naive_engine.yaml")
    polling = command["status_calls"] * one
    print(
        f"black-box certification of refund, naive engine: {command['trials']} trials, "
        f"level {command['level']} (server: {server['level']})"
    )
    print(
        f"status command per poll: {command['status_calls']} calls x {one * 1000:.0f} ms CPU "
        f"= {polling:.2f} s of {command['total_cpu_s']:.2f} s total CPU "
        f"({100 * polling / command['total_cpu_s']:.0f}%)"
    )
    served = server["total_cpu_s"] + server["server_cpu_s"]
    print(
        f"status server: {server['server_asks']} questions, {server['server_cpu_s']:.2f} s CPU "
        f"of {served:.2f} s total ({100 * server['server_cpu_s'] / served:.0f}%)"
    )


if __name__ == "__main__":
    main()
