"""Redaction hook for the event trail: with CRASHCERT_REDACT=1 prompts and outputs are
replaced by a hash and a length, so the trail can leave the building."""

from __future__ import annotations

import hashlib
import json
from typing import Any

SENSITIVE = frozenset({"content", "result", "arguments", "messages", "outcome", "error_body"})


def fingerprint(value: Any) -> dict[str, Any]:
    raw = json.dumps(value, sort_keys=True, default=str).encode()
    return {"redacted": True, "sha256": hashlib.sha256(raw).hexdigest(), "len": len(raw)}


def redact(data: dict[str, Any]) -> dict[str, Any]:
    return {
        key: fingerprint(value) if key in SENSITIVE and value is not None else value
        for key, value in data.items()
    }
