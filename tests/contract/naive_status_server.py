"""The naive engine's status command as a long-lived status server (CONTRACT.md section 5):
how an engine author reuses the status code they have, importing it once.

    python naive_status_server.py      (see naive_engine_status_server.yaml)
"""

import contextlib
import io
import json
import os
import sys

import naive_engine

for line in sys.stdin:
    question = json.loads(line)
    os.environ["DATABASE_URL"] = question["database_url"]
    sys.argv = ["naive_engine.py", "status", question["run_id"]]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            naive_engine.main("status")
        answer = out.getvalue().strip()
    except Exception as error:  # the harness is told, and asks again
        answer = json.dumps({"error": f"{type(error).__name__}: {error}"})
    print(answer, flush=True)
