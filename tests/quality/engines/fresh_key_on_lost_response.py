"""Broken variant of the reference engine: when a tool's response is lost (reset, or no
answer before the timeout), it sends the call again at once under a fresh idempotency key,
so a service that honours keys cannot tell it is the same call.

    python tests/quality/engines/fresh_key_on_lost_response.py worker
    (see fresh_key_on_lost_response.yaml)
"""

from __future__ import annotations

import sys

from reference_engine import cli, services

_post = services.Services._post


def _post_again(self: services.Services, url: str, body: bytes, key: str) -> services.Reply:
    try:
        return _post(self, url, body, key)
    except services.NoAnswer:
        if "/tools/" not in url:
            raise
        # BROKEN: "the answer was lost, so try again" as a new request, with a new key
        return _post(self, url, body, f"{key}-retry")


def install() -> None:
    services.Services._post = _post_again  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
