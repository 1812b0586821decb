"""`crashcert merge` of `crashcert explore --shard I/N` runs: one exploration's summary.

Meaningful because the search is seeded: every shard generates the same schedules (their
labels are the shards' shared plan and fingerprint) and runs the ones it owns, so until a
shard finds a failure the shards together ran exactly what one unsharded search runs. A
shard that finds a failure stops generating and shrinks it alone, as the unsharded search
would have; the merge keeps every shard's minimal failure, reproducible ones first, then in
the order the search generated what each shard first found (the first is the one an
unsharded search would most likely have reported). Exit code: 1 a reproducible failure,
2 a FLAKY one only, 3 trials broke without a failure, 0 none failed.
"""

from __future__ import annotations

from typing import Any

from harness.campaigns import explore
from harness.checkers import verdict as verdict_module
from harness.shards import merge

COUNTS = ("examples", "shrinks", "replays", "passed_over")


def combine(reports: list[merge.ShardReport]) -> dict[str, Any]:
    merge.check(reports)
    ordered = sorted(reports, key=lambda r: r.meta["index"])
    documents = [report.document for report in ordered]
    planned = [label for _, label in ordered[0].meta["planned"]]
    position = {label: index for index, label in enumerate(planned)}
    failures = []
    for report, document in zip(ordered, documents, strict=True):
        failure = document.get("failure")
        if failure:
            failures.append({**failure, "shard": f"{report.meta['index']}/{report.meta['count']}"})
    failures.sort(
        key=lambda f: (
            f["status"] != explore.Status.REPRODUCIBLE.value,
            position.get("+".join(f["found"]), len(planned)),
        )
    )
    verdicts: dict[str, int] = {}
    for document in documents:
        for name, count in document["verdicts"].items():
            verdicts[name] = verdicts.get(name, 0) + count
    merged: dict[str, Any] = {
        "seed": documents[0]["seed"],
        "candidates": documents[0]["candidates"],
        "planned": len(planned),
        **{name: sum(int(d.get(name, 0)) for d in documents) for name in COUNTS},
        "verdicts": verdicts,
        # the shards ran at once: the slowest one is the exploration's wall time
        "wall_s": max(float(d.get("wall_s", 0.0)) for d in documents),
        "failure": failures[0] if failures else None,
        "failures": failures,
        "merged": {
            "fingerprint": ordered[0].meta["fingerprint"],
            "crashcert": ordered[0].meta["crashcert"],
            "shards": [
                {"index": r.meta["index"], "count": r.meta["count"], "record": str(r.path)}
                for r in ordered
            ],
        },
    }
    merged["exit_code"] = exit_code(merged)
    return merged


def exit_code(merged: dict[str, Any]) -> int:
    statuses = {failure["status"] for failure in merged["failures"]}
    if explore.Status.REPRODUCIBLE.value in statuses:
        return 1
    if explore.Status.FLAKY.value in statuses:
        return 2
    if merged["verdicts"].get(verdict_module.Verdict.ERROR.value):
        return verdict_module.Verdict.ERROR.exit_code
    return 0


def render(merged: dict[str, Any]) -> list[str]:
    counts = ", ".join(f"{n} {verdict}" for verdict, n in sorted(merged["verdicts"].items()))
    lines = [
        f"seed {merged['seed']}: {merged['examples']} of {merged['planned']} generated "
        f"schedules over {merged['candidates']} points in {len(merged['merged']['shards'])} "
        f"shards, {merged['shrinks']} shrink and {merged['replays']} replay trials "
        f"({counts or 'none'}); slowest shard {merged['wall_s']:.1f}s"
    ]
    if not merged["failures"]:
        lines.append("no failure found")
    for failure in merged["failures"]:
        head = "Falsifying schedule" if failure["status"] == "FAIL" else "FLAKY schedule"
        lines.append(
            f"{head} of shard {failure['shard']} ({', '.join(failure['schedule'])}; failing "
            f"{', '.join(failure['invariants'])}; failed {failure['replays_failed']} of "
            f"{failure['replays']} replays):"
        )
        lines.append(f"  {failure['repro']}")
        if failure.get("trial"):
            lines.append(f"  trial: {failure['trial']}")
    return lines
