"""Hostile options and engine descriptions: refused before the lab starts, naming the option
or field; the few that are fine go on to the lab (accepted correctly)."""

from __future__ import annotations

from tests.hostile import inputs

Case = inputs.Case
OK = inputs.OK
_DSN = "postgresql://ops@127.0.0.1:1/postgres"

_SHARDS = {
    "empty": "",
    "a space": " ",
    "0/4": "0/4",
    "5/4": "5/4",
    "1/0": "1/0",
    "-1/4": "-1/4",
    "1/4/2": "1/4/2",
    "a/b": "a/b",
    "1/1001": "1/1001",
    "5000 digits": "1/" + "9" * 5000,
    "a lone slash": "/",
    "1 of nothing": "1/",
}
_SHARDED = {
    "matrix": ["matrix"],
    "certify": ["certify"],
    "explore": ["explore", "--scenario", "refund"],
}


def _engine_case(name: str, body: str, *, says: str | None = None, expect: str = "refused") -> Case:
    return Case(
        name,
        ["run", "--scenario", "refund", "--engine", "e.yaml"],
        {"e.yaml": body},
        says=says,
        expect=expect,
    )


def _argv(worker: str) -> str:
    return inputs._engine(worker=worker)


CASES: list[Case] = [
    *[
        Case(f"{verb} --shard {name}", [*args, "--shard", text], says="--shard")
        for name, text in _SHARDS.items()
        for verb, args in _SHARDED.items()
    ],
    Case("matrix --shard 1/4 goes on", ["matrix", "--shard", "1/4"], expect=OK),
    Case("matrix --shard ' 2 / 4 ' goes on", ["matrix", "--shard", " 2 / 4 "], expect=OK),
    Case("matrix --jobs 0", ["matrix", "--jobs", "0"], says="--jobs"),
    Case("matrix --jobs -1", ["matrix", "--jobs", "-1"], says="--jobs"),
    Case("matrix --jobs abc", ["matrix", "--jobs", "abc"], says="--jobs"),
    Case("matrix --jobs 10^6", ["matrix", "--jobs", "1000000"], says="--jobs"),
    Case("certify --jobs 0", ["certify", "--jobs", "0"], says="--jobs"),
    # soak and explore bounds, before a cluster starts
    Case("soak --runs -1", ["soak", "--runs", "-1"], says="runs"),
    Case("soak --runs 10^9", ["soak", "--runs", "1000000000"], says="runs"),
    Case("soak --workers 0", ["soak", "--workers", "0"], says="workers"),
    Case("soak --workers 10^4", ["soak", "--workers", "10000"], says="workers"),
    Case("soak --storm-s nan", ["soak", "--storm-s", "nan"], says="storm"),
    Case("soak --storm-s inf", ["soak", "--storm-s", "inf"], says="storm"),
    Case("soak --pg-restarts -1", ["soak", "--pg-restarts", "-1"], says="pg_restarts"),
    Case("soak --pg-restarts 10^6", ["soak", "--pg-restarts", "1000000"], says="pg_restarts"),
    Case("explore --examples 0", ["explore", "--scenario", "refund", "--examples", "0"]),
    Case("explore --examples 10^9", ["explore", "--scenario", "refund", "--examples", "1e9"]),
    Case("explore --max-faults 0", ["explore", "--scenario", "refund", "--max-faults", "0"]),
    Case(
        "explore --shrink-budget -1", ["explore", "--scenario", "refund", "--shrink-budget", "-1"]
    ),
    Case("explore --replays -1", ["explore", "--scenario", "refund", "--replays", "-1"]),
    Case("explore --replays 10^6", ["explore", "--scenario", "refund", "--replays", "1000000"]),
    # pg_restart against a server someone else runs
    Case(
        "run pg_restart against --pg-dsn",
        ["run", "--scenario", "refund", "--fault", "pg_restart@tools.pending#1", "--pg-dsn", _DSN],
        says="never restarted",
    ),
    Case(
        "run pg_restart against CRASHCERT_PG_DSN",
        ["run", "--scenario", "refund", "--fault", "pg_restart@tools.pending#1"],
        env={"CRASHCERT_PG_DSN": _DSN},
        says="never restarted",
    ),
    Case(
        "matrix --faults pg_restart against --pg-dsn",
        ["matrix", "--faults", "kill,pg_restart", "--pg-dsn", _DSN],
        says="never restarted",
    ),
    Case(
        "explore --faults pg_restart against --pg-dsn",
        ["explore", "--scenario", "refund", "--faults", "pg_restart", "--pg-dsn", _DSN],
        says="never restarted",
    ),
    # pg_failover stops the primary and makes a standby of it: a server we own alone
    Case(
        "run pg_failover against --pg-dsn",
        ["run", "--scenario", "refund", "--fault", "pg_failover@tools.pending#1", "--pg-dsn", _DSN],
        says="never restarted or failed over",
    ),
    Case(
        "matrix --faults pg_failover against --pg-dsn",
        ["matrix", "--faults", "kill,pg_failover", "--pg-dsn", _DSN],
        says="never restarted or failed over",
    ),
    Case(
        "certify --faults pg_failover against --pg-dsn",
        ["certify", "--faults", "pg_failover", "--pg-dsn", _DSN],
        says="never restarted or failed over",
    ),
    Case("soak's restarts against --pg-dsn", ["soak", "--pg-dsn", _DSN], says="never restarted"),
    Case(
        "soak --pg-restarts 0 against --pg-dsn goes on",
        ["soak", "--pg-restarts", "0", "--pg-dsn", _DSN, "--runs", "1"],
        expect=OK,
    ),
    Case(
        "pg_restart without a DSN goes on",
        ["run", "--scenario", "refund", "--fault", "pg_restart@tools.pending#1"],
        expect=OK,
    ),
    # paths
    Case("--out under /proc", ["run", "--scenario", "refund", "--out", "/proc/self/x"]),
    Case("--out under /dev/null", ["run", "--scenario", "refund", "--out", "/dev/null/x"]),
    Case("--out that is a file", ["run", "--scenario", "refund", "--out", "f"], {"f": "x"}),
    Case("--json into a directory", ["matrix", "--json", "d"], {"d/x": ""}, says="--json|d"),
    Case("--junit under a file", ["matrix", "--junit", "f/j.xml"], {"f": "x"}, says="--junit|f"),
    Case("--isolation bogus", ["--isolation", "bogus", "run", "--scenario", "refund"]),
    Case("an unknown verb", ["melt"]),
    Case("an unknown option", ["run", "--scenario", "refund", "--sudo"]),
    Case("a scenario name with ../", ["run", "--scenario", "../../etc/passwd"]),
    Case("a scenario named /etc/shadow", ["run", "--scenario", "/etc/shadow"], never=("root:",)),
    Case("--seed of 5000 digits", ["run", "--scenario", "refund", "--seed", "9" * 5000]),
    # engine descriptions: braces in argv, fields
    _engine_case("an awk program in a worker", _argv('["awk", "{print $1}"]'), says=r"worker\[1\]"),
    _engine_case("a lone { in a worker", _argv('["x", "{"]'), says=r"worker\[1\]"),
    _engine_case("a lone } in a worker", _argv('["x", "}"]'), says=r"worker\[1\]"),
    _engine_case("{run_id} in the worker", _argv('["x", "{run_id}"]'), says="unknown placeholder"),
    _engine_case("{python!r} in a worker", _argv('["{python!r}"]'), says="conversion"),
    _engine_case("{python:>9} in a worker", _argv('["{python:>9}"]'), says="format spec"),
    _engine_case("a positional {} in a worker", _argv('["{}"]'), says="placeholder"),
    _engine_case("{0} in a worker", _argv('["{0}"]'), says="placeholder"),
    _engine_case("{python.real} in a worker", _argv('["{python.real}"]'), says="placeholder"),
    _engine_case("{python[0]} in a worker", _argv('["{python[0]}"]'), says="placeholder"),
    _engine_case(
        "{tool_call_id} in status",
        inputs._engine(status='["x", "{tool_call_id}"]'),
        says=r"status\[1\]",
    ),
    _engine_case(
        "{python} in a migrate command", inputs._engine(migrate='["{python}", "-V"]'), expect=OK
    ),
    _engine_case("escaped braces in a worker", _argv('["sh", "-c", "echo {{}}"]'), expect=OK),
    _engine_case("{run_id} in status", inputs._engine(status='["x", "{run_id}"]'), expect=OK),
    _engine_case("an engine name with a NUL", inputs._engine(name='"e\\0"'), says="name"),
    _engine_case("an env name with =", inputs._engine() + "env: {'A=B': x}\n", says="env"),
    _engine_case("an empty env name", inputs._engine() + "env: {'': x}\n", says="env"),
    _engine_case("lease_ms of 10", inputs._engine(lease_ms="10"), says="lease_ms"),
    _engine_case("lease_ms of 1.5", inputs._engine(lease_ms="1.5"), says="lease_ms"),
    _engine_case("boundaries 'some'", inputs._engine(boundaries="some"), says="boundaries"),
    _engine_case("boundaries [nowhere]", inputs._engine(boundaries="[nowhere]"), says="nowhere"),
    _engine_case("a worker that is a string", inputs._engine(worker='"true"'), says="worker"),
    _engine_case("a worker of numbers", inputs._engine(worker="[1, 2]"), says="worker"),
    _engine_case("an engine that is a list", "[1, 2]\n"),
    _engine_case("an empty engine file", ""),
    _engine_case("an engine with !!binary", inputs._engine(name="!!binary aGVsbG8=")),
    _engine_case("an engine with a date key", inputs._engine() + "env: {2024-01-01: x}\n"),
    Case(
        "an engine that is a directory",
        ["run", "--scenario", "refund", "--engine", "d"],
        {"d/x": ""},
    ),
    Case("/dev/zero as an engine", ["run", "--scenario", "refund", "--engine", "/dev/zero"]),
    Case(
        "/etc/shadow as an engine",
        ["run", "--scenario", "refund", "--engine", "/etc/shadow"],
        never=("root:",),
    ),
]
