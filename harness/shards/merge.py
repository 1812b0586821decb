"""`crashcert merge`: the shards of one crash matrix combined into one report.

Refuses what would make the merged verdict a lie: shards of different plans (fingerprints),
of different crashcert versions, a shard given twice, a missing shard, or a planned trial no
shard reports. A baseline every shard ran counts once, with its worst verdict. Shards of a
certification or an exploration merge by their own rules (merge_certify.py,
merge_explore.py) after the same checks.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Annotated, Any, Literal

import pydantic

from harness import errors
from harness.checkers import verdict
from harness.inputs import readers, validation
from harness.planning import shard as shard_module


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

    def local_directory(self, trial: dict[str, Any]) -> str | None:
        """The trial's directory where this machine holds the shard's output (CI artifacts
        land elsewhere than where the shard wrote them); None when the record names none."""
        if not isinstance(trial.get("directory"), str):
            return None
        written = pathlib.PurePath(trial["directory"])
        out_dir = self.meta.get("out_dir")
        if not isinstance(out_dir, str):
            return str(written)
        try:
            relative = written.relative_to(out_dir)
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
        elif path.exists():
            raise errors.CrashcertError(f"merge: {path} is neither a regular file nor a directory")
        else:
            raise errors.CrashcertError(f"merge: {path} does not exist")
    if not records:
        raise errors.CrashcertError(
            f"merge: no {shard_module.RECORD} below {', '.join(map(str, paths))}"
        )
    reports = []
    for record in records:
        try:
            document = readers.read_json(
                record, what="a shard's report", max_bytes=readers.MAX_RECORD_BYTES
            )
        except errors.CrashcertError as error:
            raise errors.CrashcertError(f"merge: {error}") from None
        if not isinstance(document, dict) or "shard" not in document:
            raise errors.CrashcertError(f"merge: {record} is not a shard's report")
        try:
            ShardDocument.model_validate(document)
        except pydantic.ValidationError as error:
            raise errors.CrashcertError(
                f"merge: {record} is not a shard's report: {validation.describe(error)}"
            ) from None
        reports.append(ShardReport(record, document))
    return reports


class _Open(pydantic.BaseModel):
    # What merge reads is checked; what it only carries along may be anything JSON.
    model_config = pydantic.ConfigDict(extra="allow")


class ShardMeta(_Open):
    kind: Literal["matrix", "certify", "explore"] = "matrix"
    index: int = pydantic.Field(strict=True, ge=1, le=shard_module.MAX_SHARDS)
    count: int = pydantic.Field(strict=True, ge=1, le=shard_module.MAX_SHARDS)
    fingerprint: str
    crashcert: dict[str, str | None]
    planned: list[list[str]]
    out_dir: str | None = None

    @pydantic.model_validator(mode="after")
    def _index_within_count(self) -> ShardMeta:
        if self.index > self.count:
            raise ValueError(f"shard {self.index}/{self.count}: the index exceeds the count")
        if "version" not in self.crashcert:
            raise ValueError("crashcert.version is missing")
        return self


# A field named `verdict` hides the module inside the models below.
Verdict = verdict.Verdict
# Counts a merge adds up: a shard runs at most this many trials of a kind.
MAX_COUNT = 10**9
Count = Annotated[int, pydantic.Field(strict=True, ge=0, le=MAX_COUNT)]


class InvariantRecord(_Open):
    invariant: str
    verdict: Verdict
    summary: str = ""


class ShardTrial(_Open):
    # A matrix's trials have all of these; a certification's name theirs by mode as well.
    scenario: str | None = None
    label: str | None = None
    verdict: Verdict | None = None
    plan: list[Any] | None = None
    directory: str | None = None
    repro: str | None = None
    invariants: list[InvariantRecord] | None = None


# What the merged report reads of every trial of a shard, by kind (harness/report/github.py,
# harness/shards/merge_certify.py).
TRIAL_FIELDS = {
    shard_module.MATRIX: ("scenario", "label", "verdict", "repro"),
    shard_module.CERTIFY: ("scenario", "label", "verdict", "mode", "fault_class", "invariants"),
}


class ShardDocument(_Open):
    """A shard.json as `merge` reads it: bounded integers, known kinds and verdicts."""

    shard: ShardMeta
    trials: list[ShardTrial] = pydantic.Field(default_factory=list)
    wall_s: float = pydantic.Field(default=0.0, ge=0.0, allow_inf_nan=False)
    verdict: Verdict | None = None
    unreached: list[str] = pydantic.Field(default_factory=list)
    not_run: dict[str, list[str]] = pydantic.Field(default_factory=dict)
    verdicts: dict[str, Count] | None = None  # an exploration's tally
    seed: int | None = pydantic.Field(default=None, ge=-(2**63), le=2**63 - 1)

    @pydantic.model_validator(mode="after")
    def _trials_whole(self) -> ShardDocument:
        needed = TRIAL_FIELDS.get(self.shard.kind, ())
        for index, trial in enumerate(self.trials):
            missing = [name for name in needed if getattr(trial, name, None) is None]
            if missing:
                raise ValueError(
                    f"trials.{index}: a {self.shard.kind} trial needs {', '.join(missing)}"
                )
        return self


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
    # every shard gates the same scenarios (the engine's description decides)
    not_run = {
        name: lacking for r in reports for name, lacking in r.document.get("not_run", {}).items()
    }
    if unreached or not_run:
        verdicts.append(verdict.Verdict.INCONCLUSIVE)
    first = reports[0].meta
    return {
        "verdict": verdict.worst(verdicts).value,
        "trials": ordered,
        "unreached": unreached,
        "not_run": not_run,
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
