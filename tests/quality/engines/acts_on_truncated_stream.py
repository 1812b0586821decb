"""Broken variant of the reference engine in its streaming mode: when the model's stream
ends early (no finish reason, no usage), it takes what was assembled so far for the answer
and acts on its tool calls.

    python tests/quality/engines/acts_on_truncated_stream.py worker
    (see acts_on_truncated_stream.yaml)
"""

from __future__ import annotations

import sys
from typing import Any

from reference_engine import cli, model_client


def assemble(chunks: Any) -> model_client.ModelAnswer:
    # BROKEN: a stream that stopped is taken for a whole answer
    return model_client.collect(chunks).answer()


def install() -> None:
    # the client looks assemble up on the module at call time
    model_client.assemble = assemble


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
