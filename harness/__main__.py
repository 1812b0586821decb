"""`python -m harness` is `crashcert`."""

from __future__ import annotations

from harness.cli import main

if __name__ == "__main__":
    main.entry()
