"""`crashcert merge` of `crashcert certify --shard I/N` runs: one certification.

The level is computed from the merged trials with certify's own rules (certify.Counted,
Certification.level), never taken from a shard: a shard's level is its trials' only.
Every shard ran every baseline (counted once, its worst record kept); each fault trial must
come from exactly one shard, a scenario's time kills from one shard (their moments follow
the wall-clock span of that shard's baseline), and every planned trial must be there.
The trials the levels ask for (coverage.py) come from the shards' baselines; a shard
document without them covers nothing, so its merge earns no level.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from harness import errors
from harness.campaigns import certify, coverage
from harness.checkers import verdict
from harness.shards import merge

Key = tuple[str, str, str]  # (mode, scenario, label), as certify's plan names a trial


@dataclasses.dataclass(frozen=True)
class RecordedTrial(certify.Counted):
    """A trial as its shard's certification JSON recorded it."""

    mode: certify.Mode
    fault_class: str
    record: dict[str, Any]
    results: tuple[verdict.CheckResult, ...]
    directory: str  # where this machine holds it

    @classmethod
    def of(cls, record: dict[str, Any], directory: str) -> RecordedTrial:
        results = tuple(verdict.CheckResult.model_validate(r) for r in record["invariants"])
        return cls(
            mode=record["mode"],
            fault_class=record["fault_class"],
            record={**record, "directory": directory},
            results=results,
            directory=directory,
        )

    def checks(self) -> Sequence[verdict.CheckResult]:
        return self.results

    @property
    def scenario(self) -> str:
        return str(self.record["scenario"])

    @property
    def label(self) -> str:
        return str(self.record["label"])

    @property
    def trial_verdict(self) -> verdict.Verdict:
        return verdict.Verdict(self.record["verdict"])

    @property
    def repro(self) -> str:
        return str(self.record["repro"])

    @property
    def baseline(self) -> bool:
        return not self.record["plan"]

    def json(self) -> dict[str, Any]:
        return {k: v for k, v in self.record.items() if k not in ("mode", "fault_class")}

    def key(self) -> Key:
        if self.fault_class.endswith(f"@{certify.TIME}"):
            return (self.mode, self.scenario, certify.TIME_KILLS)
        return (self.mode, self.scenario, self.label)


def combine(reports: list[merge.ShardReport]) -> certify.Certification:
    merge.check(reports)
    ordered_reports = sorted(reports, key=lambda r: r.meta["index"])
    planned: list[Key] = [(m, s, label) for m, s, label in ordered_reports[0].meta["planned"]]
    wanted = set(planned)
    found: dict[Key, list[RecordedTrial]] = {}
    source: dict[Key, merge.ShardReport] = {}
    for report in ordered_reports:
        for record in report.document["trials"]:
            trial = RecordedTrial.of(record, report.local_directory(record) or "")
            key = trial.key()
            if key not in wanted:
                raise errors.CrashcertError(f"merge: {report.path} has an unplanned trial {key}")
            first = source.setdefault(key, report)
            kept = found.setdefault(key, [])
            if trial.baseline:
                if not kept or _rank(trial) > _rank(kept[0]):
                    kept[:] = [trial]
            elif first is not report or (key[2] != certify.TIME_KILLS and kept):
                raise errors.CrashcertError(f"merge: trial {key} reported by two shards")
            else:
                kept.append(trial)
    # a scenario's time kills may be none (its baseline answered nothing): not checked
    absent = [key for key in planned if key not in found and key[2] != certify.TIME_KILLS]
    if absent:
        named = ", ".join(" ".join(key) for key in absent[:5])
        raise errors.CrashcertError(f"merge: no shard reports {named}")
    documents = [report.document for report in ordered_reports]
    unreached = list(dict.fromkeys(point for d in documents for point in d["unreached"]))
    return certify.Certification(
        engine=documents[0]["engine"],
        engine_ref=documents[0]["engine_ref"],
        modes=list(documents[0]["modes"]),
        trials=[trial for key in planned for trial in found.get(key, [])],
        unreached=unreached,
        # the shards ran at once: the slowest one is the certification's wall time
        wall_s=max(float(d.get("wall_s", 0.0)) for d in documents),
        shard_wall_s=[float(d.get("wall_s", 0.0)) for d in documents],
        planned=planned,
        # every shard ran every baseline, so each records every required trial
        required=coverage.read(documents[0].get("required", [])),
        not_offered=dict(documents[0].get("not_offered", {})),
    )


def _rank(trial: RecordedTrial) -> int:
    """Higher is worse, in the one order of verdicts."""
    return -verdict.SEVERITY.index(trial.trial_verdict)
