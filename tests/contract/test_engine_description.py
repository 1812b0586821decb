"""Engine description files are validated at the edge with errors naming file and field."""

from __future__ import annotations

import pytest

from harness import errors
from harness.engines import commands

VALID = """
name: tiny
migrate: ["{python}", "e.py", "migrate"]
worker: ["{python}", "-m", "tiny", "worker"]
submit: ["{python}", "e.py", "submit"]
status: ["{python}", "e.py", "status", "{run_id}"]
boundaries: [run.claimed, tools.pending:before_commit]
lease_ms: 300
"""


def test_a_valid_description(tmp_path):
    path = tmp_path / "engine.yaml"
    path.write_text(VALID)
    engine = commands.load(path)
    assert engine.boundaries == ("run.claimed", "tools.pending:before_commit")
    assert engine.lease_ms == 300
    assert engine.worker_command()[1:] == ["-m", "tiny", "worker"]


@pytest.mark.parametrize(
    "change,problem",
    [
        (("lease_ms: 300", "lease_ms: 5"), "lease_ms: Input should be greater than or equal to 50"),
        (
            ("lease_ms: 300", "lease_ms: 60001"),
            "lease_ms: Input should be less than or equal to 60000",
        ),
        (
            ("tools.pending:before_commit", "tools.pendin"),
            "unknown boundary points ['tools.pendin']",
        ),
        (('worker: ["{python}", "-m", "tiny", "worker"]\n', ""), "worker: Field required"),
        (("name: tiny", "name: tiny\nflavour: mint"), "flavour: Extra inputs are not permitted"),
        # A script worker cannot be forked from the warm server: say so, and how to fix it.
        (
            ('"-m", "tiny", "worker"]', '"agent.py", "worker"]\npreload: [json]'),
            "preload needs a worker started as a module, `[python, -m, module, ...]`; "
            "worker '{python} agent.py worker' is a script",
        ),
    ],
)
def test_invalid_descriptions_name_file_and_field(tmp_path, change, problem):
    path = tmp_path / "engine.yaml"
    path.write_text(VALID.replace(*change))
    with pytest.raises(errors.CrashcertError) as raised:
        commands.load(path)
    assert str(path) in str(raised.value)
    assert problem in str(raised.value)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(errors.CrashcertError, match="cannot read engine description"):
        commands.load(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed")
    with pytest.raises(errors.CrashcertError, match="not valid YAML"):
        commands.load(bad)


def test_preload_with_a_module_worker_is_kept(tmp_path):
    path = tmp_path / "engine.yaml"
    path.write_text(VALID + "preload: [json]\n")
    assert commands.load(path).preload == ("json",)
