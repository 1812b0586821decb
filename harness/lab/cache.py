"""The user's crashcert cache: built tools and the pristine Postgres data directory."""

from __future__ import annotations

import os
import pathlib

CACHE_ENV = "CRASHCERT_CACHE"


def cache_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get(CACHE_ENV) or pathlib.Path.home() / ".cache" / "crashcert")
