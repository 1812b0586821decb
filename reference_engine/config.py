"""Settings from the environment (harness/CONTRACT.md section 1) plus the engine's own."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Mapping

import pydantic

from reference_engine import errors


class Settings(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(frozen=True)

    database_url: str
    openai_base_url: str | None = None
    openai_api_key: str = "crashcert"
    model: str = "crashcert-scripted"
    tools_url: str | None = None
    tools_mcp_url: str | None = None
    reply_url: str | None = None
    worker_id: str
    lease_ms: int = pydantic.Field(default=30_000, ge=50)
    control: str | None = None
    poll_ms: int = pydantic.Field(default=50, ge=1)
    backoff_ms: int = pydantic.Field(default=50, ge=1)
    max_backoff_ms: int = pydantic.Field(default=2_000, ge=1)
    http_timeout_ms: int = pydantic.Field(default=10_000, ge=10)
    retry_limit: int = pydantic.Field(default=5, ge=0)
    redact: bool = False
    retention_s: int = pydantic.Field(default=7 * 24 * 3600, ge=0)
    # Ask the model for server-sent events (reference_engine/engine_stream.yaml).
    stream: bool = False


_ENV: dict[str, str] = {
    "DATABASE_URL": "database_url",
    "OPENAI_BASE_URL": "openai_base_url",
    "OPENAI_API_KEY": "openai_api_key",
    "CRASHCERT_MODEL": "model",
    "CRASHCERT_TOOLS_URL": "tools_url",
    "CRASHCERT_TOOLS_MCP_URL": "tools_mcp_url",
    "CRASHCERT_REPLY_URL": "reply_url",
    "CRASHCERT_WORKER_ID": "worker_id",
    "CRASHCERT_LEASE_MS": "lease_ms",
    "CRASHCERT_CONTROL": "control",
    "CRASHCERT_POLL_MS": "poll_ms",
    "CRASHCERT_BACKOFF_MS": "backoff_ms",
    "CRASHCERT_MAX_BACKOFF_MS": "max_backoff_ms",
    "CRASHCERT_HTTP_TIMEOUT_MS": "http_timeout_ms",
    "CRASHCERT_RETRY_LIMIT": "retry_limit",
    "CRASHCERT_REDACT": "redact",
    "CRASHCERT_RETENTION_S": "retention_s",
    "CRASHCERT_STREAM": "stream",
}


def from_env(env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
    env = os.environ if env is None else env
    values: dict[str, object] = {field: env[name] for name, field in _ENV.items() if env.get(name)}
    values.setdefault("worker_id", f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}")
    values.update({key: value for key, value in overrides.items() if value is not None})
    if "database_url" not in values:
        raise errors.ConfigError("DATABASE_URL is not set")
    try:
        return Settings.model_validate(values)
    except pydantic.ValidationError as error:
        raise errors.ConfigError(f"invalid engine settings: {error}") from None
