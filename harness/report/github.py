"""GitHub Actions: a Markdown step summary and one annotation per trial that did not pass.

GitHub renders the Markdown appended to the file `$GITHUB_STEP_SUMMARY` names on the run's
page, and turns a workflow command printed on stdout (`::error title=...::message`) into an
annotation on the run and the pull request. Both carry each failing trial's rerun line.
GitLab has neither: its job log shows the 80-column rows (narrow.py).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

from harness.checkers import verdict as verdict_module

Verdict = verdict_module.Verdict
SUMMARY_VARIABLE = "GITHUB_STEP_SUMMARY"
# GitHub refuses a step summary over 1 MiB; past this many the list points to the reports.
LISTED = 300
LEVEL = {Verdict.FAIL: "error", Verdict.ERROR: "error", Verdict.INCONCLUSIVE: "warning"}


@dataclasses.dataclass(frozen=True)
class Trial:
    scenario: str
    label: str
    verdict: Verdict
    repro: str
    why: str = ""  # the invariant that decided the verdict, and its summary


def from_records(records: Iterable[Mapping[str, Any]], *, mode: bool = False) -> list[Trial]:
    """Trials from the JSON report's records (harness/report/summary.outcome_json; certify's
    carry a `mode`, put after the label when `mode`)."""
    trials = []
    for record in records:
        value = Verdict(record["verdict"])
        why = next(
            (
                f"{r['invariant']}: {r['summary']}"
                for r in record.get("invariants", [])
                if r["verdict"] == value.value
            ),
            "",
        )
        label = record["label"] + (f" ({record['mode']})" if mode and "mode" in record else "")
        trials.append(Trial(record["scenario"], label, value, record["repro"], why))
    return trials


def escape_data(text: str) -> str:
    """A workflow command's message, as GitHub's toolkit escapes it."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value (title=...): `:` and `,` end it otherwise."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(trial: Trial) -> str:
    """`::error title=crashcert <scenario> <label>::<rerun line>` (a warning if INCONCLUSIVE)."""
    title = escape_property(f"crashcert {trial.scenario} {trial.label}")
    message = trial.repro + (f"\n{trial.verdict.value} {trial.why}" if trial.why else "")
    return f"::{LEVEL[trial.verdict]} title={title}::{escape_data(message)}"


def markdown(title: str, headline: Sequence[str], trials: Sequence[Trial]) -> str:
    """A heading, `headline` lines, a table of trials per verdict per scenario, then every
    trial that did not pass with its rerun line."""
    by_scenario: dict[str, list[Verdict]] = collections.defaultdict(list)
    for trial in trials:
        by_scenario[trial.scenario].append(trial.verdict)
    lines = [f"## {title}", "", *headline, ""] if headline else [f"## {title}", ""]
    lines += ["| scenario | verdict | trials | P | F | I | E |", "|---|---|---|---|---|---|---|"]
    for name, verdicts in by_scenario.items():
        counted = collections.Counter(verdicts)
        counts = " | ".join(str(counted[v]) for v in _LETTER_ORDER)
        worst = verdict_module.worst(verdicts).value
        lines.append(f"| {_cell(name)} | {worst} | {len(verdicts)} | {counts} |")
    failing = [t for t in trials if t.verdict is not Verdict.PASS]
    if failing:
        lines += ["", f"### Trials that did not pass ({len(failing)})", ""]
    for trial in failing[:LISTED]:
        why = f": {trial.why}" if trial.why else ""
        lines += [f"- **{trial.verdict.value}** {trial.scenario} `{trial.label}`{why}"]
        fence = "`" * max(3, 1 + max((len(m) for m in re.findall("`+", trial.repro)), default=0))
        lines += [f"  {fence}", f"  {trial.repro}", f"  {fence}"]
    if len(failing) > LISTED:
        lines.append(f"- and {len(failing) - LISTED} more: see the JSON or JUnit report")
    return "\n".join(lines) + "\n\n"


_LETTER_ORDER = (Verdict.PASS, Verdict.FAIL, Verdict.INCONCLUSIVE, Verdict.ERROR)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def publish(
    title: str,
    headline: Sequence[str],
    trials: Sequence[Trial],
    *,
    environ: Mapping[str, str] = os.environ,
    out: TextIO | None = None,
) -> None:
    """Append the summary when `$GITHUB_STEP_SUMMARY` names a file; print an annotation per
    trial that did not pass when `GITHUB_ACTIONS=true`. Elsewhere, nothing."""
    path = environ.get(SUMMARY_VARIABLE, "")
    if path:
        with open(path, "a", encoding="utf-8") as summary:
            summary.write(markdown(title, headline, trials))
    if environ.get("GITHUB_ACTIONS") == "true":
        stream = sys.stdout if out is None else out
        for trial in trials:
            if trial.verdict is not Verdict.PASS:
                stream.write(annotation(trial) + "\n")
        stream.flush()
