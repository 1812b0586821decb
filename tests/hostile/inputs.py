"""Hostile and careless command lines, each of which must end in a clear error.

One list, used by the test (tests/hostile/test_hostile_inputs.py) and by the table printed
for humans (`python -m tests.hostile.table`). Each case makes its files in a scratch
directory, runs `crashcert ARGS` there and must: exit 2 or 3, print no traceback, leak no
secret, and end within its time limit. None of them needs a crash trial to run.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
import sys

CRASHCERT = str(pathlib.Path(sys.executable).parent / "crashcert")
LIMIT_S = 60.0
SECRET = "hunter2-sk-test"
ACCEPTED_EXIT = (2, 3)
# How the CLI prints an exception it did not expect (harness/cli/main.py).
INTERNAL = "harness or environment error"

REFUND = (
    "name: {name}\n"
    "input: {{user: 'Refund ord-{{run}}'}}\n"
    "budgets: {{iterations: {iterations}, tool_calls: 4, tokens: 5000}}\n"
    "tools:\n"
    "  - name: refund\n"
    "    replay: non_replayable\n"
    "    effect: write\n"
    "    behaviour: {{result: {{ok: true}}, latency_ms: {latency}}}\n"
    "turns:\n"
    "  - tool_calls: [{{id: c1, name: refund, arguments: {{order: 'ord-{{run}}'}}}}]\n"
    "    usage: {{prompt_tokens: {tokens}, completion_tokens: 1}}\n"
    '  - content: "{reply}"\n'
    "deadline_s: {deadline}\n"
)
DEFAULTS = {
    "name": "hostile",
    "iterations": 6,
    "latency": 0,
    "tokens": 10,
    "reply": "Refunded.",
    "deadline": 20,
}
LAUGHS = "".join(
    ["x0: &x0 [lol]\n"]
    + [f"x{n}: &x{n} [{', '.join([f'*x{n - 1}'] * 10)}]\n" for n in range(1, 10)]
)


def scenario(**changes: object) -> str:
    return REFUND.format(**{**DEFAULTS, **changes})


def tagged(old: str, new: str) -> str:
    """The refund scenario with one piece replaced by YAML that JSON cannot say."""
    text = scenario()
    assert old in text, old
    return text.replace(old, new, 1)


# YAML types beyond JSON's (issue 33): each once crashed the world or a checker mid-trial.
NOT_JSON = {
    "!!set tool arguments": ("{order: 'ord-{run}'}", "!!set {a, b}"),
    "!!binary tool result": ("{ok: true}", "!!binary aGVsbG8="),
    "timestamp tool result": ("{ok: true}", "{at: 2024-01-01 10:00:00}"),
    "date mapping key": ("{ok: true}", "{2024-01-01: ok}"),
    "integer mapping key": ("{ok: true}", "{1: ok}"),
    "null mapping key": ("{ok: true}", "{null: ok}"),
    "!!omap tool result": ("{ok: true}", "!!omap [{a: 1}]"),
    "!!binary in the input": ("'Refund ord-{run}'", "!!binary aGVsbG8="),
}


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    args: list[str]
    files: dict[str, str | bytes] = dataclasses.field(default_factory=dict)
    limit_s: float = LIMIT_S
    # What must happen: REFUSED (exit 2 or 3 with a reason) or OK (exit 0).
    expect: str = "refused"
    # A pattern the output must hold: the field or path at fault.
    says: str | None = None
    # Text that must never be printed (a file's content).
    never: tuple[str, ...] = ()
    # Whether the command may start the lab (a real cluster); every other case must be
    # decided before it, and reaching it counts as accepted silently.
    lab: bool = False
    env: dict[str, str] = dataclasses.field(default_factory=dict)


# EITHER: an input the command may take or refuse, as long as it says why (a trace
# attribute of the wrong type is skipped with a note, or the import is refused).
REFUSED, OK, EITHER = "refused", "ok", "either"
# The outcome classes the table counts, the first two good.
CLEAR, ACCEPTED = "refused clearly", "accepted correctly"
TRACEBACK, HANG, LEAK, INTERNAL_ERROR = "traceback", "hang", "leak", "internal error"
SILENT, WRONG = "accepted silently", "wrong outcome"
CLASSES = (CLEAR, ACCEPTED, TRACEBACK, HANG, LEAK, INTERNAL_ERROR, SILENT, WRONG)
# Printed (and exited with) by the runner when a command reaches the lab it must not reach.
LAB_REACHED = "hostile: the lab would start here"
LAB_EXIT = 97


@dataclasses.dataclass(frozen=True)
class Outcome:
    case: Case
    exit_code: int | None  # None: it did not end within its limit
    seconds: float
    output: str

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.output

    @property
    def leaked(self) -> bool:
        return SECRET in self.output or any(text in self.output for text in self.case.never)

    @property
    def internal(self) -> bool:
        """An exception of crashcert's own printed as the reason, not the input at fault."""
        return INTERNAL in self.output

    @property
    def outcome_class(self) -> str:
        """The worst thing that happened, or CLEAR / ACCEPTED when all is as it must be."""
        if self.exit_code is None:
            return HANG
        if self.traceback:
            return TRACEBACK
        if self.leaked:
            return LEAK
        if self.internal:
            return INTERNAL_ERROR
        if self.case.expect == REFUSED and (
            self.exit_code in (0, LAB_EXIT) or LAB_REACHED in self.output
        ):
            return SILENT
        said = self.case.says is None or re.search(self.case.says, self.output) is not None
        accepted = self.exit_code in (0, LAB_EXIT)  # ended well, or went on to the lab
        if self.case.expect == OK or (self.case.expect == EITHER and accepted):
            return ACCEPTED if accepted and said else WRONG
        if self.exit_code in ACCEPTED_EXIT and self.output.strip() and said:
            return CLEAR
        return WRONG

    @property
    def clear(self) -> bool:
        return self.outcome_class in (CLEAR, ACCEPTED)


def _shard(**meta: object) -> str:
    """A shard.json, valid but for what `meta` changes."""
    fields: dict[str, object] = {
        "kind": "matrix",
        "index": 1,
        "count": 1,
        "fingerprint": "f",
        "crashcert": {"version": "0", "revision": None},
        "planned": [["refund", "baseline"]],
        **meta,
    }
    trial = {
        "scenario": "refund",
        "label": "baseline",
        "verdict": "PASS",
        "plan": [],
        "duration_s": 1.0,
        "directory": "/nowhere/refund/baseline",
        "repro": "crashcert run --scenario refund",
        "invariants": [{"invariant": "run.liveness", "verdict": "PASS", "summary": "ok"}],
    }
    return json.dumps({"shard": fields, "trials": [trial], "verdict": "PASS"})


def _merge(name: str, text: str) -> Case:
    return Case(name, ["merge", "s", "--out", "o"], {"s/shard.json": text})


DEEP_JSON = "[" * 5000 + "]" * 5000


def _engine(**changes: str) -> str:
    fields = {
        "name": "e",
        "migrate": '["true"]',
        "worker": '["true"]',
        "submit": '["true"]',
        "status": '["true"]',
        **changes,
    }
    return "".join(f"{key}: {value}\n" for key, value in fields.items())


CASES: list[Case] = [
    # files that are not scenarios
    Case(
        "billion laughs in a scenario",
        ["scenarios", "validate", "s.yaml"],
        {"s.yaml": scenario() + "extra:\n" + "".join(f"  {x}\n" for x in LAUGHS.splitlines())},
    ),
    Case("billion laughs at run", ["run", "--scenario", "s.yaml"], {"s.yaml": LAUGHS + scenario()}),
    Case("/dev/zero as a scenario", ["run", "--scenario", "/dev/zero"]),
    Case(
        "binary file as a scenario",
        ["run", "--scenario", "s.yaml"],
        {"s.yaml": bytes(range(256)) * 8},
    ),
    Case("scenario that does not exist", ["run", "--scenario", "nope.yaml"]),
    Case("unknown bundled scenario", ["run", "--scenario", "no_such_scenario"]),
    Case("directory as a scenario", ["run", "--scenario", "d.yaml"], {"d.yaml/x": ""}),
    Case("empty scenario file", ["run", "--scenario", "s.yaml"], {"s.yaml": ""}),
    Case("scenario that is a list", ["run", "--scenario", "s.yaml"], {"s.yaml": "[1, 2]\n"}),
    # YAML that JSON cannot say, at validation and at run
    *[
        Case(f"{name} ({command})", [*args, "s.yaml"], {"s.yaml": tagged(*change)})
        for name, change in NOT_JSON.items()
        for command, args in (
            ("validate", ["scenarios", "validate"]),
            ("run", ["run", "--scenario"]),
        )
    ],
    # numbers and text that would reach the engine
    Case("deadline .inf", ["run", "--scenario", "s.yaml"], {"s.yaml": scenario(deadline=".inf")}),
    Case(
        "deadline 1e-300",
        ["run", "--scenario", "s.yaml"],
        {"s.yaml": scenario(deadline="1.0e-300")},
    ),
    Case(
        "latency 1e17 ms", ["run", "--scenario", "s.yaml"], {"s.yaml": scenario(latency="1.0e+17")}
    ),
    Case("2^63 token usage", ["run", "--scenario", "s.yaml"], {"s.yaml": scenario(tokens=2**63)}),
    Case(
        "budget 1e23",
        ["run", "--scenario", "s.yaml"],
        {"s.yaml": scenario(iterations="100000000000000000000000")},
    ),
    Case(
        "NUL in the reply",
        ["run", "--scenario", "s.yaml"],
        {"s.yaml": scenario(reply="Refun\\0ded")},
    ),
    Case(
        "markup in a scenario name",
        ["scenarios", "validate", "s.yaml"],
        {"s.yaml": scenario(name="'[bold]x[/]'")},
    ),
    # fault texts
    Case(
        "unknown fault action", ["run", "--scenario", "refund", "--fault", "melt@tool.returned#1"]
    ),
    Case("unknown point", ["run", "--scenario", "refund", "--fault", "kill@nowhere#1"]),
    Case("occurrence 0", ["run", "--scenario", "refund", "--fault", "kill@tool.returned#0"]),
    Case(
        "heal_after_s=abc",
        ["run", "--scenario", "refund", "--fault", "db_cut@tools.pending#1?heal_after_s=abc"],
    ),
    Case(
        "heal_after_s=1e999",
        ["run", "--scenario", "refund", "--fault", "db_cut@tools.pending#1?heal_after_s=1e999"],
    ),
    Case(
        "negative heal_after_s",
        ["run", "--scenario", "refund", "--fault", "db_cut@tools.pending#1?heal_after_s=-1"],
    ),
    Case(
        "unknown fault parameter",
        ["run", "--scenario", "refund", "--fault", "db_cut@tools.pending#1?bogus=1"],
    ),
    Case(
        "a param kill does not read",
        ["run", "--scenario", "refund", "--fault", "kill@tool.started#1?offset_s=5"],
    ),
    Case(
        "a param db_cut does not read",
        ["run", "--scenario", "refund", "--fault", "db_cut@tools.pending#1?resume_after_s=5"],
    ),
    Case(
        "commit_lost without :before_commit",
        ["run", "--scenario", "refund", "--fault", "commit_lost@tool.returned#1"],
    ),
    Case(
        "time kill beyond an hour", ["run", "--scenario", "refund", "--fault", "kill@time:+99999s"]
    ),
    Case("matrix with an unknown fault class", ["matrix", "--faults", "kill,melt"]),
    Case("matrix with an unknown point", ["matrix", "--points", "tool.nowhere"]),
    Case("certify with an unknown mode", ["certify", "--mode", "sideways"]),
    Case("explore with no examples", ["explore", "--scenario", "refund", "--examples", "-1"]),
    # engines
    Case("engine file that does not exist", ["run", "--scenario", "refund", "--engine", "e.yaml"]),
    Case(
        "engine file with aliases",
        ["run", "--scenario", "refund", "--engine", "e.yaml"],
        {"e.yaml": LAUGHS + _engine()},
    ),
    Case(
        "binary engine file",
        ["run", "--scenario", "refund", "--engine", "e.yaml"],
        {"e.yaml": b"\x89PNG\r\n\x1a\n" + bytes(512)},
    ),
    Case(
        "engine lease of a day",
        ["run", "--scenario", "refund", "--engine", "e.yaml"],
        {"e.yaml": _engine(lease_ms="86400000")},
    ),
    Case(
        "engine with an unknown field",
        ["run", "--scenario", "refund", "--engine", "e.yaml"],
        {"e.yaml": _engine(sudo="true")},
    ),
    # campaigns that would test nothing
    Case("soak of zero runs", ["soak", "--runs", "0"]),
    Case("soak with a negative storm", ["soak", "--storm-s", "-5"]),
    Case("seed that is not a number", ["run", "--scenario", "refund", "--seed", "abc"]),
    # the environment
    Case("unwritable --out", ["run", "--scenario", "refund", "--out", "f/trials"], {"f": "file"}),
    Case(
        "unparsable --pg-dsn with a password",
        ["run", "--scenario", "refund", "--pg-dsn", f"postgresql://ops:{SECRET}@[bad"],
    ),
    Case(
        "unreachable --pg-dsn with a password",
        [
            "run",
            "--scenario",
            "refund",
            "--pg-dsn",
            f"postgresql://ops:{SECRET}@127.0.0.1:1/postgres",
        ],
        lab=True,
    ),
    # traces and shard records (issue 33)
    Case("/dev/zero as an OTLP trace", ["incident", "import", "--otlp", "/dev/zero"]),
    Case(
        "deep OTLP document",
        ["incident", "import", "--otlp", "t.json"],
        {"t.json": '{"resourceSpans": ' + DEEP_JSON + "}"},
    ),
    _merge("merge of a shard with count 1e10", _shard(count=10_000_000_000)),
    _merge("merge of a shard with a string count", _shard(count="4")),
    _merge("merge of a shard with count 0", _shard(count=0, index=0)),
    _merge("merge of a shard of kind bogus", _shard(kind="bogus")),
    _merge("merge of a shard with index > count", _shard(index=3, count=2)),
    _merge(
        "merge of a shard with a bogus verdict",
        _shard().replace('"verdict": "PASS", "plan"', '"verdict": "GREAT", "plan"'),
    ),
    _merge("merge of a deep shard.json", '{"shard": ' + DEEP_JSON + "}"),
    _merge("merge of a shard with NaN", _shard().replace('"count": 1', '"count": NaN')),
    Case("merge of /dev/zero", ["merge", "/dev/zero", "--out", "o"]),
    Case("--shard of 10^20", ["matrix", "--shard", "1/99999999999999999999"]),
    Case(
        "analyze a deep history line",
        ["analyze", "t"],
        {"t/history.jsonl": '{"type": "event", "item": ' + DEEP_JSON + "}\n"},
    ),
    # stored trials
    Case("analyze a directory without trials", ["analyze", "empty"], {"empty/.keep": ""}),
    Case("analyze a corrupt history", ["analyze", "t"], {"t/history.jsonl": "{not json\n"}),
    Case("export a trial that is not one", ["incident", "export", "--trial", "t"], {"t/x": ""}),
    Case("export with neither source", ["incident", "export"]),
    Case("replay a binary file", ["replay", "i.yaml"], {"i.yaml": bytes(range(256))}),
    Case("report of a corrupt trial", ["report", "t"], {"t/history.jsonl": "\x00\x01"}),
]
