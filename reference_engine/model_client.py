"""The model over the official `openai` client (retries off: the engine owns retries).

Imported only by the worker, so the short-lived CLI commands never load `openai`.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import openai

from reference_engine import errors

DEFAULT_BASE_URL = "https://api.openai.com/v1"  # the official client's own default
# One client per process, built at import: loading the TLS trust store and the client's
# lazily imported resources cost ~0.15 s (more under load). A worker forked from a warm
# server inherits both, and each ModelClient is a cheap copy sharing its connection pool
# (no connection is opened before the fork, so none is shared across processes).
_PROTOTYPE = openai.OpenAI(api_key="unset", base_url=DEFAULT_BASE_URL, max_retries=0)
_PROTOTYPE.chat.completions  # noqa: B018 - the attribute imports the chat resources


@dataclasses.dataclass(frozen=True)
class ModelAnswer:
    message: dict[str, Any]
    usage: dict[str, int]
    raw: dict[str, Any]


class ModelClient:
    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str,
        model: str,
        timeout_s: float,
        delays: list[float],
    ) -> None:
        self.model = model
        self.delays = delays
        self.client = _PROTOTYPE.with_options(
            base_url=base_url or DEFAULT_BASE_URL,
            api_key=api_key,
            timeout=timeout_s,
        )

    def close(self) -> None:
        """Nothing to close: the connection pool is the process's, shared by every copy of
        the prototype, and closing it would break the next ModelClient in this process."""

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelAnswer:
        last: Exception | None = None
        for delay in [0.0, *self.delays]:
            time.sleep(delay)
            try:
                extra: dict[str, Any] = {"tools": tools} if tools else {}
                completion = self.client.chat.completions.create(
                    model=self.model,
                    messages=messages,  # type: ignore[arg-type]
                    **extra,
                )
            except (
                openai.APIConnectionError,
                openai.RateLimitError,
                openai.InternalServerError,
            ) as error:
                last = error  # not processed (or overloaded): the same call may be retried
                continue
            except openai.APIStatusError as error:
                if error.status_code >= 500 or error.status_code in (408, 409, 429):
                    last = error
                    continue
                raise errors.ModelRefused(
                    f"model refused the request ({error.status_code}): {error.message}"
                ) from None
            return _answer(completion)
        raise errors.ModelUnavailable(
            f"model unavailable after {len(self.delays) + 1} tries: {last}"
        )


def _answer(completion: Any) -> ModelAnswer:
    try:
        message = completion.choices[0].message.model_dump(mode="json", exclude_none=True)
    except (IndexError, AttributeError) as error:
        raise errors.WorldError(f"model answered without a choice: {error}") from None
    usage_obj = completion.usage
    usage = {
        "prompt_tokens": int(getattr(usage_obj, "prompt_tokens", 0) or 0),
        "completion_tokens": int(getattr(usage_obj, "completion_tokens", 0) or 0),
        "total_tokens": int(getattr(usage_obj, "total_tokens", 0) or 0),
    }
    return ModelAnswer(message=message, usage=usage, raw=completion.model_dump(mode="json"))
