"""The Toxiproxy audit against a real server: another local user's proxies and changes are
found (foreign proxies deleted), the lab's own concurrent trials are not."""

from __future__ import annotations

import os
import pathlib
import pwd
import socket
import threading
import time

import pytest

from harness import errors
from harness.lab import proxy, proxy_audit, toxiproxy_server
from harness.nemesis import nemesis
from tests import fix_proxy

UPSTREAM = "127.0.0.1:9"  # nothing needs to answer there: the audit reads the API only
CHURN = 60  # proxies a concurrent trial makes and deletes while this one audits
BLOCKED_S = 0.3  # long enough to see close() still waiting for a heal


def _made_by_another_user(uid: int) -> None:
    """When we are root, the request really came from `nobody`."""
    if os.geteuid() == 0 and fix_proxy.another_user_argv()[0].endswith("runuser"):
        assert uid == pwd.getpwnam(fix_proxy.ANOTHER_USER).pw_uid


def _port(listen: str) -> int:
    return int(listen.rsplit(":", 1)[1])


@pytest.mark.parametrize(
    ("listen", "loopback"),
    [
        ("127.0.0.1:5432", True),
        ("127.8.9.10:1", True),
        ("[::1]:5432", True),
        ("[::ffff:127.0.0.1]:5432", True),
        ("0.0.0.0:5432", False),
        ("[::]:5432", False),
        (":5432", False),
        ("localhost:5432", False),
        ("10.0.0.1:5432", False),
    ],
)
def test_loopback_means_127_8_or_ipv6_loopback(listen: str, loopback: bool) -> None:
    assert proxy.listens_on_loopback(listen) is loopback


def test_proxies_are_never_made_beyond_loopback() -> None:
    client = proxy.Toxiproxy("127.0.0.1", 1)  # refused before any request is sent
    for listen in ("0.0.0.0:0", ":0", "[::]:0"):
        with pytest.raises(errors.CrashcertError, match="not loopback") as raised:
            client.create("p", UPSTREAM, listen=listen)
        assert not isinstance(raised.value, errors.EnvironmentProblem)
    assert client.ledger.made() == {}


def test_nemesis_close_waits_for_a_heal_another_thread_is_running() -> None:
    """Otherwise the audit right after close() could see a toxic half removed."""
    fury = nemesis.Nemesis(
        [],
        launcher=None,
        recorder=None,
        proxies=None,
        pg=None,
        lease_s=1.0,  # type: ignore[arg-type]
    )
    healing, release, healed = threading.Event(), threading.Event(), threading.Event()

    def slow_heal() -> None:
        healing.set()
        release.wait()
        healed.set()

    fury._schedule(0.0, slow_heal, "heal")
    assert healing.wait(5)
    closer = threading.Thread(target=fury.close)
    closer.start()
    closer.join(BLOCKED_S)
    assert closer.is_alive(), "close() returned while the heal was still running"
    release.set()
    closer.join(5)
    assert not closer.is_alive() and healed.is_set()


@pytest.mark.toxiproxy
def test_admin_api_listens_on_loopback_only(toxiproxy_binary: pathlib.Path) -> None:
    server = toxiproxy_server.start(binary=toxiproxy_binary)
    try:
        assert server.admin_addresses() == ["127.0.0.1"]
    finally:
        server.close()


@pytest.mark.toxiproxy
def test_a_foreign_proxy_of_another_user_is_reported_and_deleted(
    private_toxiproxy: proxy.Toxiproxy,
) -> None:
    client = private_toxiproxy
    own = client.create("cc_trial_a-w1", UPSTREAM)
    uid, intruder = fix_proxy.as_another_user(
        client,
        "POST",
        "/proxies",
        {"name": "intruder", "listen": "0.0.0.0:0", "upstream": UPSTREAM},
    )
    _made_by_another_user(uid)
    port = _port(intruder["listen"])
    socket.create_connection(("127.0.0.1", port), timeout=2).close()  # it is published

    findings = proxy_audit.audit_trial(client, [own], since=0.0)

    assert findings == [
        f"unexpected proxy 'intruder' listening on {intruder['listen']} beyond loopback "
        f"(not made by this lab) forwarding to {UPSTREAM}; deleted"
    ]
    assert set(client.listing()) == {own.name}
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


@pytest.mark.toxiproxy
def test_check_trial_raises_one_line_naming_the_intruder(
    private_toxiproxy: proxy.Toxiproxy,
) -> None:
    client = private_toxiproxy
    fix_proxy.as_another_user(
        client, "POST", "/proxies", {"name": "x", "listen": "0.0.0.0:0", "upstream": UPSTREAM}
    )
    with pytest.raises(errors.EnvironmentProblem) as raised:
        proxy_audit.check_trial(client, [], since=time.monotonic())
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("toxiproxy: unexpected proxy 'x' listening on [::]:")
    assert message.endswith("(not made by this lab) forwarding to 127.0.0.1:9; deleted")


@pytest.mark.toxiproxy
def test_own_proxies_deleted_disabled_moved_or_poisoned_are_reported(
    private_toxiproxy: proxy.Toxiproxy,
) -> None:
    client = private_toxiproxy
    gone, cut, moved, poisoned, fine = (
        client.create(f"cc_trial_a-w{i}", UPSTREAM) for i in range(1, 6)
    )
    fix_proxy.as_another_user(client, "DELETE", f"/proxies/{gone.name}")
    fix_proxy.as_another_user(client, "POST", f"/proxies/{cut.name}", {"enabled": False})
    _, now = fix_proxy.as_another_user(
        client, "POST", f"/proxies/{moved.name}", {"listen": "0.0.0.0:0"}
    )
    fix_proxy.as_another_user(
        client,
        "POST",
        f"/proxies/{poisoned.name}/toxics",
        {"name": "slow", "type": "latency", "attributes": {"latency": 1000}},
    )

    findings = proxy_audit.audit_trial(client, [gone, cut, moved, poisoned, fine], since=0.0)

    assert findings == [
        "proxy 'cc_trial_a-w1' made by this lab is gone (deleted by someone else)",
        "proxy 'cc_trial_a-w2' is disabled (the harness left it enabled)",
        f"proxy 'cc_trial_a-w3' now listens on {now['listen']} beyond loopback "
        f"(made on {moved.listen})",
        "toxic 'slow' (latency) on proxy 'cc_trial_a-w4' not added by this harness",
    ]


@pytest.mark.toxiproxy
def test_a_healed_trial_passes_and_a_heal_left_undone_does_not(
    private_toxiproxy: proxy.Toxiproxy,
) -> None:
    client = private_toxiproxy
    cut, poisoned = client.create("cc_trial_a-w1", UPSTREAM), client.create("cc_trial_a-w2")
    with cut.cut():
        pass
    toxic = poisoned.add_toxic("latency", attributes={"latency": 10})
    poisoned.remove_toxic(toxic)
    assert proxy_audit.audit_trial(client, [cut, poisoned], since=0.0) == []

    poisoned.add_toxic("latency", attributes={"latency": 10})
    cut.disable()
    assert proxy_audit.audit_trial(client, [cut, poisoned], since=0.0) == [
        "toxic 'latency_downstream' on proxy 'cc_trial_a-w2' still there after the heal"
    ]
    assert proxy_audit.audit_lab(client) == []  # exactly as the harness left them


@pytest.mark.toxiproxy
def test_proxies_of_a_concurrent_trial_are_not_flagged(
    private_toxiproxy: proxy.Toxiproxy,
) -> None:
    """Another trial of the lab makes and deletes its proxies while this one audits, over
    and over: none is ever taken for foreign, not even one caught halfway through create."""
    client = private_toxiproxy
    own = client.create("cc_trial_a-w1", UPSTREAM)
    lasting = client.create("cc_trial_b-w1", UPSTREAM)
    lasting.disable()  # the other trial's fault, not healed yet: its business, not ours
    stop = threading.Event()
    made = []

    def other_trial() -> None:
        for index in range(CHURN):
            if stop.is_set():
                return
            made.append(client.create(f"cc_trial_b-w{index + 2}", UPSTREAM))
            made[-1].delete()

    churn = threading.Thread(target=other_trial)
    churn.start()
    audits = 0
    try:
        while churn.is_alive() or audits == 0:
            assert proxy_audit.audit_trial(client, [own], since=0.0) == []
            audits += 1
    finally:
        stop.set()
        churn.join()
    assert len(made) == CHURN and audits > 1
    assert set(client.listing()) == {own.name, lasting.name}


@pytest.mark.toxiproxy
def test_a_foreign_proxy_removed_by_one_trial_is_reported_to_those_that_ran_alongside(
    private_toxiproxy: proxy.Toxiproxy,
) -> None:
    client = private_toxiproxy
    alongside = time.monotonic()
    fix_proxy.as_another_user(
        client, "POST", "/proxies", {"name": "x", "listen": "127.0.0.1:0", "upstream": UPSTREAM}
    )
    first = proxy_audit.audit_trial(client, [], since=time.monotonic())
    assert [line.split(" listening")[0] for line in first] == ["unexpected proxy 'x'"]
    assert proxy_audit.audit_trial(client, [], since=alongside) == first
    assert proxy_audit.audit_trial(client, [], since=time.monotonic()) == []


@pytest.mark.toxiproxy
def test_lab_close_reports_and_deletes_a_foreign_proxy(
    private_toxiproxy: proxy.Toxiproxy,
) -> None:
    client = private_toxiproxy
    client.create("cc_trial_a-w1", UPSTREAM)  # a leftover of the lab's own: not tampering
    request = {"name": "x", "listen": "0.0.0.0:0", "upstream": UPSTREAM}
    fix_proxy.as_another_user(client, "POST", "/proxies", request)
    with pytest.raises(errors.EnvironmentProblem, match="toxiproxy: unexpected proxy 'x'"):
        with proxy_audit.at_lab_close(client):
            pass
    assert set(client.listing()) == {"cc_trial_a-w1"}

    # An error already on its way out stays the error; the intruder is deleted all the same.
    fix_proxy.as_another_user(client, "POST", "/proxies", request)
    with pytest.raises(KeyboardInterrupt):
        with proxy_audit.at_lab_close(client):
            raise KeyboardInterrupt
    assert set(client.listing()) == {"cc_trial_a-w1"}
