"""Broken variant of the reference engine: after a crash in the delivery window it asks
the sink whether the reply arrived, and reads a sink that cannot answer (405) as "not
delivered", so it posts the reply again without knowing. When the crash came before the
first POST left, the customer gets the reply once, by luck.

    python tests/quality/engines/assume_not_delivered.py worker   (see assume_not_delivered.yaml)
"""

from __future__ import annotations

import sys

from reference_engine import cli, decide

SEND = "send"
UNCERTAIN = "uncertain"
_reply_after_query = decide.reply_after_query


def reply_after_query(status_code: int) -> str:
    verdict = _reply_after_query(status_code)
    # BROKEN: a sink that cannot be asked is taken to say it never got the reply
    return SEND if verdict == UNCERTAIN else verdict


def install() -> None:
    # the worker looks reply_after_query up on the module at call time
    decide.reply_after_query = reply_after_query


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
