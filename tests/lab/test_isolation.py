"""The lab's private network (harness/lab/isolation.py): what it listens on, nobody outside reaches.

Every namespace is entered by a child process (tests/lab/isolated_child.py): this pytest
process keeps the machine's network, which other tests need.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import pwd
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator

import psutil
import pytest

from harness.lab import isolation, postgres

CHILD = pathlib.Path(__file__).with_name("isolated_child.py")
CRASHCERT = str(pathlib.Path(sys.executable).parent / "crashcert")
OTHER_USER = "nobody"
HOST = "127.0.0.1"
CONNECT_TIMEOUT_S = 5
CHILD_TIMEOUT_S = 120
RUN_TIMEOUT_S = 300
POLL_S = 0.02
LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp
# Ours to decide per test: a CI runner's setting must not change what is tested.
CLEAN_ENV = {
    key: value
    for key, value in os.environ.items()
    if key not in ("CRASHCERT_ISOLATION", "CRASHCERT_PG_DSN")
}
RUN_ARGS = ["run", "--scenario", "refund", "--fault", "kill@tool.returned#1"]


def reaches(port: int) -> bool:
    """Whether a connection from this process (the machine's network) is accepted."""
    try:
        with socket.create_connection((HOST, port), timeout=CONNECT_TIMEOUT_S):
            return True
    except ConnectionRefusedError:
        return False


@contextlib.contextmanager
def child(*args: str, python: str = sys.executable, user: str | None = None) -> Iterator[dict]:
    """Start isolated_child.py; yield its JSON line while it holds its sockets open."""
    command = [python, str(CHILD), *args]
    if user is not None:
        command = ["runuser", "-u", user, "--", *command]
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd="/",
        env=CLEAN_ENV,
    )
    try:
        assert process.stdout is not None and process.stdin is not None
        line = process.stdout.readline()
        if not line:
            _, err = process.communicate(timeout=CHILD_TIMEOUT_S)
            pytest.fail(f"{args[0]} child said nothing (exit {process.returncode}):\n{err}")
        said = json.loads(line)
        if "error" in said:
            pytest.skip(f"this platform gives no private network: {said['error']}")
        yield said
    finally:
        with contextlib.suppress(OSError):
            process.stdin.close()  # type: ignore[union-attr]
        try:
            process.wait(timeout=CHILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_once(*args: str, python: str = sys.executable, user: str | None = None) -> dict:
    command = [python, str(CHILD), *args]
    if user is not None:
        command = ["runuser", "-u", user, "--", *command]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        cwd="/",
        env=CLEAN_ENV,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def other_user_python() -> str:
    """An interpreter another local user may run (ours may live in root's home)."""
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("switching to another local user needs root and runuser")
    try:
        pwd.getpwnam(OTHER_USER)
    except KeyError:
        pytest.skip(f"no local user {OTHER_USER!r}")
    for candidate in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        probe = subprocess.run(
            ["runuser", "-u", OTHER_USER, "--", candidate, str(CHILD), "connect", "1"],
            capture_output=True,
            cwd="/",
            timeout=CHILD_TIMEOUT_S,
            check=False,
        )
        if probe.returncode == 0:
            return candidate
    pytest.skip(f"no Python that {OTHER_USER} may run with {CHILD} readable")


# -- (a) one listener ------------------------------------------------------------------------


def test_a_listener_in_the_private_network_is_reachable_only_inside() -> None:
    with child("listen", "isolate") as said:
        assert said["used"] in (isolation.NETNS, isolation.USERNS_NETNS)
        assert said["network"] != os.readlink("/proc/self/ns/net")
        assert said["inside"] is True
        assert reaches(said["port"]) is False


def test_without_isolation_the_same_listener_is_reachable_from_outside() -> None:
    # The control: the probe above can fail, and does when nothing is isolated.
    with child("listen", "stay") as said:
        assert said["used"] == "off" and said["inside"] is True
        assert reaches(said["port"]) is True


def test_a_threaded_process_is_refused_and_stays_where_it_was() -> None:
    said = run_once("threaded")
    assert "threads already run" in said["error"]
    assert said["network"] == os.readlink("/proc/self/ns/net")


# -- (b) another local user ------------------------------------------------------------------


def test_an_unprivileged_user_gets_a_private_network_too() -> None:
    python = other_user_python()
    with child("listen", "isolate", python=python, user=OTHER_USER) as said:
        assert said["used"] == isolation.USERNS_NETNS  # not root: a user namespace first
        assert said["uid"] == pwd.getpwnam(OTHER_USER).pw_uid  # mapped to itself, not root
        assert said["inside"] is True
        assert reaches(said["port"]) is False


def test_another_user_cannot_reach_an_isolated_listener() -> None:
    python = other_user_python()
    with child("listen", "stay") as said:  # the control: nobody reaches what is not isolated
        assert run_once("connect", str(said["port"]), python=python, user=OTHER_USER) == {
            "connected": True
        }
    with child("listen", "isolate") as said:
        assert said["inside"] is True
        assert run_once("connect", str(said["port"]), python=python, user=OTHER_USER) == {
            "connected": False
        }


# -- the --isolation rules --------------------------------------------------------------------


def test_auto_with_an_outside_postgres_stays_off_and_says_why() -> None:
    said = run_once("apply", "auto", "host=db.example dbname=x")
    assert said == {
        "used": "off",
        "note": "network isolation off: the lab's Postgres is outside it "
        "(--pg-dsn or CRASHCERT_PG_DSN)",
        "moved": False,
    }


def test_auto_inside_another_program_stays_off() -> None:
    said = run_once("apply", "auto", "-", "guest")
    assert said["used"] == "off" and "inside another program" in said["note"]
    assert said["moved"] is False


def test_netns_with_an_outside_postgres_is_an_error() -> None:
    said = run_once("apply", "netns", "host=db.example dbname=x")
    assert said["error"].startswith("--isolation netns: cannot give the lab a private network")
    assert said["moved"] is False


def test_auto_isolates_when_the_lab_owns_everything() -> None:
    said = run_once("apply", "auto")
    if said["used"] == "off":
        pytest.skip(f"not here: {said['note']}")
    assert said["used"] in (isolation.NETNS, isolation.USERNS_NETNS)
    assert said["moved"] is True and said["note"] == f"private network ({said['used']})"


# -- (d) the command line refuses what it cannot isolate -------------------------------------


def test_cli_netns_with_pg_dsn_exits_3_with_one_line(tmp_path: pathlib.Path) -> None:
    done = subprocess.run(
        [CRASHCERT, "--isolation", "netns", *RUN_ARGS, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
        env={**CLEAN_ENV, "CRASHCERT_PG_DSN": "host=127.0.0.1 port=1 dbname=none"},
    )
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "crashcert: --isolation netns: cannot give the lab a private network: the lab's "
        "Postgres is outside it (--pg-dsn or CRASHCERT_PG_DSN) (use --isolation auto or off)"
    ]
    assert list(tmp_path.iterdir()) == []  # refused before any trial


# -- (c) a whole lab, and a whole trial ------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.toxiproxy
def test_nothing_a_lab_listens_on_is_reachable_from_outside(toxiproxy_binary: pathlib.Path) -> None:
    with child("lab") as said:
        assert said["used"] in (isolation.NETNS, isolation.USERNS_NETNS)
        assert set(said["ports"]) == {"postgres", "toxiproxy admin", "toxiproxy proxy"}
        assert all(said["inside"].values()), said
        assert {name: reaches(port) for name, port in said["ports"].items()} == {
            name: False for name in said["ports"]
        }


def _listening(pid: int) -> dict[int, str]:
    """Port -> socket inode of every TCP listener in the network namespace of process `pid`."""
    ports = {}
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in pathlib.Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == LISTEN:
                    ports[int(fields[1].rsplit(":", 1)[1], 16)] = fields[9]
    return ports


def _owners(network: str, inodes: set[str]) -> dict[str, str]:
    """Socket inode -> the name of the program in namespace `network` that holds it."""
    owners = {}
    for process in psutil.process_iter(["name"]):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{process.pid}/ns/net") != network:
                continue
            for fd in os.listdir(f"/proc/{process.pid}/fd"):
                with contextlib.suppress(OSError):
                    link = os.readlink(f"/proc/{process.pid}/fd/{fd}")
                    if link.startswith("socket:[") and link[8:-1] in inodes:
                        owners[link[8:-1]] = process.info["name"]
    return owners


@pytest.mark.postgres
@pytest.mark.toxiproxy
@pytest.mark.matrix
def test_cli_run_is_isolated_and_unreachable_while_it_runs(
    tmp_path: pathlib.Path, toxiproxy_binary: pathlib.Path
) -> None:
    ours = os.readlink("/proc/self/ns/net")
    output = tmp_path / "output.txt"
    with output.open("w") as sink:  # not a pipe: nobody reads one while we probe
        run = subprocess.Popen(
            [CRASHCERT, "--isolation", "netns", *RUN_ARGS, "--out", str(tmp_path / "out")],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=CLEAN_ENV,
        )
    probed: dict[int, bool] = {}  # port -> reached from here
    names: dict[int, str] = {}  # port -> the program listening on it, inside
    while run.poll() is None:
        with contextlib.suppress(OSError):
            network = os.readlink(f"/proc/{run.pid}/ns/net")
            if network != ours:
                inside = _listening(run.pid)
                # A port also taken out here would answer for another program: not probed.
                new = set(inside) - set(probed) - set(_listening(os.getpid()))
                owners = _owners(network, {inside[port] for port in new})
                for port in new:
                    names[port] = owners.get(inside[port], "?")
                    probed[port] = reaches(port)
        # Sampling another process's sockets: nothing signals a new listener, but the
        # run's exit ends the wait at once.
        with contextlib.suppress(subprocess.TimeoutExpired):
            run.wait(timeout=POLL_S)
    text = output.read_text()
    assert run.returncode == 0, text
    assert "private network (netns)" in text.splitlines()[0]
    [meta_path] = tmp_path.glob("out/*/refund/*/meta.json")
    assert json.loads(meta_path.read_text())["isolation"] == "netns"
    assert {"postgres", "toxiproxy-server"} <= set(names.values()), names
    assert [port for port, reached in probed.items() if reached] == []


# -- (e) auto with an outside Postgres stays off ---------------------------------------------


@pytest.mark.postgres
@pytest.mark.matrix
def test_cli_auto_with_pg_dsn_stays_off_and_says_so(
    tmp_path: pathlib.Path, pg_server: postgres.Server
) -> None:
    done = subprocess.run(
        [CRASHCERT, *RUN_ARGS, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
        env={**CLEAN_ENV, "CRASHCERT_PG_DSN": pg_server.dsn},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [lab_line] = [line for line in done.stdout.splitlines() if "network isolation" in line]
    assert lab_line.startswith("engine reference: ")
    assert lab_line.endswith(
        "; network isolation off: the lab's Postgres is outside it (--pg-dsn or CRASHCERT_PG_DSN)"
    )
    [meta_path] = tmp_path.glob("*/refund/*/meta.json")
    assert json.loads(meta_path.read_text())["isolation"] == "off"
