"""Stops an embedded cluster and removes its directory if the harness dies without cleaning up.

Run as a script by path (stdlib only, so it starts fast and needs no package import):

    python -I -S watchdog.py --fd N --pg-ctl PATH --datadir DIR --remove DIR [--uid U --gid G]

The harness keeps the write end of a pipe whose read end is fd N. Writing `disarm` means
"cleaned up normally, exit". EOF without `disarm` means the harness is gone (even by SIGKILL):
stop the postmaster with `pg_ctl stop -m immediate`, SIGKILL it if that fails, remove the
directory. Started in its own session, so Ctrl-C in the terminal does not reach it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import time

DISARM = b"disarm"
STOP_TIMEOUT_S = 30


def main() -> None:
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--pg-ctl", required=True)
    parser.add_argument("--datadir", required=True)
    parser.add_argument("--remove", required=True)
    parser.add_argument("--uid", type=int)
    parser.add_argument("--gid", type=int)
    args = parser.parse_args()
    received = b""
    while chunk := os.read(args.fd, 64):
        received += chunk
    if DISARM in received:
        return
    _stop(args)
    shutil.rmtree(args.remove, ignore_errors=True)


def _stop(args: argparse.Namespace) -> None:
    if not os.path.exists(os.path.join(args.datadir, "postmaster.pid")):
        return
    drop: dict[str, object] = {}
    if args.uid is not None:
        drop = {"user": args.uid, "group": args.gid, "extra_groups": []}
    try:
        subprocess.run(
            [args.pg_ctl, "stop", "-D", args.datadir, "-m", "immediate", "-w", "-s"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=STOP_TIMEOUT_S,
            check=False,
            cwd="/",
            **drop,  # type: ignore[call-overload]
        )
    except (OSError, subprocess.SubprocessError):
        pass
    pid = _postmaster_pid(args.datadir)
    if pid is not None:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        time.sleep(0.1)  # let the backends notice their postmaster died before rmtree


def _postmaster_pid(datadir: str) -> int | None:
    try:
        with open(os.path.join(datadir, "postmaster.pid")) as f:
            pid = int(f.readline().strip())
    except (OSError, ValueError):
        return None
    try:
        with open(f"/proc/{pid}/comm") as f:
            return pid if "postgres" in f.read() else None
    except OSError:
        return None


if __name__ == "__main__":
    main()
