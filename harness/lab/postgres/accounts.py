"""Which OS account runs Postgres: initdb and postgres refuse to run as root."""

from __future__ import annotations

import dataclasses
import os
import pwd

from harness import errors

USER_ENV = "CRASHCERT_PG_USER"
DEFAULT_USER = "postgres"


@dataclasses.dataclass(frozen=True)
class Account:
    """An unprivileged account to run the server binaries as (only used when we are root)."""

    name: str
    uid: int
    gid: int


def server_account() -> Account | None:
    """None when we are not root (run as ourselves); else the unprivileged account to use."""
    if os.geteuid() != 0:
        return None
    name = os.environ.get(USER_ENV, DEFAULT_USER)
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise errors.EnvironmentProblem(
            f"running as root, and PostgreSQL refuses to run as root, but there is no "
            f"unprivileged user {name!r} to run it as: create one (useradd --system {name}), "
            f"set {USER_ENV} to an existing unprivileged user, or run the harness as non-root"
        ) from None
    if entry.pw_uid == 0:
        raise errors.EnvironmentProblem(f"{USER_ENV}={name!r} is root; PostgreSQL refuses root")
    return Account(name=name, uid=entry.pw_uid, gid=entry.pw_gid)


def run_kwargs(account: Account | None) -> dict[str, object]:
    """subprocess keyword arguments that drop privileges to `account` (nothing if None)."""
    if account is None:
        return {}
    return {"user": account.uid, "group": account.gid, "extra_groups": []}
