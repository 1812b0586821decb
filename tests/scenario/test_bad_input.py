"""Bad user input gets one clear line and a refusal up front, never a hang or a traceback.

Literal inputs, each of which once got through: a billion-laughs scenario, /dev/zero, a
binary file, unbounded numbers, a NUL in scripted text, fault params that crashed the
control thread or were ignored, and a soak that tested nothing. No Postgres needed.
"""

from __future__ import annotations

import os
import pathlib
import sys

import pytest

from harness import errors
from harness.campaigns import soak
from harness.cli import main
from harness.engines import commands
from harness.faults import spec
from harness.inputs import validation
from harness.scenario import schema

# A valid scenario with every number on its own line, so one replace makes it bad.
SCENARIO = """\
name: bad_input
input:
  user: Refund order ord-{run}.
budgets:
  iterations: 6
  tool_calls: 4
  tokens: 5000
tools:
  - name: refund
    replay: non_replayable
    effect: write
    behaviour:
      result: {refund_id: rf-1}
      latency_ms: 0
      fail_first: 0
      effect_then_fail: 0
turns:
  - tool_calls:
      - {id: call_refund, name: refund, arguments: {order_id: "ord-{run}"}}
    usage:
      prompt_tokens: 300
      completion_tokens: 25
  - content: Refunded.
sink:
  latency_ms: 0
deadline_s: 20
"""

# Nine levels of ten: 10^9 "lol"s once anything walks the data (json.dumps at `run`).
BILLION_LAUGHS = "".join(
    [
        '      lol0: &lol0 ["lol"]\n',
        *(f"      lol{n}: &lol{n} [{', '.join([f'*lol{n - 1}'] * 10)}]\n" for n in range(1, 10)),
    ]
)

ENGINE = """\
name: tiny
migrate: ["{python}", "e.py", "migrate"]
worker: ["{python}", "-m", "tiny", "worker"]
submit: ["{python}", "e.py", "submit"]
status: ["{python}", "e.py", "status", "{run_id}"]
env: {TINY_MODE: fast}
lease_ms: 300
"""


def _write(tmp_path: pathlib.Path, text: str | bytes, name: str = "s.yaml") -> pathlib.Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def _refused(path: pathlib.Path) -> str:
    with pytest.raises(errors.CrashcertError) as raised:
        schema.load(path)
    message = str(raised.value)
    assert str(path) in message and "\n" not in message, message
    return message


def _entry(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    """`crashcert ARGS` as the console script runs it: exit code and everything printed."""
    monkeypatch.setattr(sys, "argv", ["crashcert", *args])
    with pytest.raises(SystemExit) as exited:
        main.entry()
    printed = capsys.readouterr()
    return int(exited.value.code or 0), printed.out + printed.err


def test_the_template_is_valid(tmp_path):
    loaded = schema.load(_write(tmp_path, SCENARIO))
    assert loaded.deadline_s == 20 and loaded.turns[0].usage.prompt_tokens == 300


# -- 1. YAML files ------------------------------------------------------------------------


def test_billion_laughs_inside_a_valid_scenario_is_refused(tmp_path):
    text = SCENARIO.replace("      result: {refund_id: rf-1}\n", "      result:\n" + BILLION_LAUGHS)
    message = _refused(_write(tmp_path, text))
    assert "line 14, column 13: YAML anchors (&lol0) are not allowed" in message


def test_an_alias_alone_is_refused_too(tmp_path):
    text = "a: [1]\nb: *a\n"
    with pytest.raises(errors.CrashcertError, match=r"line 2, column 4: YAML aliases \(\*a\)"):
        validation.read_yaml(_write(tmp_path, text), what="scenario")


def test_billion_laughs_in_an_engine_description_is_refused(tmp_path):
    path = _write(tmp_path, ENGINE + "description:\n" + BILLION_LAUGHS, "engine.yaml")
    with pytest.raises(errors.CrashcertError, match="YAML anchors"):
        commands.load(path)


def test_validate_refuses_billion_laughs_in_one_line(tmp_path, monkeypatch, capsys):
    text = SCENARIO.replace("      result: {refund_id: rf-1}\n", "      result:\n" + BILLION_LAUGHS)
    path = _write(tmp_path, text)
    code, printed = _entry(monkeypatch, capsys, "scenarios", "validate", str(path))
    # `scenarios validate` exits 1 for an invalid file (harness/cli/main.py decides that).
    assert code != 0
    assert printed.count("\n") == 1 and "YAML anchors (&lol0)" in printed, printed
    assert "Traceback" not in printed


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_is_refused_without_reading_it(device):
    path = pathlib.Path(device)
    with pytest.raises(errors.CrashcertError) as raised:
        schema.load(path)
    assert (
        str(raised.value)
        == f"{device}: cannot read scenario: it is a character device, not a regular file"
    )


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    assert "it is a FIFO, not a regular file" in _refused(fifo)


def test_a_directory_is_refused(tmp_path):
    (tmp_path / "dir.yaml").mkdir()
    assert "it is a directory, not a regular file" in _refused(tmp_path / "dir.yaml")


def test_validate_refuses_dev_zero_in_one_line(monkeypatch, capsys):
    code, printed = _entry(monkeypatch, capsys, "scenarios", "validate", "/dev/zero")
    assert code != 0
    assert (
        printed
        == "invalid /dev/zero: cannot read scenario: it is a character device, not a regular file\n"
    )


def test_a_file_beyond_the_size_limit_is_refused_unread(tmp_path):
    text = SCENARIO + "# " + "x" * validation.MAX_YAML_BYTES + "\n"
    message = _refused(_write(tmp_path, text))
    assert f"larger than {validation.MAX_YAML_BYTES} bytes" in message


def test_a_binary_file_is_refused_clearly(tmp_path):
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01"
    message = _refused(_write(tmp_path, png))
    assert message.endswith("cannot read scenario: not UTF-8 text (byte 0x89 at offset 0)")


def test_validate_refuses_a_binary_file_in_one_line(tmp_path, monkeypatch, capsys):
    path = _write(tmp_path, b"name: \xff\xfe\n")
    code, printed = _entry(monkeypatch, capsys, "scenarios", "validate", str(path))
    assert code != 0
    assert (
        printed == f"invalid {path}: cannot read scenario: not UTF-8 text (byte 0xff at offset 6)\n"
    )


def test_too_many_nodes_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(validation, "MAX_YAML_NODES", 100)
    path = _write(tmp_path, "[" + "0, " * 100 + "0]")
    with pytest.raises(errors.CrashcertError, match="more than 100 YAML nodes"):
        validation.read_yaml(path, what="scenario")


def test_deep_nesting_is_refused_not_a_recursion_error(tmp_path):
    path = _write(tmp_path, "[" * 100_000 + "]" * 100_000)
    with pytest.raises(errors.CrashcertError, match="nested deeper than 64 levels"):
        validation.read_yaml(path, what="scenario")


def test_an_integer_python_will_not_convert_is_refused(tmp_path):
    path = _write(tmp_path, "deadline_s: " + "9" * 5000 + "\n")
    with pytest.raises(errors.CrashcertError, match="not valid YAML: Exceeds the limit"):
        validation.read_yaml(path, what="scenario")


def test_a_yaml_syntax_error_is_one_line(tmp_path):
    message = _refused(_write(tmp_path, "name: [unclosed"))
    assert message.endswith(
        "not valid YAML: line 1, column 16: expected ',' or ']', but got '<stream end>'"
    )


# -- 2. numbers: finite and bounded, refused with the field named -------------------------


@pytest.mark.parametrize(
    "change,problem",
    [
        (("deadline_s: 20", "deadline_s: .inf"), "deadline_s: Input should be a finite number"),
        (("deadline_s: 20", "deadline_s: .nan"), "deadline_s: Input should be a finite number"),
        (
            ("deadline_s: 20", "deadline_s: 1e-300"),
            "deadline_s: Input should be greater than or equal to 1",
        ),
        (
            ("deadline_s: 20", "deadline_s: 1e9"),
            "deadline_s: Input should be less than or equal to 3600",
        ),
        (
            ("prompt_tokens: 300", "prompt_tokens: 9223372036854775808"),
            "turns.0.usage.prompt_tokens: Input should be less than or equal to 2147483647",
        ),
        (
            ("completion_tokens: 25", "completion_tokens: -1"),
            "turns.0.usage.completion_tokens: Input should be greater than or equal to 0",
        ),
        (
            ("      latency_ms: 0", "      latency_ms: 1.0e+17"),
            "tools.0.behaviour.latency_ms: Input should be less than or equal to 3600000",
        ),
        (
            ("      latency_ms: 0", "      latency_ms: 25000"),
            "tools.0.behaviour.latency_ms is 25000, beyond deadline_s (20 s)",
        ),
        (
            ("  latency_ms: 0\ndeadline", "  latency_ms: 100000000000000000\ndeadline"),
            "sink.latency_ms: Input should be less than or equal to 3600000",
        ),
        (
            ("  latency_ms: 0\ndeadline", "  latency_ms: 20001\ndeadline"),
            "sink.latency_ms is 20001, beyond",
        ),
        (
            ("tokens: 5000", "tokens: 1.0e+12"),
            "budgets.tokens: Input should be less than or equal to 1000000000",
        ),
        (
            ("iterations: 6", "iterations: 100000000000000000000000"),
            "budgets.iterations: Input should be less than or equal to",
        ),
        (
            ("tool_calls: 4", "tool_calls: 1.0e+23"),
            "budgets.tool_calls: Unable to parse input string as an integer, exceeded maximum size",
        ),
        (
            ("tool_calls: 4", "tool_calls: .inf"),
            "budgets.tool_calls: Input should be a finite number",
        ),
        (
            ("fail_first: 0", "fail_first: 1000000000"),
            "tools.0.behaviour.fail_first: Input should be less",
        ),
        (
            ("effect_then_fail: 0", "effect_then_fail: -3"),
            "effect_then_fail: Input should be greater",
        ),
        (("{refund_id: rf-1}", "{amount: .inf}"), "result: Value error, number at amount is inf"),
        (
            ('{order_id: "ord-{run}"}', "{cents: 9223372036854775807}"),
            "turns.0.tool_calls.0.arguments: Value error, integer at cents beyond ±(2^53 - 1)",
        ),
    ],
)
def test_unbounded_numbers_are_refused_with_the_field_named(tmp_path, change, problem):
    text = SCENARIO.replace(*change)
    assert text != SCENARIO
    assert problem in _refused(_write(tmp_path, text))


@pytest.mark.parametrize(
    "change,problem",
    [
        (
            ("lease_ms: 300", "lease_ms: 100000000000000000"),
            "lease_ms: Input should be less than or equal to 60000",
        ),
        (("lease_ms: 300", "lease_ms: .inf"), "lease_ms: Input should be a finite number"),
        (("{TINY_MODE: fast}", '{"TINY=MODE": fast}'), "env.TINY=MODE.[key]: Value error"),
        (
            ("{TINY_MODE: fast}", '{TINY_MODE: "fa\\0st"}'),
            "env.TINY_MODE: Value error, contains a NUL",
        ),
        (('"e.py", "migrate"', '"e.py\\0", "migrate"'), "migrate.1: Value error, contains a NUL"),
    ],
)
def test_engine_description_numbers_and_strings_are_bounded(tmp_path, change, problem):
    text = ENGINE.replace(*change)
    assert text != ENGINE
    path = _write(tmp_path, text, "engine.yaml")
    with pytest.raises(errors.CrashcertError) as raised:
        commands.load(path)
    assert problem in str(raised.value)


# -- 3. NUL characters in anything that reaches the engine or Postgres --------------------


@pytest.mark.parametrize(
    "change,field",
    [
        (("content: Refunded.", 'content: "Refunded.\\0"'), "turns.1.content"),
        (("user: Refund order ord-{run}.", 'user: "Refund\\0 ord-{run}."'), "input.user"),
        (("input:\n", 'input:\n  system: "be\\0 careful"\n'), "input.system"),
        (("{refund_id: rf-1}", '{refund_id: "rf-\\01"}'), "tools.0.behaviour.result"),
        (('{order_id: "ord-{run}"}', '{"order\\0id": x}'), "turns.0.tool_calls.0.arguments"),
        (("name: bad_input", 'name: bad_input\nnote: "\\0"'), "note"),
        (("name: bad_input", 'name: bad_input\ndescription: "a\\0"'), "description"),
        (("deadline_s: 20", 'deadline_s: 20\nexpect: {reason: "x\\0"}'), "expect.reason"),
    ],
)
def test_a_nul_in_scripted_text_is_refused(tmp_path, change, field):
    text = SCENARIO.replace(*change)
    assert text != SCENARIO
    message = _refused(_write(tmp_path, text))
    assert f"{field}: Value error" in message and "NUL character" in message, message
    assert "Postgres text cannot store it" in message


# -- 4. fault texts -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,problem",
    [
        (
            "db_cut@tools.pending#1?heal_after_s=abc",
            "heal_after_s=abc: expected a number of seconds",
        ),
        (
            "db_cut@tools.pending#1?heal_after_s=1e999",
            "heal_after_s=1e999: expected seconds above 0",
        ),
        ("db_cut@tools.pending#1?heal_after_s=-5", "heal_after_s=-5: expected seconds above 0"),
        ("db_cut@tools.pending#1?heal_after_s=nan", "heal_after_s=nan: expected seconds above 0"),
        ("pause@tools.pending#1?resume_after_s=-1", "resume_after_s=-1: expected seconds above 0"),
        ("latency@tools.pending#1?latency_ms=1e17", "latency_ms=1e17: expected whole milliseconds"),
        ("latency@tools.pending#1?latency_ms=0", "latency_ms=0: expected whole milliseconds"),
        ("kill@tools.pending#1?same_worker_id=yes", "same_worker_id=yes: expected true or false"),
        (
            "kill@tools.pending#1?bogus=1",
            "unknown param 'bogus'; known: after_chunks, grace_ms, heal_after_s, heal_at, "
            "latency_ms",
        ),
        (
            "db_cut@tools.pending#1?heal_after_s=1&heal_after_s=2",
            "param 'heal_after_s' given twice",
        ),
        ("commit_lost@tool.returned#1", "commit_lost strikes a COMMIT in flight, so it needs a"),
        ("commit_dropped@reply.sent#1", "and reply.sent has none; points with one: model.pending:"),
        (
            "commit_lost@tools.pending#1",
            "needs a :before_commit point: use tools.pending:before_commit",
        ),
        ("commit_lost@world:tool.effect#1", "and world:tool.effect has none"),
        ("kill@time:+99999s", "time:+99999s is beyond 3600 seconds"),
        ("explode@tools.pending#1", "action: Input should be 'kill'"),
    ],
)
def test_bad_fault_texts_are_refused_at_parse_time(text, problem):
    with pytest.raises(errors.CrashcertError) as raised:
        spec.parse(text)
    assert problem in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize(
    "text",
    [
        "latency@tool.started#1?latency_ms=50&heal_after_s=2.5",
        "db_cut@tool.started#1?heal_after_s=2",
        "db_cut@tools.pending#1?heal_at=tool.settled:before_commit#2",
        "commit_lost@tools.pending:before_commit#1",
        "commit_dropped@run.finished:before_commit",
        "pause@tools.pending#1?resume_after_s=0.5",
        "latency@tools.pending#1?latency_ms=3000",
        "kill@time:+2.5s",
    ],
)
def test_good_fault_texts_still_parse_and_round_trip(text):
    step = spec.parse(text)
    assert spec.parse(step.label()) == step


def test_a_scenario_with_a_bad_fault_names_the_field(tmp_path):
    text = SCENARIO + 'faults: ["commit_lost@tool.returned#1"]\n'
    assert "faults: Value error, bad fault 'commit_lost@tool.returned#1'" in _refused(
        _write(tmp_path, text)
    )


@pytest.mark.parametrize(
    "fault", ["db_cut@tools.pending#1?heal_after_s=abc", "commit_lost@tool.returned#1"]
)
def test_run_with_a_bad_fault_ends_in_one_line_and_exit_3(monkeypatch, capsys, fault):
    code, printed = _entry(monkeypatch, capsys, "run", "--scenario", "refund", "--fault", fault)
    assert code == 3
    assert printed.startswith(f"crashcert: bad fault {fault!r}: ") and printed.count("\n") == 1
    assert "Traceback" not in printed


# -- 5. soak ------------------------------------------------------------------------------


class _NoLab:
    """A soak refused up front touches nothing."""

    def __getattr__(self, name: str):
        raise AssertionError(f"the soak touched lab.{name} before checking its options")


@pytest.mark.parametrize(
    "options,problem",
    [
        ({"runs": 0}, "soak: runs must be from 1 to 100000, got 0"),
        ({"runs": 100_001}, "soak: runs must be from 1 to 100000, got 100001"),
        ({"workers": 0}, "soak: workers must be from 1 to 64, got 0"),
        ({"pg_restarts": -1}, "soak: pg_restarts must be from 0 to 100, got -1"),
        ({"storm_s": -5}, "soak: storm_s must be above 0 and at most 86400 seconds, got -5"),
        ({"storm_s": 0}, "soak: storm_s must be above 0"),
        (
            {"storm_s": float("inf")},
            "soak: storm_s must be above 0 and at most 86400 seconds, got inf",
        ),
        ({"storm_s": float("nan")}, "got nan"),
        ({"settle_s": -1.0}, "soak: settle_s must be above 0"),
    ],
)
def test_a_soak_that_would_test_nothing_is_refused(tmp_path, options, problem):
    with pytest.raises(errors.CrashcertError) as raised:
        soak.run_soak(_NoLab(), schema.find("refund"), out_dir=tmp_path, **options)  # type: ignore[arg-type]
    assert problem in str(raised.value)
