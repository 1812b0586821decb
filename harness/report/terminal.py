"""The terminal: one console that never reads markup out of text, and verdicts in colour.

Engine output, paths, scenario fields and error messages are printed as they are: with
markup on, a `[/]` in any of them crashed the printer and `[bold]` in a tool argument was
obeyed. Colour is given only as styles on rich Text, never inside strings.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable

import rich.console
import rich.text

from harness.checkers import verdict as verdict_module

Verdict = verdict_module.Verdict
STYLE = {
    Verdict.PASS: "green",
    Verdict.FAIL: "bold red",
    Verdict.INCONCLUSIVE: "yellow",
    Verdict.ERROR: "bold magenta",
}
CI_WIDTH = 160
Part = str | tuple[str, str] | rich.text.Text


def make_console() -> rich.console.Console:
    console = rich.console.Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
    if not console.is_terminal:
        console.width = CI_WIDTH  # CI logs: keep a summary table's row on one line
    return console


def line(*parts: Part) -> rich.text.Text:
    """Text from plain strings and (string, style) pairs; nothing in them is markup."""
    return rich.text.Text.assemble(*parts)


def verdict(value: Verdict, text: str | None = None) -> tuple[str, str]:
    return (value.value if text is None else text, STYLE[value])


def counts(verdicts: Iterable[Verdict]) -> rich.text.Text:
    """`F1 P3`: trials per verdict, worst first, each in its colour; `-` for none."""
    counted = collections.Counter(verdicts)
    parts: list[Part] = []
    for value in verdict_module.SEVERITY:
        if counted[value]:
            parts += [" "] if parts else []
            parts.append(verdict(value, f"{value.value[0]}{counted[value]}"))
    return line(*parts) if parts else line(("-", "dim"))


def print_results(
    console: rich.console.Console,
    results: list[verdict_module.CheckResult],
    overall: Verdict,
) -> None:
    """Each invariant's verdict, evidence under those that did not pass, the trial's verdict."""
    for result in results:
        head = verdict(result.verdict, f"{result.verdict.value:12}")
        console.print(line(head, f" {result.invariant}: {result.summary}"))
        if result.verdict is not Verdict.PASS:
            for item in result.evidence:
                console.print(f"             - {item}")
    console.print(line(verdict(overall)))
