"""`frontier.monotonic`: checkpoint versions only grow and phases follow allowed transitions.

Two sources: the (frontier_version, phase) an engine puts in after-commit hits, and the
reference engine's `checkpoints` table. Versions grow by one per checkpoint, so between
two observations `k` versions apart the phase must be reachable in exactly `k` steps.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from harness.checkers import facts, verdict
from harness.record import history as history_module

INVARIANT = "frontier.monotonic"

ALLOWED: dict[str, frozenset[str]] = {
    "model_ready": frozenset({"model_pending"}),
    "model_pending": frozenset({"model_pending", "tools_pending", "reply_ready"}),
    "tools_pending": frozenset({"tools_pending", "model_ready"}),
    "reply_ready": frozenset({"reply_ready"}),
}


def reachable(phase: str, steps: int) -> frozenset[str]:
    """Phases reachable from `phase` in exactly `steps` checkpoints."""
    current = frozenset({phase})
    for _ in range(min(steps, 2 * len(ALLOWED) + 1)):  # the sets settle quickly
        current = frozenset(
            target for source in current for target in ALLOWED.get(source, frozenset())
        )
    return current


Observation = tuple[int, str | None, str]  # (version, phase, where)


def _compare(previous: Observation, current: Observation, source: str) -> str | None:
    """What is wrong with `current` committed after `previous`, if anything."""
    old_version, old_phase, old_where = previous
    version, phase, where = current
    if version < old_version:
        return (
            f"{source}: version went down from {old_version} ({old_where}) to {version} ({where})"
        )
    if version == old_version and phase != old_phase and None not in (phase, old_phase):
        return (
            f"{source}: version {version} has phase {old_phase} ({old_where}) and {phase} ({where})"
        )
    if version > old_version and old_phase and phase:
        if phase not in reachable(old_phase, version - old_version):
            return (
                f"{source}: {old_phase} v{old_version} ({old_where}) -> {phase} "
                f"v{version} ({where}) is not an allowed transition"
            )
    return None


def _judge(observations: Iterable[Observation], source: str, failures: list[str]) -> int:
    """Observations in commit order; returns how many were judged."""
    previous: Observation | None = None
    count = 0
    for current in observations:
        count += 1
        if previous is not None and (failure := _compare(previous, current, source)):
            failures.append(failure)
        previous = current
    return count


@dataclasses.dataclass(frozen=True)
class _Committed:
    observation: Observation
    sent: int  # seq after which its COMMIT left (the `:before_commit` twin)
    acknowledged: int  # seq of the hit itself


def _judge_hits(commits: list[_Committed], failures: list[str]) -> int:
    """Each commit against the last one certainly committed before it.

    Commits are ordered by when their COMMIT left; one whose acknowledgement came back
    only after another COMMIT left (a slow link) may have landed on either side of it,
    so the two are not compared.
    """
    ordered = sorted(commits, key=lambda commit: commit.sent)
    for index, current in enumerate(ordered):
        before = [other for other in ordered[:index] if other.acknowledged < current.sent]
        if before and (failure := _compare(before[-1].observation, current.observation, "hits")):
            failures.append(failure)
    return len(ordered)


def _from_hits(history: history_module.TrialHistory) -> list[_Committed]:
    sent = facts.commit_sent(history)
    found = []
    for hit in facts.run_hits(history):
        version = facts.detail_int(hit, "frontier_version")
        if facts.is_before_commit(hit) or version is None:
            continue
        phase = hit.detail.get("phase")
        observation = (version, phase if isinstance(phase, str) else None, facts.describe_hit(hit))
        found.append(_Committed(observation, sent.get(hit.seq, hit.seq), hit.seq))
    return found


def _from_table(
    history: history_module.TrialHistory, failures: list[str]
) -> list[tuple[int, str | None, str]]:
    rows = facts.table_rows(history, "checkpoints")
    versions: list[int] = [row["version"] for row in rows if isinstance(row.get("version"), int)]
    if not versions:
        return []
    duplicates = sorted({version for version in versions if versions.count(version) > 1})
    if duplicates:
        failures.append(f"checkpoints: versions {duplicates} appear more than once")
    gaps = sorted(set(range(min(versions), max(versions) + 1)) - set(versions))
    if gaps:
        failures.append(
            f"checkpoints: versions not contiguous from {min(versions)}, missing {gaps}"
        )
    ordered = sorted(
        (row for row in rows if isinstance(row.get("version"), int)),
        key=lambda row: row["version"],
    )
    return [(row["version"], row.get("phase"), f"checkpoint v{row['version']}") for row in ordered]


def check(history: history_module.TrialHistory) -> verdict.CheckResult:
    failures: list[str] = []
    notes: list[str] = []
    hits = _from_hits(history)
    rows = _from_table(history, failures)
    judged_hits = _judge_hits(hits, failures)
    judged_rows = _judge(rows, "checkpoints", failures)
    reports = [
        (report.frontier.version, report.frontier.phase, f"report snapshot {index}")
        for index, report in enumerate(history.reports)
    ]
    report_failures: list[str] = []
    _judge(reports, "reports", report_failures)
    # Snapshots are read while the run moves: only a version going down is judged.
    failures.extend(line for line in report_failures if "went down" in line)
    notes.append(f"{judged_hits} hits and {judged_rows} checkpoint rows with a frontier judged")
    unknowns = []
    if not judged_hits and not judged_rows:
        unknowns.append("no hit carries detail.frontier_version and no checkpoints table")
    result = verdict.decide(
        INVARIANT,
        failures=failures,
        notes=notes,
        unknowns=unknowns,
        passed=_held([c.observation for c in hits], rows, len(reports)),
    )
    return result.model_copy(update={"durable": bool(judged_rows)})


def _held(hits: list[Observation], rows: list[Observation], snapshots: int) -> str:
    """The fact a PASS rests on: the versions each source went through, in allowed steps."""
    parts = []
    for observations, what in ((hits, "committed hits"), (rows, "checkpoint rows")):
        if observations:
            versions = [version for version, _, _ in observations]
            parts.append(
                f"{len(observations)} {what} from v{min(versions)} to v{max(versions)}, "
                "each step an allowed transition"
            )
    if snapshots:
        plural = "s" if snapshots > 1 else ""
        parts.append(f"{snapshots} report snapshot{plural} never lower")
    return "; ".join(parts)
