"""Is the lab's Toxiproxy as the harness left it? Another local user's tampering shows here.

Toxiproxy's admin API has no authentication: any local user can add a proxy that
republishes the lab's Postgres on 0.0.0.0, or delete, disable, move or poison ours. At the
end of every trial and when the lab closes, the server's proxies are compared with the
client's ledger (harness.lab.proxy.Ledger: every proxy the lab made, as made and as last set).
A difference is tampering: the trial is an ERROR (harness or environment broke), never a
PASS or FAIL. A foreign proxy is deleted on sight, so it stops republishing Postgres.

Trials run in parallel on one server: a trial judges only its own proxies and foreign
ones (made by no trial of the lab); a foreign proxy another trial's audit removed while
this trial ran is reported to this trial too.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable, Iterator

from harness import errors
from harness.lab import proxy

log = logging.getLogger(__name__)

PREFIX = "toxiproxy: "


def audit_trial(client: proxy.Toxiproxy, own: Iterable[proxy.Proxy], *, since: float) -> list[str]:
    """Findings at a trial's end, after the nemesis healed: its proxies must be as made,
    enabled as the harness left them, with no toxic; and there must be no foreign proxy.

    `since` is the trial's start (time.monotonic()).
    """
    listed_at = time.monotonic()
    listing = client.listing()
    findings = [finding for made in own for finding in _judge(made, listing, healed=True)]
    _remove_foreign(client, listing, listed_at=listed_at)
    return findings + client.ledger.removed_since(since)


def audit_lab(client: proxy.Toxiproxy) -> list[str]:
    """Findings when the lab closes: every proxy still on the server is one the lab made,
    exactly as the harness left it; foreign ones are deleted."""
    listed_at = time.monotonic()
    listing = client.listing()
    findings = [
        finding
        for made in client.ledger.made().values()
        if made is not None
        for finding in _judge(made, listing, healed=False)
    ]
    return findings + _remove_foreign(client, listing, listed_at=listed_at)


def check_trial(client: proxy.Toxiproxy, own: Iterable[proxy.Proxy], *, since: float) -> None:
    """`audit_trial`, raised as the trial's harness error when it found anything."""
    _raise(audit_trial(client, own, since=since))


@contextlib.contextmanager
def at_lab_close(client: proxy.Toxiproxy) -> Iterator[None]:
    """Audit when the block ends: raise what it found, unless an error is already on its
    way out (that one stays the error; the findings are logged)."""
    try:
        yield
    except BaseException:
        try:
            findings = audit_lab(client)
        except errors.CrashcertError as error:
            log.warning("toxiproxy audit at lab close impossible: %s", error)
        else:
            if findings:
                log.error("%s", _message(findings))
        raise
    _raise(audit_lab(client))


def _raise(findings: list[str]) -> None:
    if findings:
        raise errors.EnvironmentProblem(_message(findings))


def _message(findings: list[str]) -> str:
    """One line of evidence for the trial: `toxiproxy: finding; finding`."""
    return PREFIX + "; ".join(findings)


def _judge(made: proxy.Proxy, listing: dict[str, proxy.Json], *, healed: bool) -> list[str]:
    """How the server's copy of a proxy the harness made differs from the harness's record."""
    name = made.name
    info = listing.get(name)
    if info is None:
        return [f"proxy {name!r} made by this lab is gone (deleted by someone else)"]
    found = []
    if info["listen"] != made.listen:
        where = "" if proxy.listens_on_loopback(info["listen"]) else " beyond loopback"
        found.append(
            f"proxy {name!r} now listens on {info['listen']}{where} (made on {made.listen})"
        )
    if info["upstream"] != made.upstream:
        found.append(
            f"proxy {name!r} now forwards to {info['upstream']} (made for {made.upstream})"
        )
    if bool(info.get("enabled")) != made.enabled:
        found.append(
            f"proxy {name!r} is {_state(bool(info.get('enabled')))} "
            f"(the harness left it {_state(made.enabled)})"
        )
    for toxic in info.get("toxics") or []:
        toxic_name = toxic.get("name")
        if toxic_name not in made.toxic_names:
            found.append(
                f"toxic {toxic_name!r} ({toxic.get('type')}) on proxy {name!r} "
                "not added by this harness"
            )
        elif healed:
            found.append(f"toxic {toxic_name!r} on proxy {name!r} still there after the heal")
    return found


def _remove_foreign(
    client: proxy.Toxiproxy, listing: dict[str, proxy.Json], *, listed_at: float
) -> list[str]:
    """Delete every listed proxy the lab did not make; the evidence, also noted in the
    ledger for concurrent trials."""
    # Read after the listing: a proxy being made was claimed before the server had it.
    ours = client.ledger.ours(listed_at=listed_at)
    found = []
    for name, info in listing.items():
        if name in ours:
            continue
        listen = str(info.get("listen"))
        where = "" if proxy.listens_on_loopback(listen) else " beyond loopback"
        line = (
            f"unexpected proxy {name!r} listening on {listen}{where} (not made by this "
            f"lab) forwarding to {info.get('upstream')}"
        )
        try:
            client.delete(name)
        except errors.CrashcertError as error:
            line += f"; could not delete it: {error}"
        else:
            line += "; deleted"
        client.ledger.note_removed(name, line)
        found.append(line)
    return found


def _state(enabled: bool) -> str:
    return "enabled" if enabled else "disabled"
