"""`frontier.monotonic`: checkpoint versions only grow and phases follow allowed transitions.

Two sources: the (frontier_version, phase) an engine puts in after-commit hits, and the
reference engine's `checkpoints` table. Versions grow by one per checkpoint, so between
two observations `k` versions apart the phase must be reachable in exactly `k` steps.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness import history as history_module
from harness.checkers import facts, verdict

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


def _judge(
    observations: Iterable[tuple[int, str | None, str]], source: str, failures: list[str]
) -> int:
    """(version, phase, where) in order; returns how many were judged."""
    previous: tuple[int, str | None, str] | None = None
    count = 0
    for version, phase, where in observations:
        count += 1
        if previous is not None:
            old_version, old_phase, old_where = previous
            if version < old_version:
                failures.append(
                    f"{source}: version went down from {old_version} ({old_where}) to "
                    f"{version} ({where})"
                )
            elif version == old_version and phase != old_phase and None not in (phase, old_phase):
                failures.append(
                    f"{source}: version {version} has phase {old_phase} ({old_where}) and "
                    f"{phase} ({where})"
                )
            elif version > old_version and old_phase and phase:
                if phase not in reachable(old_phase, version - old_version):
                    failures.append(
                        f"{source}: {old_phase} v{old_version} ({old_where}) -> {phase} "
                        f"v{version} ({where}) is not an allowed transition"
                    )
        previous = (version, phase, where)
    return count


def _from_hits(history: history_module.TrialHistory) -> list[tuple[int, str | None, str]]:
    found = []
    for hit in facts.run_hits(history):
        version = facts.detail_int(hit, "frontier_version")
        if facts.is_before_commit(hit) or version is None:
            continue
        phase = hit.detail.get("phase")
        found.append((version, phase if isinstance(phase, str) else None, facts.describe_hit(hit)))
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
    judged_hits = _judge(_from_hits(history), "hits", failures)
    judged_rows = _judge(_from_table(history, failures), "checkpoints", failures)
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
    return verdict.decide(
        INVARIANT,
        failures=failures,
        notes=notes,
        unknowns=unknowns,
        passed="frontier versions grow and phases follow the allowed transitions",
    )
