"""Listen ports for the lab's proxies and the engines' store servers, chosen by the harness
so that a cut never gives one away and no server is handed a port the kernel hands out.

A cut disables its proxy, and Toxiproxy closes the listener: the port is free until the
heal. Left to the kernel (port 0), a proxy made meanwhile for another trial could be handed
that very port, and the cut worker's retries would reach that trial's service, or on a
database link its own database through the other trial's proxy, the cut bypassed. A
certify at `--jobs auto` hit it: one trial's model request, sent during its model_cut, was
refused by another trial's tools service (no secret), and the run failed on the 403.

So a proxy made without a port gets one from a range below the kernel's ephemeral range
(where bind to port 0 and outgoing connections take theirs) and keeps it, cut or not, until
it is deleted. In the lab's own network namespace nothing else binds there; without one, a
port another process holds is skipped, and a stranger could still take a cut proxy's port
while it is free (the harness's isolation-off threat model: docs/security.md).

An engine's store server (harness/lab/store_links.py) takes its ports from the same book:
a port probed free in the ephemeral range could be given, before the server binds it, to
any process's outgoing connection or to a port the server itself asks the kernel for (a
CI run: Temporal's dev server bound its worker service to the metrics port we had picked,
panicked, and the trial ERRORed).
"""

from __future__ import annotations

import pathlib
import random
import threading

from harness import errors

EPHEMERAL_RANGE = pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range")
# The kernel's default ephemeral range starts at 32768; ours is the 12,000 ports below it.
SPAN = 12_000
LOWEST = 1024  # never a privileged port


def below_ephemeral(path: pathlib.Path = EPHEMERAL_RANGE) -> range | None:
    """The ports the book hands out, or None where the ephemeral range leaves no room."""
    try:
        first = int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first = 32768  # Linux's default; elsewhere no such file
    low = max(LOWEST, first - SPAN)
    return range(low, first) if first - low >= 100 else None


_shared: PortBook | None = None
_shared_lock = threading.Lock()


def shared() -> PortBook | None:
    """The process's one book, None where the ephemeral range leaves no room: proxies and
    store servers take from it, so none is handed a port another of ours holds."""
    global _shared
    with _shared_lock:
        if _shared is None:
            ports = below_ephemeral()
            if ports is None:
                return None
            _shared = PortBook(ports)
        return _shared


class PortBook:
    """Which ports of `ports` this process's proxies hold, by proxy name."""

    def __init__(self, ports: range, *, seed: int | None = None) -> None:
        self._ports = ports
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}
        self._refused: set[int] = set()  # someone else listens there
        # A random start: two harnesses without a private network seldom try the same ports.
        self._next = random.Random(seed).randrange(len(ports))

    def take(self, name: str) -> int:
        """A port no proxy of ours holds, held for `name` from now on."""
        with self._lock:
            if name in self._held:
                raise errors.CrashcertError(f"proxy {name!r} already holds port {self._held[name]}")
            held = set(self._held.values())
            for _ in range(len(self._ports)):
                port = self._ports[self._next]
                self._next = (self._next + 1) % len(self._ports)
                if port not in held and port not in self._refused:
                    self._held[name] = port
                    return port
        raise errors.EnvironmentProblem(
            f"no free proxy port left in {self._ports.start}-{self._ports.stop - 1}"
        )

    def refused(self, name: str) -> None:
        """The port taken for `name` is someone else's: never try it again."""
        with self._lock:
            port = self._held.pop(name, None)
            if port is not None:
                self._refused.add(port)

    def release(self, name: str) -> None:
        """`name` was deleted (or never made): its port may serve another proxy."""
        with self._lock:
            self._held.pop(name, None)

    def refuses(self, port: int) -> bool:
        """Whether the book will never offer `port` again (someone else's)."""
        with self._lock:
            return port in self._refused

    def held(self) -> dict[str, int]:
        with self._lock:
            return dict(self._held)
