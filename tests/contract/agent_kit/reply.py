"""The reply to the customer, posted to the world's sink. Naive: no key, sent on every
attempt. Hardened: key `<run>:reply`, marked `sending` before it leaves; after a crash the
sink is asked by key, or the run ends `delivery_uncertain` where it cannot be asked."""

from __future__ import annotations

import crashcert_probe as probe
from agent_kit import store, world


def deliver(run_key: str, content: str, *, hardened: bool) -> tuple[str, str | None]:
    """Post the reply: (delivery state, key)."""
    base = world.reply_url()
    body = {"run_id": run_key, "content": content}
    if not hardened:
        world.http(base, body)
        return "delivered", None
    key = f"{run_key}:reply"
    found = store.execute("outbox_get", run_key=run_key)
    if found and found[0][1] == "delivered":
        return "delivered", key
    if found:
        asked, _ = world.http(f"{base}/{key}")
        if asked == 200:
            return "delivered", key
        if asked != 404:
            return "uncertain", key  # the sink cannot be asked: never resend blindly
    else:
        with store.committed("reply.sending", run_key, key=key) as db:
            db.execute(store.sql("outbox_sending"), {"run_key": run_key, "key": key})
    world.http(base, body, key)
    probe.report("reply.sent", run_key, key=key)
    return "delivered", key
