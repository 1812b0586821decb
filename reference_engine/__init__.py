"""crashcert's reference engine: a crash-safe agent executor checkpointing to PostgreSQL.

It talks to the outside world only through the protocols of harness/CONTRACT.md and never
imports the harness.
"""
