"""Hostile files: scenarios, OTLP traces, shard records and stored trials, each refused naming
the file and field (or taken, when it is fine), never an internal error or its content echoed."""

from __future__ import annotations

import json

from tests.hostile import inputs

Case = inputs.Case
OK, EITHER = inputs.OK, inputs.EITHER


def _validate(name: str, text: str | bytes, *, says: str | None = None, **fields: object) -> Case:
    return Case(name, ["scenarios", "validate", "s.yaml"], {"s.yaml": text}, says=says, **fields)  # type: ignore[arg-type]


_SCENARIO_CHANGES = {
    "iterations 0": {"iterations": 0},
    "iterations -1": {"iterations": -1},
    "iterations 'many'": {"iterations": "many"},
    "tokens -5": {"tokens": -5},
    "tokens 1.5": {"tokens": 1.5},
    "latency -1": {"latency": -1},
    "latency 'slow'": {"latency": "slow"},
    "deadline 0": {"deadline": 0},
    "deadline -1": {"deadline": -1},
    "deadline nan": {"deadline": ".nan"},
    "deadline 'soon'": {"deadline": "soon"},
    "an empty name": {"name": "''"},
    "a name with a slash": {"name": "'../../etc/cron.d/x'"},
    "a name of 10 kB": {"name": "x" * 10_000},
    "a name with a newline": {"name": '"a\\nb"'},
    "a name that is a list": {"name": "[a, b]"},
}

_SCENARIO_TEXTS = {
    "a tool call to an undeclared tool": inputs.scenario().replace(
        "name: refund, arguments", "name: nope, arguments"
    ),
    "a turn with neither content nor calls": inputs.scenario().replace(
        '  - content: "Refunded."\n', "  - {}\n"
    ),
    "no turns": inputs.scenario().split("turns:")[0] + "turns: []\ndeadline_s: 20\n",
    "two tools of one name": inputs.scenario().replace(
        "tools:\n", "tools:\n  - {name: refund, replay: replayable, effect: read}\n"
    ),
    "an unknown replay policy": inputs.scenario().replace("non_replayable", "sometimes"),
    "an unknown effect class": inputs.scenario().replace("effect: write", "effect: explode"),
    "a tab for indentation": inputs.scenario().replace("  - name: refund", "\t- name: refund"),
    "a scenario of 2 MB": inputs.scenario() + "# " + "x" * 2_000_000 + "\n",
    "10000 turns": inputs.scenario().replace(
        "deadline_s:", "".join("  - content: x\n" for _ in range(10_000)) + "deadline_s:"
    ),
    "a duplicate key": inputs.scenario() + "name: again\n",
    "a YAML document stream": inputs.scenario() + "---\n" + inputs.scenario(),
    "a NUL byte in the file": inputs.scenario().replace("Refunded.", "Refun\x00ded."),
    "a lone surrogate escape": inputs.scenario(reply="\\ud800"),
    "an unknown top-level field": inputs.scenario() + "sudo: true\n",
    "a Python tag": inputs.scenario() + "x: !!python/object/apply:os.system ['id']\n",
    "a custom tag": inputs.scenario() + "x: !secret value\n",
    "a merge key": inputs.scenario() + "x: {<<: {a: 1}}\n",
    "a fault that is not one": inputs.scenario() + "faults: ['melt@tool.started#1']\n",
    "the same fault twice in a scenario": inputs.scenario()
    + "faults: ['kill@tool.started#1', 'kill@tool.started#1']\n",
}
_FINE_TEXTS = {
    "CRLF line endings": inputs.scenario().replace("\n", "\r\n"),
    "a UTF-8 byte order mark": "\ufeff" + inputs.scenario(),
    "a reply in Japanese": inputs.scenario(reply="返金しました。"),
    "a reply with an emoji": inputs.scenario(reply="Refunded 💸"),
    "a reply with a literal {brace}": inputs.scenario(reply="Refunded {ok}."),
}

_TRACE = {
    "resourceSpans": [
        {
            "resource": {"attributes": []},
            "scopeSpans": [
                {
                    "scope": {"name": "x"},
                    "spans": [
                        {
                            "traceId": "ab" * 16,
                            "spanId": "00" * 7 + "01",
                            "name": "chat m",
                            "startTimeUnixNano": "1000",
                            "endTimeUnixNano": "2000",
                            "attributes": [
                                {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}
                            ],
                            "status": {},
                        }
                    ],
                }
            ],
        }
    ]
}


def _trace(name: str, change: str, new: str, *, expect: str = EITHER) -> Case:
    text = json.dumps(_TRACE)
    assert change in text, change
    return Case(
        name,
        ["incident", "import", "--otlp", "t.json"],
        {"t.json": text.replace(change, new, 1)},
        expect=expect,
    )


_ATTRIBUTE = '{"stringValue": "chat"}'
_OTLP = [
    _trace("an OTLP attribute of 1e999", _ATTRIBUTE, '{"doubleValue": 1e999}'),
    _trace("an OTLP attribute of -1e999", _ATTRIBUTE, '{"doubleValue": -1e999}'),
    _trace(
        "an OTLP int attribute of 5000 digits", _ATTRIBUTE, '{"intValue": "' + "9" * 5000 + '"}'
    ),
    _trace("an OTLP int attribute that is a word", _ATTRIBUTE, '{"intValue": "abc"}'),
    _trace("an OTLP attribute that is a list", _ATTRIBUTE, "[1, 2]"),
    _trace("an OTLP attribute that is null", _ATTRIBUTE, "null"),
    _trace("an OTLP attribute that is a number", _ATTRIBUTE, "7"),
    _trace("an OTLP string attribute that is a number", _ATTRIBUTE, '{"stringValue": 7}'),
    _trace("an OTLP attribute of an unknown kind", _ATTRIBUTE, '{"fooValue": "chat"}'),
    _trace(
        "an OTLP attribute 60 arrays deep",
        _ATTRIBUTE,
        '{"arrayValue": {"values": [' * 20 + "{}" + "]}}" * 20,
    ),
    _trace(
        "an OTLP kvlist 30 deep",
        _ATTRIBUTE,
        '{"kvlistValue": {"values": [{"key": "k", "value": ' * 12 + "{}" + "}]}}" * 12,
    ),
    _trace(
        "OTLP attributes that are an object", '"attributes": [{"key"', '"attributes": {"x": [{"key"'
    ),
    _trace("an OTLP attribute key that is a number", '"key": "gen_ai.operation.name"', '"key": 5'),
    _trace("OTLP spans that are a string", '"spans": [', '"spans": "x", "y": ['),
    _trace("an OTLP span that is null", '"spans": [', '"spans": [null, '),
    _trace(
        "an OTLP start time that is a word",
        '"startTimeUnixNano": "1000"',
        '"startTimeUnixNano": "soon"',
    ),
    _trace("an OTLP start time of -1", '"startTimeUnixNano": "1000"', '"startTimeUnixNano": -1'),
    _trace(
        "an OTLP start time of 1e30", '"startTimeUnixNano": "1000"', '"startTimeUnixNano": 1e30'
    ),
    _trace("an OTLP trace id of 5000 chars", '"traceId": "abab', '"traceId": "' + "a" * 5000),
    _trace("an OTLP span name that is an object", '"name": "chat m"', '"name": {"a": 1}'),
    _trace("resourceSpans that is a number", '"resourceSpans": [', '"resourceSpans": 5, "x": ['),
    _trace("an OTLP status that is a list", '"status": {}', '"status": [1]'),
    Case(
        "one bad JSON line among good OTLP lines",
        ["incident", "import", "--otlp", "t.jsonl"],
        {"t.jsonl": json.dumps(_TRACE) + "\n{not json\n" + json.dumps(_TRACE) + "\n"},
        expect=EITHER,
        says="line 2",
    ),
    Case(
        "an OTLP trace that is binary",
        ["incident", "import", "--otlp", "t.json"],
        {"t.json": bytes(range(256)) * 4},
    ),
    Case("an OTLP trace that is empty", ["incident", "import", "--otlp", "t.json"], {"t.json": ""}),
    Case("an OTLP trace that is a directory", ["incident", "import", "--otlp", "d"], {"d/x": ""}),
    Case(
        "/etc/shadow as an OTLP trace",
        ["incident", "import", "--otlp", "/etc/shadow"],
        never=("root:",),
    ),
]


def _merge(name: str, text: str, *, says: str | None = None) -> Case:
    return Case(name, ["merge", "s", "--out", "o"], {"s/shard.json": text}, says=says)


_MERGES = [
    _merge("a shard with a boolean count", inputs._shard(count=True), says="count"),
    _merge("a shard with a fractional index", inputs._shard(index=1.5), says="index"),
    _merge("a shard with count -1", inputs._shard(count=-1), says="count"),
    _merge("a shard with planned a string", inputs._shard(planned="x"), says="planned"),
    _merge("a shard with a null crashcert", inputs._shard(crashcert=None), says="crashcert"),
    _merge(
        "a shard with a lower-case verdict",
        inputs._shard().replace('"verdict": "PASS", "plan"', '"verdict": "pass", "plan"'),
        says="verdict",
    ),
    _merge(
        "a shard with trials an object",
        inputs._shard()
        .replace('"trials": [', '"trials": {"a": ')
        .replace('}], "verdict"', '}}, "verdict"'),
        says="trials",
    ),
    _merge(
        "a certify shard's trial without its mode",
        inputs._shard(kind="certify"),
        says="certify trial needs mode, fault_class",
    ),
    _merge("a shard.json that is a list", "[1, 2]", says="shard"),
    _merge("a shard.json that is empty", "", says="shard"),
    _merge("a shard.json without its shard", json.dumps({"trials": []}), says="shard"),
    Case(
        "a shard with a 10 kB fingerprint merges",
        ["merge", "s", "--out", "o"],
        {"s/shard.json": inputs._shard(fingerprint="f" * 10_000)},
        expect=OK,
    ),
    _merge(
        "a matrix trial without its repro",
        inputs._shard().replace('"repro": "crashcert run --scenario refund", ', ""),
        says="needs repro",
    ),
    _merge(
        "an invariant of a bogus verdict",
        inputs._shard().replace('"verdict": "PASS", "summary"', '"verdict": "MEH", "summary"'),
        says="invariants",
    ),
    Case(
        "merge of two shards of one index",
        ["merge", "a", "b", "--out", "o"],
        {"a/shard.json": inputs._shard(count=2), "b/shard.json": inputs._shard(count=2)},
    ),
    Case(
        "merge of mixed plans",
        ["merge", "a", "b", "--out", "o"],
        {
            "a/shard.json": inputs._shard(count=2),
            "b/shard.json": inputs._shard(count=2, index=2, fingerprint="g"),
        },
    ),
    Case("merge of a directory without shard.json", ["merge", "d", "--out", "o"], {"d/x": ""}),
    Case("merge of nothing that exists", ["merge", "nope", "--out", "o"]),
    Case(
        "merge into a file",
        ["merge", "s", "--out", "f"],
        {"s/shard.json": inputs._shard(), "f": "x"},
    ),
]

_BINARY = bytes(range(256)) * 4
_STORED = [
    Case(
        "analyze goes past a binary history",
        ["analyze", "t"],
        {"t/a/history.jsonl": _BINARY, "t/b/history.jsonl": "{not json\n"},
        says=r"t/a.*\n(.*\n)*.*t/b",
    ),
    Case(
        "analyze goes past an empty history",
        ["analyze", "t"],
        {"t/a/history.jsonl": "", "t/b/history.jsonl": _BINARY},
        says=r"t/a.*\n(.*\n)*.*t/b",
    ),
    Case("analyze a history of a JSON list", ["analyze", "t"], {"t/history.jsonl": "[1]\n"}),
    Case("analyze a history of null lines", ["analyze", "t"], {"t/history.jsonl": "null\nnull\n"}),
    Case(
        "analyze a history line of an unknown type",
        ["analyze", "t"],
        {"t/history.jsonl": '{"type": "bogus"}\n'},
    ),
    Case(
        "analyze a history with NaN",
        ["analyze", "t"],
        {"t/history.jsonl": '{"type": "event", "at": NaN}\n'},
    ),
    Case("analyze a history that is a directory", ["analyze", "t"], {"t/history.jsonl/x": ""}),
    Case("analyze /dev/null", ["analyze", "/dev/null"]),
    Case("analyze a path that does not exist", ["analyze", "nope"]),
    Case("report of a binary history", ["report", "t"], {"t/history.jsonl": _BINARY}),
    Case(
        "export a binary history",
        ["incident", "export", "--trial", "t"],
        {"t/history.jsonl": _BINARY},
    ),
    Case("replay an incident that is a list", ["replay", "i.yaml"], {"i.yaml": "[1]\n"}),
    Case("replay an empty incident", ["replay", "i.yaml"], {"i.yaml": ""}),
    Case("replay /etc/shadow", ["replay", "/etc/shadow"], never=("root:",)),
]

CASES: list[Case] = [
    *[
        _validate(f"a scenario with {name}", inputs.scenario(**change), says="s.yaml")  # type: ignore[arg-type]
        for name, change in _SCENARIO_CHANGES.items()
    ],
    *[
        _validate(f"a scenario with {name}", text, says="s.yaml")
        for name, text in _SCENARIO_TEXTS.items()
    ],
    *[
        _validate(f"a fine scenario with {name}", text, expect=OK, says="ok")
        for name, text in _FINE_TEXTS.items()
    ],
    _validate(
        "a scenario of invalid UTF-8", inputs.scenario().encode() + b"\xff\xfe", says="UTF-8"
    ),
    _validate("a scenario in UTF-16", inputs.scenario().encode("utf-16")),
    Case(
        "validate /etc/shadow", ["scenarios", "validate", "/etc/shadow"], never=("root:", "daemon:")
    ),
    Case("validate /etc/passwd", ["scenarios", "validate", "/etc/passwd"], never=("root:x:",)),
    Case(
        "validate /proc/self/environ",
        ["scenarios", "validate", "/proc/self/environ"],
        never=("PATH=",),
    ),
    Case("validate /proc/self/mem", ["scenarios", "validate", "/proc/self/mem"]),
    Case("validate /dev/stdin", ["scenarios", "validate", "/dev/stdin"]),
    Case(
        "validate a good and a bad file",
        ["scenarios", "validate", "a.yaml", "b.yaml"],
        {"a.yaml": inputs.scenario(), "b.yaml": "[1]\n"},
        says="ok .*a.yaml",
    ),
    *_OTLP,
    *_MERGES,
    *_STORED,
]
