"""A child process for tests/lab/test_isolation.py: the test process itself must keep the
machine's network, so whatever enters a private network does it here.

    python isolated_child.py listen isolate|stay   # one loopback listener
    python isolated_child.py lab                   # a whole lab: Postgres, Toxiproxy, a proxy
    python isolated_child.py threaded              # tries to isolate with a second thread
    python isolated_child.py apply MODE [DSN|-] [owner|guest]   # the --isolation rules
    python isolated_child.py connect PORT          # can this process reach 127.0.0.1:PORT?

Each prints one JSON line; `listen` and `lab` then hold everything open until stdin closes.
`listen`, `threaded`, `apply` and `connect` need only the standard library and
harness.lab.isolation, so any Python (one another user may run) can run them.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import sys
import threading

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

from harness import errors
from harness.lab import isolation

HOST = "127.0.0.1"
CONNECT_TIMEOUT_S = 5


def reaches(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=CONNECT_TIMEOUT_S):
            return True
    except OSError:
        return False


def say(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def network() -> str:
    return os.readlink("/proc/self/ns/net")


def listen(isolate: bool) -> None:
    used = "off"
    if isolate:
        try:
            used = isolation.enter_private_network()
        except errors.EnvironmentProblem as error:
            say(error=str(error))
            return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind((HOST, 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        say(used=used, port=port, inside=reaches(port), uid=os.geteuid(), network=network())
        sys.stdin.read()


def lab() -> None:
    from harness.engines import commands
    from harness.lab import shared

    try:
        used = isolation.enter_private_network()
    except errors.EnvironmentProblem as error:
        say(error=str(error))
        return
    with shared.open_lab(commands.find("reference"), require_toxiproxy=True) as opened:
        assert opened.toxiproxy is not None  # required above
        made = opened.toxiproxy.create("isolation-probe", f"{HOST}:{opened.pg.port}")
        ports = {
            "postgres": opened.pg.port,
            "toxiproxy admin": opened.toxiproxy.port,
            "toxiproxy proxy": made.listen_port,
        }
        say(used=used, ports=ports, inside={name: reaches(port) for name, port in ports.items()})
        sys.stdin.read()
        made.delete()


def threaded() -> None:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        say(used=isolation.enter_private_network(), network=network())
    except errors.EnvironmentProblem as error:
        say(error=str(error), network=network())
    finally:
        stop.set()
        thread.join()


def apply(mode: str, dsn: str, role: str) -> None:
    before = network()
    try:
        state = isolation.apply(
            mode, pg_dsn=None if dsn == "-" else dsn, owns_process=role == "owner"
        )
    except errors.CrashcertError as error:
        say(error=str(error), moved=network() != before)
        return
    say(used=state.used, note=state.note, moved=network() != before)


def main(argv: list[str]) -> None:
    command, args = argv[0], argv[1:]
    if command == "listen":
        listen(args == ["isolate"])
    elif command == "lab":
        lab()
    elif command == "threaded":
        threaded()
    elif command == "apply":
        apply(args[0], args[1] if len(args) > 1 else "-", args[2] if len(args) > 2 else "owner")
    elif command == "connect":
        say(connected=reaches(int(args[0])))
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
