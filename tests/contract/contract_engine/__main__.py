"""Command line of the contract engine (engine.yaml runs it as `python -m contract_engine`)."""

from __future__ import annotations

import json
import sys

from . import store


def main(argv: list[str]) -> None:
    command = argv[0] if argv else ""
    if command == "migrate":
        store.migrate()
    elif command == "submit":
        print(json.dumps({"run_id": store.submit(json.load(sys.stdin))}))
    elif command == "status" and len(argv) == 2:
        print(json.dumps(store.report(argv[1])))
    elif command == "export" and len(argv) == 2:
        print(json.dumps(store.export(argv[1])))
    elif command == "worker":
        from .agent import Worker

        Worker().run_forever()
    else:
        raise SystemExit(
            "usage: python -m contract_engine "
            "migrate | worker | submit | status RUN_ID | export RUN_ID"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
