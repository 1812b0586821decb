"""Client for Toxiproxy's REST API: proxies in front of Postgres, cut, heal, add toxics.

Why not toxiproxy-python for the calls: it keeps host and port in class attributes of one
global `APIConsumer` (one server per process, shared mutable state between threads) and
calls `requests` without a timeout, with no way to pass one through its Proxy methods. A
hung Toxiproxy would then hang a trial forever, and the nemesis must bound every fault it
applies. So this module speaks the same REST API (same names: proxy, upstream, listen,
toxic type/stream/toxicity/attributes) with urllib and a timeout on every request.
"""

from __future__ import annotations

import contextlib
import json
import typing
import urllib.error
import urllib.request

from harness import errors
from harness.postgres import dsn as pg_dsn

DEFAULT_TIMEOUT_S = 5.0
LOOPBACK = "127.0.0.1"
STREAMS = ("downstream", "upstream")
# Toxic types of Toxiproxy v2.12 (https://github.com/Shopify/toxiproxy#toxics).
TOXIC_TYPES = ("latency", "down", "bandwidth", "slow_close", "timeout", "reset_peer", "slicer",
               "limit_data")

Stream = typing.Literal["downstream", "upstream"]
Json = typing.Any


class Toxiproxy:
    """One Toxiproxy server's API at host:port; every request bounded by `timeout_s`."""

    def __init__(self, host: str, port: int, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.host = host
        self.port = port
        self.timeout_s = timeout_s

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
        self, name: str, upstream: str = f"{LOOPBACK}:5432", *, listen: str = f"{LOOPBACK}:0"
    ) -> Proxy:
        """A new enabled proxy; by default listening on a free loopback port."""
        body = {"name": name, "upstream": upstream, "listen": listen, "enabled": True}
        return Proxy(self, self._request("POST", "/proxies", body))

    def get(self, name: str) -> Proxy:
        return Proxy(self, self._request("GET", f"/proxies/{name}"))

    def proxies(self) -> list[Proxy]:
        found = self._request("GET", "/proxies")
        return [Proxy(self, info) for info in found.values()]

    def reset(self) -> None:
        """Enable every proxy and remove every toxic."""
        self._request("POST", "/reset")

    def _request(self, method: str, path: str, body: Json = None, *, raw: bool = False) -> Json:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.api_url + path, data=data, method=method,
            headers={"Content-Type": "application/json"} if data is not None else {},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as exc:
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
            "name": toxic_name, "type": type, "stream": stream, "toxicity": toxicity,
            "attributes": dict(attributes or {}),
        }
        self._client._request("POST", f"/proxies/{self.name}/toxics", body)
        return toxic_name

    def toxics(self) -> list[Json]:
        return list(self._client._request("GET", f"/proxies/{self.name}/toxics"))

    def remove_toxic(self, name: str) -> None:
        self._client._request("DELETE", f"/proxies/{self.name}/toxics/{name}")

    def remove_toxics(self) -> None:
        for toxic in self.toxics():
            self.remove_toxic(toxic["name"])

    def delete(self) -> None:
        self._client._request("DELETE", f"/proxies/{self.name}")

    def _set_enabled(self, enabled: bool) -> None:
        self._client._request("POST", f"/proxies/{self.name}", {"enabled": enabled})
        self.enabled = enabled
