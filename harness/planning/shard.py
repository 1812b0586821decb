"""Shards of a crash matrix: a deterministic split of its trials across CI runners.

A trial belongs to the shard its stable name hashes to (scenario name and plan label, never
its position in the list), so every machine splits the same plan the same way. Every shard
runs every baseline: the fault trials are derived from the baselines' traces, and the
fingerprint of the whole plan (every trial's name, in order) is how a merge tells shards of
one plan from shards of another. The merged report counts each baseline once. `certify`
and `explore` shard the same way (harness/shards/merge_certify.py, merge_explore.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Sequence

from harness import errors, provenance

# A shard's record in its output directory, read by `crashcert merge`.
RECORD = "shard.json"
# What a shard is a shard of (a record without a kind is a matrix's).
MATRIX, CERTIFY, EXPLORE = "matrix", "certify", "explore"
# More shards than CI runs jobs in parallel is a typo (or an attack on merge's memory).
MAX_SHARDS = 1000
_SPEC = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclasses.dataclass(frozen=True)
class Shard:
    index: int  # 1-based, as CI systems number their parallel jobs
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, scenario: str, label: str) -> bool:
        return owner(scenario, label, self.count) == self.index


def parse(text: str) -> Shard:
    """`I/N` with 1 <= I <= N."""
    match = _SPEC.fullmatch(text)
    if not match:
        raise errors.CrashcertError(f"--shard {text!r}: expected I/N, e.g. 2/4")
    if any(len(group) > len(str(MAX_SHARDS)) for group in match.groups()):
        # int() of thousands of digits is refused by Python itself (or is slow): far too many
        raise errors.CrashcertError(f"--shard {text[:40]!r}: N must be at most {MAX_SHARDS}")
    index, count = int(match.group(1)), int(match.group(2))
    if not 1 <= index <= count:
        raise errors.CrashcertError(f"--shard {text!r}: I must be between 1 and N")
    if count > MAX_SHARDS:
        raise errors.CrashcertError(f"--shard {text!r}: N must be at most {MAX_SHARDS}")
    return Shard(index, count)


def owner(scenario: str, label: str, count: int) -> int:
    """The 1-based shard of a trial: a hash of its name, the same on every machine."""
    digest = hashlib.sha256(f"{scenario}\n{label}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def fingerprint(*, engine: str, seed: int, planned: Sequence[Sequence[str]]) -> str:
    """Names the whole plan: shards of one matrix carry the same fingerprint."""
    text = json.dumps({"engine": engine, "seed": seed, "trials": planned}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def crashcert_identity() -> dict[str, str | None]:
    """Which crashcert ran a shard: shards of different versions are not merged."""
    return {"version": provenance.version(), "revision": provenance.git_revision()}


def record(
    shard: Shard,
    *,
    engine: str,
    seed: int,
    planned: Sequence[Sequence[str]],
    kind: str = MATRIX,
) -> dict[str, object]:
    """What a shard writes beside its trials so that a merge can check and order them."""
    return {
        "kind": kind,
        "index": shard.index,
        "count": shard.count,
        "fingerprint": fingerprint(engine=engine, seed=seed, planned=planned),
        "crashcert": crashcert_identity(),
        "engine": engine,
        "seed": seed,
        "planned": [list(name) for name in planned],
    }
