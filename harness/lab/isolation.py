"""A private network for the lab: nobody else on the machine can reach what it listens on.

Postgres, Toxiproxy's admin API and proxies, the world's model, tools and sink, and the
workers all talk over 127.0.0.1. In a network namespace of its own that loopback is the
lab's alone: other users' processes (which stay in the machine's namespace) cannot connect
to any of it, so Toxiproxy can no longer be tampered with, only detected (proxy_audit).

Linux only. As root: unshare(CLONE_NEWNET). Otherwise: a user namespace that maps our own
uid and gid to themselves (we stay non-root inside, so Postgres runs as us, as it does
without isolation) plus the network namespace it owns. unshare moves only the calling
thread and what it starts afterwards, and CLONE_NEWUSER refuses a threaded process: call
this from the main thread before any thread or child process exists.
"""

from __future__ import annotations

import ctypes
import dataclasses
import fcntl
import os
import socket
import struct
import sys
import typing

from harness import errors

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
IFREQ = "16sH22x"  # struct ifreq: the name, then ifr_flags in a 24-byte union
LOOPBACK = "lo"
HOST = "127.0.0.1"
NETNS = "netns"
USERNS_NETNS = "userns+netns"
OFF = "off"

Mode = typing.Literal["auto", "netns", "off"]
MODES: tuple[Mode, ...] = ("auto", "netns", "off")


@dataclasses.dataclass(frozen=True)
class State:
    """What this process did: `used` is off, netns or userns+netns; `note` says it to a user."""

    used: str
    note: str
    chosen: str = "auto"  # the --isolation the user asked for: a rerun asks for it too

    @property
    def isolated(self) -> bool:
        return self.used != OFF


_state = State(OFF, "network isolation off")


def current() -> State:
    """The isolation of this process (the lab inherits it): recorded in every trial's meta."""
    return _state


def apply(mode: str, *, pg_dsn: str | None, owns_process: bool = True) -> State:
    """The --isolation rules, applied before the lab starts anything.

    auto: isolate when the lab owns every part (embedded Postgres, the local Toxiproxy
    binary, crashcert owning the process); otherwise stay off and say why. netns: isolate
    or raise EnvironmentProblem. off: nothing.
    """
    global _state
    if mode not in MODES:
        raise errors.CrashcertError(f"--isolation must be one of {', '.join(MODES)}, not {mode!r}")
    if _state.isolated or mode == OFF:
        if not _state.isolated:
            _state = State(OFF, "network isolation off (--isolation off)", chosen=OFF)
        return _state
    reason = _outside_part(pg_dsn)
    if reason is None and mode == "auto" and not owns_process:
        reason = "crashcert runs inside another program, whose network it must not take away"
    if reason is None:
        try:
            used = enter_private_network()
        except errors.EnvironmentProblem as error:
            if isinstance(error, PartlyIsolated):
                raise
            reason = str(error)
        else:
            _state = State(used, f"private network ({used})")
            return _state
    if mode == NETNS:
        raise errors.EnvironmentProblem(
            f"--isolation netns: cannot give the lab a private network: {reason} "
            "(use --isolation auto or off)"
        )
    _state = State(OFF, f"network isolation off: {reason}")
    return _state


class PartlyIsolated(errors.EnvironmentProblem):
    """unshare succeeded but the namespace could not be set up: the process cannot go back."""


def enter_private_network() -> str:
    """Move this process into a private network with loopback up; returns what was done.

    Raises EnvironmentProblem with the reason when the platform does not allow it.
    """
    if _state.isolated:
        return _state.used
    if not sys.platform.startswith("linux"):
        raise errors.EnvironmentProblem(
            f"network namespaces are Linux-only (this is {sys.platform})"
        )
    threads = _thread_count()
    if threads != 1:
        raise errors.EnvironmentProblem(
            f"{threads} threads already run; only a single-threaded process can move all of "
            "itself into a namespace"
        )
    uid, gid = os.geteuid(), os.getegid()
    as_root = uid == 0
    flags = CLONE_NEWNET if as_root else CLONE_NEWUSER | CLONE_NEWNET
    used = NETNS if as_root else USERNS_NETNS
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(ctypes.c_int(flags)) != 0:
        code = ctypes.get_errno()
        hint = "" if as_root else " (unprivileged user namespaces may be disabled)"
        raise errors.EnvironmentProblem(f"unshare({used}) refused: {os.strerror(code)}{hint}")
    try:
        if not as_root:
            _map_self(uid, gid)
        _loopback_up()
        _check_loopback()
    except OSError as error:
        raise PartlyIsolated(f"entered a new {used} but could not set it up: {error}") from error
    return used


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0  # no /proc: we cannot know, so we do not try


def _map_self(uid: int, gid: int) -> None:
    """Map our own ids to themselves; setgroups must be denied before an unprivileged gid_map."""
    _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
    _write("/proc/self/setgroups", "deny\n")
    _write("/proc/self/gid_map", f"{gid} {gid} 1\n")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _loopback_up() -> None:
    """A new namespace's only interface, lo, starts down: set IFF_UP (no `ip` binary needed)."""
    name = LOOPBACK.encode()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        answer = fcntl.ioctl(sock, SIOCGIFFLAGS, struct.pack(IFREQ, name, 0))
        flags = struct.unpack(IFREQ, answer)[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack(IFREQ, name, flags | IFF_UP))


def _check_loopback() -> None:
    """Refuse a namespace whose loopback does not carry a connection: the lab needs one."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind((HOST, 0))
        listener.listen(1)
        with socket.create_connection(listener.getsockname(), timeout=5):
            pass


def _outside_part(pg_dsn: str | None) -> str | None:
    """Why some part of the lab would live outside a private network, or None."""
    from harness.lab import toxiproxy_server
    from harness.lab.postgres import binaries, containers, provider

    if pg_dsn or os.environ.get(provider.DSN_ENV):
        return "the lab's Postgres is outside it (--pg-dsn or CRASHCERT_PG_DSN)"
    try:
        binaries.find_bindir()
    except errors.EnvironmentProblem:
        return "no local PostgreSQL binaries (Postgres would not be embedded)"
    # Found now, outside: building it needs the Go module proxy, which the namespace hides.
    if toxiproxy_server.find_binary() is None and containers.docker_engine_answers():
        return "Toxiproxy would run in a container, outside it (no local toxiproxy-server)"
    return None
