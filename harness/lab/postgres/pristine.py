"""One freshly initdb'd data directory per machine, copied into each new cluster.

initdb costs 1.5-3 s of CPU on 2 cores, and every `crashcert` process (each CLI command a
test starts) makes a cluster: a copy of a pristine data directory costs ~0.1 s. The copy
then gets its own random superuser password in single-user mode before it ever listens, so
no two clusters share a secret (embedded.py).

The pristine directory lives in the user's crashcert cache (`CRASHCERT_CACHE`, else
~/.cache/crashcert), keyed by the server binaries and the initdb arguments. A cache another
account could write to is a way to plant a cluster (a postgresql.conf whose
archive_command runs code): it is used only when every directory on its path below the
cache root is ours, not a link, and writable by nobody else; otherwise the caller runs
initdb itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import shutil
import stat
import subprocess
import tempfile

from harness.lab import cache

# Bumped when what is kept changes shape (a stale pristine copy is never reused).
LAYOUT = "1"
READY = "PG_VERSION"  # initdb writes it; a directory without it is half made


def key(bindir: pathlib.Path, initdb_args: list[str]) -> str:
    """Which binaries and which initdb arguments made the copy (a server upgrade, another
    locale or superuser name is another copy)."""
    postgres = bindir / "postgres"
    facts = [LAYOUT, str(postgres.resolve()), *initdb_args]
    with contextlib.suppress(OSError):
        status = postgres.stat()
        facts += [str(status.st_size), str(status.st_mtime_ns)]
    return hashlib.sha256("\0".join(facts).encode()).hexdigest()[:16]


def copy_into(datadir: pathlib.Path, cache_key: str, *, owner: tuple[int, int] | None) -> bool:
    """Fill the new `datadir` from the pristine copy. False when there is none yet or the
    cache cannot be trusted: the caller then runs initdb itself (and may `keep` the result)."""
    home = _private_dir(cache.cache_dir() / "pgdata")
    if home is None or not (home / cache_key / READY).is_file():
        return False
    _copy(home / cache_key, datadir)
    if owner is not None:
        _chown_tree(datadir, owner)
    os.chmod(datadir, 0o700)  # postgres refuses a data directory others can read
    return True


def keep(datadir: pathlib.Path, cache_key: str) -> None:
    """Keep a copy of a just-initdb'd `datadir` (before any setting or start) as the
    pristine one. Copied beside the cache and renamed in, so a concurrent keeper's copy wins
    whole; a cache that cannot be trusted or written is left alone."""
    home = _private_dir(cache.cache_dir() / "pgdata")
    if home is None or (home / cache_key / READY).is_file():
        return
    scratch = pathlib.Path(tempfile.mkdtemp(prefix=".making-", dir=home))
    try:
        target = scratch / "data"
        _copy(datadir, target)
        _chown_tree(target, (os.geteuid(), os.getegid()))
        with contextlib.suppress(OSError):  # another process kept one first
            target.rename(home / cache_key)
    except OSError:
        pass  # a full disk: the next cluster runs initdb again
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _copy(source: pathlib.Path, target: pathlib.Path) -> None:
    """cp -a: ~40 MB of ~1,000 files, several times faster than shutil.copytree."""
    result = subprocess.run(
        ["cp", "-a", "--reflink=auto", "--", str(source), str(target)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise OSError(f"cp -a {source} {target} failed: {result.stderr.strip()}")


def _private_dir(path: pathlib.Path) -> pathlib.Path | None:
    """`path`, made if missing, when it and its parents up to the cache root are ours,
    real directories, and writable by no one else; else None."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        for directory in (path, path.parent):
            status = os.lstat(directory)
            if (
                not stat.S_ISDIR(status.st_mode)
                or status.st_uid != os.geteuid()
                or status.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            ):
                return None
    except OSError:
        return None
    return path


def _chown_tree(root: pathlib.Path, owner: tuple[int, int]) -> None:
    os.chown(root, *owner, follow_symlinks=False)
    for parent, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            os.chown(os.path.join(parent, name), *owner, follow_symlinks=False)
