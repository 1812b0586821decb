"""Hooks the harness sets on a world to act at the moment something happens outside.

Black-box mode: an engine that reports no boundaries can still be killed when the world
answers a model call, applies a tool effect (before the response leaves: the "succeeded
but the answer was lost" case) or accepts a reply. A hook runs synchronously in the
request's thread before the response is written; it may block while the harness kills
the client, or have the response lost instead of sent (harness/world/http.py
lose_response: reset, hang, stream cut). A hook that raises is logged and ignored: the
world keeps serving.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import TypeVar

from harness.world import ledger

logger = logging.getLogger(__name__)

EntryT = TypeVar("EntryT", bound=ledger.Entry)


@dataclasses.dataclass
class WorldHooks:
    """Optional callables; attributes may be replaced while the world runs."""

    # A 200 answer of the model, recorded, not yet sent.
    model_answered: Callable[[ledger.ModelRequest], None] | None = None
    # An effect recorded in the tool ledger, its response (200 or 500) not yet sent.
    tool_effect_applied: Callable[[ledger.ToolEffect], None] | None = None
    # A reply delivered to the sink, its 200 not yet sent.
    reply_accepted: Callable[[ledger.ReplyDelivery], None] | None = None


def call(hook: Callable[[EntryT], None] | None, entry: EntryT, *, name: str) -> None:
    if hook is None:
        return
    try:
        hook(entry)
    except Exception:
        logger.exception("world hook %s failed on entry seq=%s; serving on", name, entry.seq)
