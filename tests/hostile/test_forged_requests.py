"""Another local user forges the scripted reply during a real trial (issue 33): with isolation
off the world's ports are open on 127.0.0.1, but a request without the trial's secret is
refused, recorded as foreign, and the reference engine's verdict stands."""

from __future__ import annotations

import json
import pathlib
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest

from harness.checkers import verdict
from harness.engines import commands
from harness.lab import shared
from harness.scenario import schema
from harness.trial import artifacts, runner
from harness.world import ledger
from harness.world import world as world_module

pytestmark = [pytest.mark.postgres, pytest.mark.toxiproxy]


def _post_without_secret(url: str, path: str, body: object) -> int:
    """What an outsider who found the port sends: the bare host and port, no secret."""
    parts = urllib.parse.urlsplit(url)
    request = urllib.request.Request(
        f"{parts.scheme}://{parts.netloc}{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Idempotency-Key": "forged"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        error.close()
        return error.code


class _ForgedWorld(world_module.World):
    """The trial's world, with an outsider who knows the run key (it names a worker's log)
    posting the run's scripted reply and its refund as soon as the model first answers:
    before the engine's own refund and reply, so the old world counted two of each."""

    answers: list[int] = []

    def start(self) -> None:
        super().start()
        self.hooks.model_answered = self._forge

    def _forge(self, request: ledger.ModelRequest) -> None:
        if _ForgedWorld.answers or request.run_key is None:
            return
        key = request.run_key
        reply = schema.substitute_run_key(self.scenario.final_reply or "", key)
        refund = {"order_id": f"ord-{key}", "amount_cents": 4999}
        _ForgedWorld.answers = [
            _post_without_secret(self.reply_url, "/replies", {"content": reply}),
            _post_without_secret(self.tools_url, "/tools/refund_order", refund),
        ]


@pytest.fixture(scope="module")
def lab() -> Iterator[shared.Lab]:
    with shared.open_lab(commands.find("reference")) as opened:
        yield opened


def test_a_forged_reply_is_refused_recorded_and_the_verdict_stands(
    lab: shared.Lab, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner.world_module, "World", _ForgedWorld)
    spec = runner.TrialSpec.under(schema.find("refund"), [], scenario_ref="refund")
    outcome = runner.run_trial(lab, spec, out_dir=tmp_path)

    assert _ForgedWorld.answers == [403, 403]
    assert outcome.verdict is verdict.Verdict.PASS, [r.summary for r in outcome.failing]
    assert [(e.service, e.path) for e in outcome.history.foreign] == [
        ("sink", "/replies"),
        ("tools", "/tools/refund_order"),
    ]
    results = {result.invariant: result for result in outcome.results}
    assert any("foreign request" in line for line in results["reply.single_delivery"].evidence)
    assert any("foreign request" in line for line in results["tool.at_most_once"].evidence)
    # Stored and read back with the history; the trial directory is the user's alone.
    (directory,) = artifacts.find_trials(tmp_path)
    assert len(artifacts.read_history(directory / "history.jsonl").foreign) == 2
    assert directory.stat().st_mode & 0o777 == 0o700
    assert all(log.stat().st_mode & 0o077 == 0 for log in (directory / "workers").iterdir())
