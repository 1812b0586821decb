"""The dated certification table (docs/frameworks.md): one row per mode of a
certification, with the framework and its installed version, the level (capped by what
was run, and saying so), the fault classes that level rests on (levels.required_classes:
each one run at every point it applies), the fault classes run, the coverage (required
trials struck / required), every invariant that did not hold and why, the date and
crashcert's version. `crashcert certify --markdown` writes the rows; pasting them under
HEADER regenerates it.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib.metadata
from typing import Any

from harness.checkers import levels
from harness.checkers import verdict as verdict_module

# A certification is a harness.campaigns.certify.Certification, typed Any here: certify
# imports this module, and the harness keeps no import cycle, not even for type checking.
Certification = Any

HEADER = (
    "| framework | version | variant | mode | level | level rests on | faults run | coverage "
    "| invariants not held, and why | date | crashcert |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)
# A table cell, not a report: the first problem is cut here (the full one is in the JSON).
WHY_CHARS = 160


def installed(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def framework_of(engine: Any) -> tuple[str, str]:
    """(name, version) of the framework an engine description names, or ("", ""): the
    version the engine's own interpreter reports (CommandEngine.framework_version), never
    the one the harness's environment happens to hold."""
    framework = getattr(getattr(engine, "description", None), "framework", None)
    if framework is None:
        return "", ""
    version = getattr(engine, "framework_version", None)
    return framework.name, version() if callable(version) else "unknown"


def today() -> str:
    return datetime.datetime.now(datetime.UTC).date().isoformat()


def _cell(text: str) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= WHY_CHARS else text[: WHY_CHARS - 1] + "…"


def first_problem(cert: Certification, invariant: str) -> str:
    """The first trial's summary for the worst verdict other than PASS, or ""."""
    for wanted in (v for v in verdict_module.SEVERITY if v is not verdict_module.Verdict.PASS):
        for trial in cert.trials:
            result = trial.result(invariant)
            if result is not None and result.verdict is wanted:
                return f"{trial.scenario} {trial.label}: {result.summary}"
    return ""


def _why(cert: Certification) -> str:
    parts = [f"`{i}` self-reported" for i in cert.self_reported]
    for invariant in cert.invariants:
        verdict = cert.verdict_of(invariant)
        if verdict is not verdict_module.Verdict.PASS:
            problem = first_problem(cert, invariant)
            parts.append(
                f"`{invariant}` {verdict.value}" + (f": {_cell(problem)}" if problem else "")
            )
    return "; ".join(parts) or "-"


def rests_on(level: levels.Level) -> str:
    """The fault classes `level` was granted under (each run at every point it applies):
    what the level promises to survive; "-" for NONE, which promises nothing."""
    return ", ".join(levels.required_classes(level)) or "-"


def rows(cert: Certification) -> list[str]:
    """One row per mode: a mode's level is granted by that mode's trials alone."""
    framework = cert.framework or "-"
    version = cert.framework_version or "-"
    found = []
    for mode in cert.modes:
        alone = dataclasses.replace(
            cert,
            modes=[mode],
            trials=[t for t in cert.trials if t.mode == mode],
            required=[r for r in cert.requirements if r.mode == mode],
        )
        covered = alone.coverage
        struck = sum(c.struck for c in covered.values())
        required = sum(c.required for c in covered.values())
        found.append(
            f"| {framework} | {version} | {cert.engine} | {mode} | {_cell(alone.title)} | "
            f"{rests_on(alone.level)} | {', '.join(alone.faults_run) or '-'} | "
            f"{struck}/{required} | {_why(alone)} | {cert.date} | {installed('crashcert')} |"
        )
    return found
