"""Broken variant of the reference engine: its model retry wraps the whole batch of samples,
not the one that failed. The run's model requests so far are its samples (turn 0 to the
turn in flight: the transcript cut before each assistant message, then the whole). A
retryable failure of the sample in flight (the link refused, a 5xx, a 429) makes the retry
start the batch over from the first sample: every earlier sample, which had already
succeeded, is asked again and its usage billed again (added to the usage of the call that
is recorded), as tenacity restarting `_query` re-bills the successful prefix
(SWE-agent/SWE-agent#1492). Without a failure each sample is asked once.

    python tests/quality/engines/rebill_batch_on_retry.py worker   (see its .yaml)
"""

from __future__ import annotations

import collections
import sys
import time
from typing import Any

from reference_engine import cli, errors, model_client

ASSISTANT = "assistant"
_complete = model_client.ModelClient.complete


def samples(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The request of each turn so far: the transcript before each assistant message."""
    cuts = [i for i, message in enumerate(messages) if message.get("role") == ASSISTANT]
    return [messages[:i] for i in cuts] + [list(messages)]


def complete(
    self: model_client.ModelClient, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> model_client.ModelAnswer:
    delays, self.delays = self.delays, []  # each sample tried once; the retry is out here
    try:
        batch = [list(messages)]
        last: Exception | None = None
        for delay in [0.0, *delays]:
            time.sleep(delay)
            spent: collections.Counter[str] = collections.Counter()
            try:
                for sample in batch:
                    answer = _complete(self, sample, tools)
                    spent.update(answer.usage)  # billed as soon as it returns, never undone
            except errors.ModelUnavailable as error:
                last = error
                # BROKEN: the retry restarts the batch, samples that succeeded included
                batch = samples(messages)
                continue
            return model_client.ModelAnswer(answer.message, dict(spent), answer.raw)
        raise errors.ModelUnavailable(f"model unavailable after {len(delays) + 1} tries: {last}")
    finally:
        self.delays = delays


def install() -> None:
    model_client.ModelClient.complete = complete  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
