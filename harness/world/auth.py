"""The world answers only the trial's own engine: a per-trial secret in every URL it hands out.

The world's services listen on loopback, where any local user can reach them: without a
credential another user could post the scripted reply to the sink during a trial and the
checkers would blame the engine for a second delivery. Every base URL a worker is given
(`OPENAI_BASE_URL`, `CRASHCERT_TOOLS_URL`, `CRASHCERT_TOOLS_MCP_URL`, `CRASHCERT_REPLY_URL`)
starts its path with `/<secret>`, and `OPENAI_API_KEY` is the same secret (CONTRACT.md
section 1), so an engine that uses the URLs it is given sends it without knowing it.

A request whose path does not start with the secret is refused (403) before any handler or
hook runs: it never reaches a ledger the checkers count, it is recorded apart as a
ForeignRequest (the first MAX_RECORDED of them: a flood must not grow the history), and
the checkers' evidence says one was refused.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time

from harness.world import ledger

MAX_RECORDED = 100
# What a ForeignRequest keeps of the path: enough to tell what was tried.
MAX_PATH_CHARS = 200


def new_secret() -> str:
    # Hex: safe in a URL path segment and in an Authorization header, nothing to escape.
    return secrets.token_hex(16)


class Guard:
    """One trial's secret and its record of refused requests, shared by the world's services."""

    def __init__(self, secret: str | None = None) -> None:
        self.secret = secret or new_secret()
        self._prefix = f"/{self.secret}"
        self._lock = threading.Lock()
        self._refused: list[ledger.ForeignRequest] = []
        self._count = 0

    @property
    def prefix(self) -> str:
        """The path every URL of this world starts with."""
        return self._prefix

    def admit(self, path: str) -> str | None:
        """The path without the secret when it carries it (`/<secret>/v1/models` ->
        `/v1/models`), else None: the request is foreign."""
        head, slash, rest = path[1:].partition("/")
        if not path.startswith("/") or not hmac.compare_digest(head, self.secret):
            return None
        return slash + rest if slash else "/"

    def refuse(self, service: str, method: str, path: str) -> None:
        """Record a request that did not carry the secret (its path never stores it)."""
        with self._lock:
            self._count += 1
            if len(self._refused) >= MAX_RECORDED:
                return
            self._refused.append(
                ledger.ForeignRequest(
                    seq=self._count,
                    t=time.time(),
                    service=service,
                    method=method[:16],
                    path=path[:MAX_PATH_CHARS],
                )
            )

    @property
    def refused_count(self) -> int:
        with self._lock:
            return self._count

    def refused(self) -> list[ledger.ForeignRequest]:
        with self._lock:
            return list(self._refused)


REFUSED_MESSAGE = (
    "this world serves one crashcert trial's engine: use the URLs it was given "
    "(their path starts with the trial's secret)"
)
