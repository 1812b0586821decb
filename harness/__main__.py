"""`python -m harness` is `crashcert`."""

from __future__ import annotations

from harness import cli

if __name__ == "__main__":
    cli.entry()
