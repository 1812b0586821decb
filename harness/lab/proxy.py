"""Client for Toxiproxy's REST API: proxies in front of Postgres, cut, heal, add toxics.

Why not toxiproxy-python for the calls: it keeps host and port in class attributes of one
global `APIConsumer` (one server per process, shared mutable state between threads) and
calls `requests` without a timeout, with no way to pass one through its Proxy methods. A
hung Toxiproxy would then hang a trial forever, and the nemesis must bound every fault it
applies. So this module speaks the same REST API (same names: proxy, upstream, listen,
toxic type/stream/toxicity/attributes) with urllib and a timeout on every request.

The client also keeps a `Ledger` of the proxies it made: the admin API answers every local
user, so harness.lab.proxy_audit compares the server with this ledger to see tampering.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import threading
import time
import typing
import urllib.error
import urllib.request

from harness import errors
from harness.lab import proxy_ports
from harness.lab.postgres import dsn as pg_dsn

DEFAULT_TIMEOUT_S = 5.0
LOOPBACK = "127.0.0.1"
STREAMS = ("downstream", "upstream")
# Toxic types of Toxiproxy v2.12 (https://github.com/Shopify/toxiproxy#toxics).
TOXIC_TYPES = (
    "latency",
    "down",
    "bandwidth",
    "slow_close",
    "timeout",
    "reset_peer",
    "slicer",
    "limit_data",
)

HTTP_NOT_FOUND = 404
# Toxiproxy's answer when the listen port is someone else's (Go's net.Listen error text).
ADDRESS_IN_USE = "address already in use"
PORT_TRIES = 20

Stream = typing.Literal["downstream", "upstream"]
Json = typing.Any


def listens_on_loopback(listen: str) -> bool:
    """Whether a `host:port` listen address takes loopback connections only (127/8, ::1).

    An empty host binds every interface, and a name is not an address we can vouch for.
    """
    host = listen.rsplit(":", 1)[0].strip("[]")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


class Ledger:
    """What one client made on its server and has not deleted, shared by every trial that
    holds the client; and the foreign proxies audits removed, with when (monotonic)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # None: claimed before its POST (or the POST's fate is unknown), so a concurrent
        # audit never takes a proxy being made for foreign.
        self._made: dict[str, Proxy | None] = {}
        # When each deleted one was forgotten: a listing taken before that may still show it.
        self._forgotten: dict[str, float] = {}
        self._removed: list[tuple[float, str, str]] = []  # (time, name, evidence)

    def claim(self, name: str) -> None:
        with self._lock:
            if name in self._made:
                raise errors.CrashcertError(f"proxy {name!r} was already made by this client")
            self._made[name] = None

    def record(self, proxy: Proxy) -> None:
        with self._lock:
            self._made[proxy.name] = proxy

    def forget(self, name: str) -> None:
        with self._lock:
            if self._made.pop(name, False) is not False:
                self._forgotten[name] = time.monotonic()

    def made(self) -> dict[str, Proxy | None]:
        with self._lock:
            return dict(self._made)

    def ours(self, *, listed_at: float) -> set[str]:
        """Names a listing started at `listed_at` (monotonic) may show of ours: made and
        not deleted, or deleted since (the listing may predate the delete)."""
        with self._lock:
            recent = {name for name, t in self._forgotten.items() if t >= listed_at}
            return set(self._made) | recent

    def note_removed(self, name: str, evidence: str) -> None:
        with self._lock:
            self._removed.append((time.monotonic(), name, evidence))

    def removed_since(self, since: float) -> list[str]:
        """Evidence of foreign proxies removed at or after `since`, one line per name."""
        with self._lock:
            found = {name: line for t, name, line in reversed(self._removed) if t >= since}
        return list(reversed(found.values()))


class Toxiproxy:
    """One Toxiproxy server's API at host:port; every request bounded by `timeout_s`."""

    def __init__(self, host: str, port: int, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.host = host
        self.port = port
        self.timeout_s = timeout_s
        self.ledger = Ledger()
        self.ports = proxy_ports.shared()

    @property
    def api_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def version(self) -> str:
        return str(self._request("GET", "/version", raw=True)).strip()

    def answers(self) -> bool:
        try:
            self.version()
        except errors.CrashcertError:
            return False
        return True

    def create(
        self, name: str, upstream: str = f"{LOOPBACK}:5432", *, listen: str | None = None
    ) -> Proxy:
        """A new enabled proxy, on a loopback port of its own by default (one it keeps while
        cut: harness/lab/proxy_ports.py); never beyond loopback: a proxy in front of the
        lab's Postgres must not republish it to the network."""
        if listen is not None and not listens_on_loopback(listen):
            raise errors.CrashcertError(
                f"proxy {name!r}: listen address {listen!r} is not loopback (127.0.0.1)"
            )
        self.ledger.claim(name)
        book = None if listen is not None else self.ports
        for _ in range(PORT_TRIES):
            port = None if book is None else book.take(self._held_as(name))
            address = listen or f"{LOOPBACK}:{port or 0}"
            body = {"name": name, "upstream": upstream, "listen": address, "enabled": True}
            try:
                made = Proxy(self, self._request("POST", "/proxies", body))
            except errors.EnvironmentProblem:
                raise  # no answer: it may exist, so name and port stay claimed (never foreign)
            except errors.CrashcertError as error:
                if book is not None and ADDRESS_IN_USE in str(error):
                    book.refused(self._held_as(name))
                    continue
                self._forget(name)  # refused: not ours (a 409 means someone else's)
                raise
            self.ledger.record(made)
            return made
        self._forget(name)
        raise errors.EnvironmentProblem(
            f"proxy {name!r}: {PORT_TRIES} ports in a row were taken by other processes"
        )

    def _held_as(self, name: str) -> str:
        # One book serves every client and store server: names are this server's own.
        return f"{self.api_url}/{name}"

    def _forget(self, name: str) -> None:
        self.ledger.forget(name)
        if self.ports is not None:
            self.ports.release(self._held_as(name))

    def get(self, name: str) -> Proxy:
        return Proxy(self, self._request("GET", f"/proxies/{name}"))

    def proxies(self) -> list[Proxy]:
        found = self._request("GET", "/proxies")
        return [Proxy(self, info) for info in found.values()]

    def listing(self) -> dict[str, Json]:
        """The server's own view: name -> {name, listen, upstream, enabled, toxics}."""
        return dict(self._request("GET", "/proxies"))

    def delete(self, name: str) -> None:
        """Delete a proxy by name; one already gone is fine."""
        self._request("DELETE", f"/proxies/{name}", missing_ok=True)
        self._forget(name)

    def reset(self) -> None:
        """Enable every proxy and remove every toxic."""
        self._request("POST", "/reset")

    def _request(
        self,
        method: str,
        path: str,
        body: Json = None,
        *,
        raw: bool = False,
        missing_ok: bool = False,
    ) -> Json:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.api_url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"} if data is not None else {},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as exc:
            if missing_ok and exc.code == HTTP_NOT_FOUND:
                return None
            detail = exc.read().decode(errors="replace").strip()
            raise errors.CrashcertError(
                f"Toxiproxy {method} {path} answered {exc.code}: {detail}"
            ) from exc
        except (urllib.error.URLError, OSError) as exc:  # refused, timed out, reset
            raise errors.EnvironmentProblem(
                f"Toxiproxy at {self.api_url} did not answer {method} {path}: {exc}"
            ) from exc
        if raw:
            return text
        return json.loads(text) if text.strip() else None


class Proxy:
    """One proxy: a listening port that forwards to `upstream` until cut or poisoned."""

    def __init__(self, client: Toxiproxy, info: Json) -> None:
        self._client = client
        self.name: str = info["name"]
        self.upstream: str = info["upstream"]
        self.listen: str = info["listen"]
        self.enabled: bool = bool(info.get("enabled", True))
        self.toxic_names: set[str] = set()  # added through this object and not yet removed

    @property
    def listen_host(self) -> str:
        return self.listen.rsplit(":", 1)[0] or LOOPBACK

    @property
    def listen_port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])

    def dsn_through(self, dsn: str) -> str:
        """The same database and credentials, reached through this proxy."""
        return pg_dsn.with_address(dsn, host=self.listen_host, port=self.listen_port)

    def disable(self) -> None:
        """Cut: close every open connection and refuse new ones."""
        self._set_enabled(False)

    def enable(self) -> None:
        """Heal a cut (toxics stay until removed)."""
        self._set_enabled(True)

    @contextlib.contextmanager
    def cut(self) -> typing.Iterator[None]:
        self.disable()
        try:
            yield
        finally:
            self.enable()

    def add_toxic(
        self,
        type: str,
        *,
        stream: Stream = "downstream",
        attributes: typing.Mapping[str, int | float] | None = None,
        name: str | None = None,
        toxicity: float = 1.0,
    ) -> str:
        """Add a toxic; returns its name (default `<type>_<stream>`)."""
        if type not in TOXIC_TYPES:
            raise errors.CrashcertError(f"unknown toxic type {type!r}; known: {TOXIC_TYPES}")
        if stream not in STREAMS:
            raise errors.CrashcertError(f"toxic stream must be one of {STREAMS}, not {stream!r}")
        toxic_name = name or f"{type}_{stream}"
        body = {
            "name": toxic_name,
            "type": type,
            "stream": stream,
            "toxicity": toxicity,
            "attributes": dict(attributes or {}),
        }
        self._client._request("POST", f"/proxies/{self.name}/toxics", body)
        self.toxic_names.add(toxic_name)
        return toxic_name

    def toxics(self) -> list[Json]:
        return list(self._client._request("GET", f"/proxies/{self.name}/toxics"))

    def remove_toxic(self, name: str) -> None:
        self._client._request("DELETE", f"/proxies/{self.name}/toxics/{name}")
        self.toxic_names.discard(name)

    def remove_toxics(self) -> None:
        for toxic in self.toxics():
            self.remove_toxic(toxic["name"])

    def delete(self) -> None:
        self._client.delete(self.name)

    def repoint(self, upstream: str) -> None:
        """Forward to `upstream` from now on (a failover); open connections are closed."""
        self._client._request("POST", f"/proxies/{self.name}", {"upstream": upstream})
        self.upstream = upstream

    def _set_enabled(self, enabled: bool) -> None:
        self._client._request("POST", f"/proxies/{self.name}", {"enabled": enabled})
        self.enabled = enabled
