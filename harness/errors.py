"""The one error type of the harness package, with a clear message for the user."""

from __future__ import annotations


class CrashcertError(Exception):
    """A problem the user can act on: bad input, a missing binary, an unreachable service."""


class EnvironmentProblem(CrashcertError):
    """The machine cannot provide a real part (Postgres, Toxiproxy, Docker). Verdict ERROR."""
