"""`crashcert merge`: the shards of one crash matrix combined into one report.

Refuses what would make the merged verdict a lie: shards of different plans (fingerprints),
of different crashcert versions, a shard given twice, a missing shard, or a planned trial no
shard reports. A baseline every shard ran counts once, with its worst verdict. Shards of a
certification or an exploration merge by their own rules (merge_certify.py,
merge_explore.py) after the same checks.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any

from harness import errors
from harness.campaigns import shard as shard_module
from harness.checkers import verdict


@dataclasses.dataclass
class ShardReport:
    path: pathlib.Path  # its shard.json, in the shard's output directory
    document: dict[str, Any]

    @property
    def meta(self) -> dict[str, Any]:
        return dict(self.document["shard"])

    @property
    def kind(self) -> str:
        return str(self.meta.get("kind", shard_module.MATRIX))

    def local_directory(self, trial: dict[str, Any]) -> str:
        """The trial's directory where this machine holds the shard's output (CI artifacts
        land elsewhere than where the shard wrote them)."""
        written = pathlib.PurePath(trial["directory"])
        try:
            relative = written.relative_to(self.meta["out_dir"])
        except ValueError:
            return str(written)
        return str(self.path.parent / relative)


def find(paths: list[pathlib.Path]) -> list[ShardReport]:
    """Every shard record below the given directories (or the records themselves)."""
    records: list[pathlib.Path] = []
    for path in paths:
        if path.is_file():
            records.append(path)
        elif path.is_dir():
            records.extend(sorted(path.rglob(shard_module.RECORD)))
        else:
            raise errors.CrashcertError(f"merge: {path} does not exist")
    if not records:
        raise errors.CrashcertError(
            f"merge: no {shard_module.RECORD} below {', '.join(map(str, paths))}"
        )
    reports = []
    for record in records:
        try:
            document = json.loads(record.read_text())
        except (OSError, ValueError) as error:
            raise errors.CrashcertError(f"merge: {record}: unreadable ({error})") from error
        if not isinstance(document, dict) or "shard" not in document:
            raise errors.CrashcertError(f"merge: {record} is not a shard's report")
        reports.append(ShardReport(record, document))
    return reports


def check(reports: list[ShardReport]) -> None:
    """One plan, one crashcert version, every shard once."""
    first = reports[0].meta
    for report in reports[1:]:
        meta = report.meta
        if report.kind != reports[0].kind:
            raise errors.CrashcertError(
                f"merge: {report.path} is a shard of a {report.kind}, {reports[0].path} of a "
                f"{reports[0].kind}"
            )
        # the version, not a checkout's HEAD: a working tree's HEAD moves while shards run
        version, first_version = meta["crashcert"]["version"], first["crashcert"]["version"]
        if version != first_version:
            raise errors.CrashcertError(
                f"merge: {report.path} was made by crashcert {version}, "
                f"{reports[0].path} by {first_version}; rerun the shards with one version"
            )
        if meta["fingerprint"] != first["fingerprint"] or meta["count"] != first["count"]:
            raise errors.CrashcertError(
                f"merge: {report.path} belongs to another plan (fingerprint "
                f"{meta['fingerprint']}, {meta['count']} shards) than {reports[0].path} "
                f"({first['fingerprint']}, {first['count']} shards)"
            )
    indexes = sorted(report.meta["index"] for report in reports)
    if len(set(indexes)) != len(indexes):
        raise errors.CrashcertError(f"merge: a shard was given twice (shards {indexes})")
    missing = sorted(set(range(1, first["count"] + 1)) - set(indexes))
    if missing:
        shards = ", ".join(f"{i}/{first['count']}" for i in missing)
        raise errors.CrashcertError(f"merge: shard {shards} missing")


def merge(reports: list[ShardReport]) -> dict[str, Any]:
    """One report in the shape of an unsharded `crashcert matrix --json`, plus the shards."""
    check(reports)
    planned = [tuple(name) for name in reports[0].meta["planned"]]
    trials: dict[tuple[str, str], dict[str, Any]] = {}
    for report in sorted(reports, key=lambda r: r.meta["index"]):
        for trial in report.document["trials"]:
            key = (trial["scenario"], trial["label"])
            if key not in planned:
                raise errors.CrashcertError(f"merge: {report.path} has an unplanned trial {key}")
            trial = {**trial, "directory": report.local_directory(trial)}
            kept = trials.get(key)
            if kept is not None and not trial["plan"] == kept["plan"] == []:
                raise errors.CrashcertError(f"merge: trial {key} reported by two shards")
            if kept is None or _rank(trial) > _rank(kept):
                trials[key] = trial
    absent = [
        f"{scenario} {label}" for scenario, label in planned if (scenario, label) not in trials
    ]
    if absent:
        raise errors.CrashcertError(f"merge: no shard reports {', '.join(absent[:5])}")
    ordered = [trials[key] for key in planned]
    unreached = sorted({point for r in reports for point in r.document.get("unreached", [])})
    verdicts = [verdict.Verdict(trial["verdict"]) for trial in ordered]
    if unreached:
        verdicts.append(verdict.Verdict.INCONCLUSIVE)
    first = reports[0].meta
    return {
        "verdict": verdict.worst(verdicts).value,
        "trials": ordered,
        "unreached": unreached,
        # the shards ran at once: the slowest one is the matrix's wall time
        "wall_s": max(float(r.document.get("wall_s", 0.0)) for r in reports),
        "merged": {
            "fingerprint": first["fingerprint"],
            "crashcert": first["crashcert"],
            "shards": [
                {
                    "index": r.meta["index"],
                    "count": r.meta["count"],
                    "record": str(r.path),
                    "trials": len(r.document["trials"]),
                    "wall_s": r.document.get("wall_s"),
                    "verdict": r.document.get("verdict"),
                }
                for r in sorted(reports, key=lambda r: r.meta["index"])
            ],
        },
    }


def _rank(trial: dict[str, Any]) -> int:
    """Higher is worse, in the one order of verdicts."""
    return -verdict.SEVERITY.index(verdict.Verdict(trial["verdict"]))
