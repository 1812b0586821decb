"""Real trials on a shared lab: another local user's work at the Toxiproxy admin API makes
the trial an ERROR with one line of evidence; the lab's own concurrent trials and healed
database cuts do not."""

from __future__ import annotations

import concurrent.futures
import pathlib
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from harness.checkers import liveness, verdict
from harness.engines import commands
from harness.lab import database_links, proxy, proxy_audit, shared
from harness.lab.postgres import dsn as pg_dsn
from harness.scenario import schema
from harness.trial import runner as trial
from tests import fix_proxy

pytestmark = [pytest.mark.matrix, pytest.mark.postgres, pytest.mark.toxiproxy]

CONNECT_TIMEOUT_S = 2
CUT = "db_cut@tools.pending#1"


@pytest.fixture(scope="module")
def lab(toxiproxy_binary: pathlib.Path) -> Iterator[shared.Lab]:
    # Its close audits the server too: a test that leaves tampering behind errors there.
    with shared.open_lab(commands.find("reference"), require_toxiproxy=True) as opened:
        yield opened


def _toxiproxy(lab: shared.Lab) -> proxy.Toxiproxy:
    assert lab.toxiproxy is not None
    return lab.toxiproxy  # type: ignore[no-any-return]


def _run(lab: shared.Lab, out: pathlib.Path, name: str, faults: list[str]) -> Any:
    spec = trial.TrialSpec.under(schema.find(name), faults, scenario_ref=name)
    return trial.run_trial(lab, spec, out_dir=out)


def _while_the_run_is_in_flight(
    monkeypatch: pytest.MonkeyPatch, *, before: Any = None, after: Any = None
) -> None:
    """Call before(history) once the workers run, after(history) once the run is terminal."""
    real_wait = trial._wait_terminal

    def wait(engine: Any, dsn: str, history: Any, *args: Any) -> None:
        if before:
            before(history)
        real_wait(engine, dsn, history, *args)
        if after:
            after(history)

    monkeypatch.setattr(trial, "_wait_terminal", wait)


def test_a_proxy_another_user_adds_during_a_trial_makes_it_an_error(
    lab: shared.Lab, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = _toxiproxy(lab)
    name = f"intruder-{uuid.uuid4().hex[:6]}"
    upstream = f"{lab.pg.host}:{lab.pg.port}"
    added: dict[str, Any] = {}

    def intrude(history: Any) -> None:
        request = {"name": name, "listen": "0.0.0.0:0", "upstream": upstream}
        added["uid"], added["proxy"] = fix_proxy.as_another_user(
            client, "POST", "/proxies", request
        )
        # What is at stake: the lab's Postgres answers on that port, on every interface.
        port = int(added["proxy"]["listen"].rsplit(":", 1)[1])
        through = pg_dsn.with_address(lab.pg.dsn, host="127.0.0.1", port=port)
        with psycopg.connect(through, connect_timeout=CONNECT_TIMEOUT_S) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)

    _while_the_run_is_in_flight(monkeypatch, before=intrude)
    outcome = _run(lab, tmp_path, "refund", [])

    listen = added["proxy"]["listen"]
    line = (
        f"toxiproxy: unexpected proxy '{name}' listening on {listen} beyond loopback "
        f"(not made by this lab) forwarding to {upstream}; deleted"
    )
    assert outcome.verdict is verdict.Verdict.ERROR, outcome.repro
    assert outcome.history.harness_error == f"EnvironmentProblem: {line}"
    judged = next(r for r in outcome.results if r.invariant == liveness.INVARIANT)
    assert judged.evidence == [f"harness_error: EnvironmentProblem: {line}"]
    assert name not in client.listing()  # Postgres is no longer republished


def test_own_proxies_another_user_disables_or_deletes_make_the_trial_an_error(
    lab: shared.Lab, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = _toxiproxy(lab)
    names: list[str] = []

    def tamper(history: Any) -> None:
        prefix = f"cc_trial_{history.trial_id}-"
        names.extend(sorted(n for n in client.ledger.made() if n.startswith(prefix)))
        fix_proxy.as_another_user(client, "POST", f"/proxies/{names[0]}", {"enabled": False})
        fix_proxy.as_another_user(client, "DELETE", f"/proxies/{names[1]}")

    _while_the_run_is_in_flight(monkeypatch, after=tamper)
    outcome = _run(lab, tmp_path, "refund", [])

    assert outcome.verdict is verdict.Verdict.ERROR, outcome.repro
    assert outcome.history.harness_error == (
        f"EnvironmentProblem: toxiproxy: proxy '{names[0]}' is disabled (the harness left it "
        f"enabled); proxy '{names[1]}' made by this lab is gone (deleted by someone else)"
    )


def test_concurrent_trials_with_healed_db_cuts_pass_the_audit(
    lab: shared.Lab, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two trials at once (as --jobs 2) plus a third trial's proxy alive throughout: every
    audit runs, sees the others' proxies and flags none."""
    audits: list[tuple[list[str], set[str], list[str]]] = []
    real_audit = proxy_audit.audit_trial

    def spy(client: proxy.Toxiproxy, own: Any, *, since: float) -> list[str]:
        mine = list(own)
        others = set(client.listing()) - {p.name for p in mine}
        findings = real_audit(client, mine, since=since)
        audits.append(([p.name for p in mine], others, findings))
        return findings

    monkeypatch.setattr(proxy_audit, "audit_trial", spy)
    bystander = database_links.DatabaseLinks(lab, lab.pg.dsn, prefix="cc_trial_bystander")
    bystander.dsn_for("w1")
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        runs = [pool.submit(_run, lab, tmp_path, name, [CUT]) for name in ("refund", "email_send")]
        outcomes = [run.result() for run in runs]
    bystander.close()

    for outcome in outcomes:
        assert outcome.verdict is verdict.Verdict.PASS, [
            f"{r.invariant}: {r.summary} {r.evidence}" for r in outcome.failing
        ]
        assert [f.action for f in outcome.history.faults()] == ["db_cut", "heal"]
    assert len(audits) == 3  # both trials and the bystander
    for mine, others, findings in audits[:2]:
        assert len(mine) >= 2 and "cc_trial_bystander-w1" in others
        assert findings == []
    assert audits[2][2] == []
