"""Scenario files: a scripted agent task, its world, its budgets and the expected outcome.

Scenarios are YAML files validated by pydantic; every error names the file, the field
and the problem. The scripted model and tools of the world are built from a Scenario,
and the checkers judge a trial against it.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import pathlib
from typing import Annotated, Any, Literal

import pydantic

from harness import errors
from harness.contract import boundaries, run_report
from harness.faults import spec
from harness.inputs import limits, validation

RUN_KEY_PLACEHOLDER = "{run}"
# A scenario's budgets and expected status are the engine contract's types
# (harness/contract/run_report.py); this name stays for the engine's tests.
TERMINAL_STATUSES = run_report.TERMINAL_STATUSES


# Strings and free-form JSON reach the engine and Postgres: no NUL, finite JSON numbers.
Text = Annotated[str, pydantic.AfterValidator(validation.check_text)]
JsonData = Annotated[Any, pydantic.AfterValidator(validation.check_json)]
JsonObject = Annotated[dict[str, Any], pydantic.AfterValidator(validation.check_json)]


class StrictModel(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)


class Usage(StrictModel):
    prompt_tokens: int = pydantic.Field(default=100, ge=0, le=limits.MAX_TURN_TOKENS)
    completion_tokens: int = pydantic.Field(default=20, ge=0, le=limits.MAX_TURN_TOKENS)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ToolBehaviour(StrictModel):
    """What the simulated tool service does with a request."""

    result: JsonData = pydantic.Field(default_factory=lambda: {"ok": True})
    latency_ms: int = pydantic.Field(default=0, ge=0, le=limits.MAX_LATENCY_MS)
    # The first N requests answer 503 {"applied": false}: nothing happened, safe to retry.
    fail_first: int = pydantic.Field(default=0, ge=0, le=limits.MAX_SCRIPTED_FAILURES)
    # The first N requests apply the effect, then answer 500: the effect happened.
    effect_then_fail: int = pydantic.Field(default=0, ge=0, le=limits.MAX_SCRIPTED_FAILURES)
    # Requests never get an answer (until the world stops); no effect is applied.
    hang: bool = False
    # Requests whose arguments do not match the declared `parameters` are refused 422
    # {"applied": false}, for good: a validation error the model must be told (the same
    # arguments get the same answer however often they are sent).
    reject_invalid_arguments: bool = False


class Redeploy(StrictModel):
    """The tool is redeployed while the run goes on: once `after_requests` requests reached
    it, `GET /tools` declares `version` (so a new fingerprint). A call sent before that is
    replayed only if its fingerprint is unchanged (CONTRACT.md, tool.started)."""

    after_requests: int = pydantic.Field(default=1, ge=1, le=limits.MAX_SCRIPTED_FAILURES)
    version: Text


class ToolSpec(StrictModel):
    name: str = pydantic.Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: Text = ""
    parameters: JsonObject = pydantic.Field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    replay: Literal["replayable", "non_replayable"]
    effect: Literal["read", "write"]
    honours_idempotency_key: bool = False
    queryable: bool = False
    requires_approval: bool = False
    version: Text = "1"
    behaviour: ToolBehaviour = pydantic.Field(default_factory=ToolBehaviour)
    redeploy: Redeploy | None = None

    @pydantic.model_validator(mode="after")
    def _new_version(self) -> ToolSpec:
        if self.redeploy is not None and self.redeploy.version == self.version:
            raise ValueError(
                f"redeploy.version must differ from version ({self.version!r}): "
                "the same version keeps the fingerprint"
            )
        return self

    def redeployed(self) -> ToolSpec:
        """The declaration served once `redeploy` happened (or this one, without it)."""
        if self.redeploy is None:
            return self
        return self.model_copy(update={"version": self.redeploy.version, "redeploy": None})

    @property
    def fingerprint(self) -> str:
        """Changes whenever the contract of the tool changes (schema, policy, version)."""
        body = json.dumps(
            [self.name, self.parameters, self.replay, self.effect, self.version],
            sort_keys=True,
        )
        return hashlib.sha256(body.encode()).hexdigest()[:16]

    def declaration(self) -> dict[str, Any]:
        """The entry of `GET /tools`: OpenAI function schema plus the crashcert policy."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
            "replay": self.replay,
            "effect": self.effect,
            "honours_idempotency_key": self.honours_idempotency_key,
            "queryable": self.queryable,
            "requires_approval": self.requires_approval,
            "fingerprint": self.fingerprint,
        }


class ScriptedToolCall(StrictModel):
    id: str = pydantic.Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    name: Text
    arguments: JsonObject = pydantic.Field(default_factory=dict)


class Turn(StrictModel):
    """One scripted model response: either tool calls or the final content."""

    tool_calls: list[ScriptedToolCall] = pydantic.Field(default_factory=list)
    content: Text | None = None
    usage: Usage = pydantic.Field(default_factory=Usage)
    # The first N requests of this turn answer 500 (the model provider is down); nothing
    # is billed for them.
    fail_first: int = pydantic.Field(default=0, ge=0, le=limits.MAX_SCRIPTED_FAILURES)

    @pydantic.model_validator(mode="after")
    def _one_kind(self) -> Turn:
        if bool(self.tool_calls) == (self.content is not None):
            raise ValueError("a turn has either tool_calls or content, exactly one of them")
        return self


class RunInputSpec(StrictModel):
    system: Text = "You are a careful support agent."
    user: Text


class SinkSpec(StrictModel):
    queryable: bool = True
    latency_ms: int = pydantic.Field(default=0, ge=0, le=limits.MAX_LATENCY_MS)


class Expectation(StrictModel):
    status: run_report.RunStatus = "succeeded"
    reason: Text | None = None


# What the harness does to a run from outside while it runs (CONTRACT.md, section 5:
# the engine's optional approve/reject/cancel commands).
ActionKind = Literal["approve", "reject", "cancel", "purge", "reuse_key"]
# Done once the run is terminal, in the scenario's order (harness/trial/retention.py):
# `purge` has the engine delete the finished run (its optional purge command), `reuse_key`
# submits a new request (a new input) under the purged run's key.
AFTER_FINISH: tuple[str, ...] = ("purge", "reuse_key")
# Where an after-finish action is written to happen.
FINISHED = "run.finished"
# When: `awaiting_approval` (the report shows the call awaiting approval), or a boundary
# the engine reported, `POINT[#OCCURRENCE]` (e.g. tool.started#1).
AWAITING_APPROVAL = "awaiting_approval"


class Action(StrictModel):
    do: ActionKind
    # The model's tool-call id (scripted in `turns`); approve and reject need it.
    call: str | None = pydantic.Field(default=None, pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    at: str = AWAITING_APPROVAL

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> Action:
        if self.do in ("approve", "reject") and self.call is None:
            raise ValueError(f"{self.do} needs `call`, the tool-call id it decides")
        if self.do in AFTER_FINISH:
            if self.at != FINISHED:
                raise ValueError(f"{self.do} happens once the run is terminal: at: {FINISHED}")
            return self
        if self.at != AWAITING_APPROVAL:
            if boundaries.parse_ref(self.at) is None:
                raise ValueError(f"at is {AWAITING_APPROVAL!r} or POINT[#N], got {self.at!r}")
        elif self.do == "cancel":
            raise ValueError("cancel needs `at`, a boundary point such as tool.started#1")
        return self

    @property
    def point(self) -> tuple[str, int] | None:
        """(boundary, occurrence) for a boundary trigger, None for awaiting_approval."""
        return None if self.at == AWAITING_APPROVAL else boundaries.parse_ref(self.at)


class Scenario(StrictModel):
    name: str = pydantic.Field(pattern=r"^[a-z0-9_-]{1,64}$")
    description: Text = ""
    input: RunInputSpec
    budgets: run_report.Budgets = pydantic.Field(default_factory=run_report.Budgets)
    tools: list[ToolSpec] = pydantic.Field(default_factory=list)
    # How the engine reaches the tools: HTTP (`CRASHCERT_TOOLS_URL`) or MCP over Streamable
    # HTTP (`CRASHCERT_TOOLS_MCP_URL`, harness/world/mcp.py); the same ledger either way.
    tools_transport: Literal["http", "mcp"] = "http"
    turns: list[Turn] = pydantic.Field(min_length=1)
    sink: SinkSpec = pydantic.Field(default_factory=SinkSpec)
    deadline_s: float = pydantic.Field(
        default=30.0, ge=limits.MIN_DEADLINE_S, le=limits.MAX_DEADLINE_S, allow_inf_nan=False
    )
    expect: Expectation = pydantic.Field(default_factory=Expectation)
    # A fault plan that belongs to the scenario (an incident replay, say), in the syntax of
    # `crashcert run --fault`: ACTION@POINT[#OCCURRENCE]. `run` uses it when no --fault is given.
    faults: list[Text] = pydantic.Field(default_factory=list)
    # Other fault plans the incident's record cannot rule out (`crashcert incident`, e.g.
    # tool.returned where the record shows tool.started): `replay` runs `faults` and each
    # of these; `run` and the matrix ignore them.
    variants: list[list[Text]] = pydantic.Field(default_factory=list, max_length=16)
    # Why this scenario exists: the class of bug or incident it reproduces.
    note: Text = ""
    # How `crashcert scenarios` groups it.
    group: Literal["guarantee", "incident", "agent_task"] = "agent_task"
    # Approve, reject or cancel from outside at a point of the run (harness/trial/actions.py).
    actions: list[Action] = pydantic.Field(default_factory=list, max_length=16)
    # Claims the engine may make before it gives the run up (RunInput.max_attempts).
    max_attempts: int = pydantic.Field(default=5, ge=1, le=100)

    @pydantic.field_validator("faults")
    @classmethod
    def _fault_syntax(cls, value: list[str]) -> list[str]:
        try:
            spec.check_plan(value, [spec.parse(text) for text in value])
        except errors.CrashcertError as error:
            raise ValueError(str(error)) from None
        return value

    @pydantic.field_validator("variants")
    @classmethod
    def _variant_syntax(cls, value: list[list[str]]) -> list[list[str]]:
        for faults in value:
            cls._fault_syntax(faults)
        return value

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> Scenario:
        names = [tool.name for tool in self.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"tool names must be unique, got {names}")
        seen_ids: set[str] = set()
        for index, turn in enumerate(self.turns):
            for call in turn.tool_calls:
                if call.name not in names:
                    raise ValueError(f"turns[{index}] calls undeclared tool {call.name!r}")
                if call.id in seen_ids:
                    raise ValueError(f"turns[{index}] repeats tool call id {call.id!r}")
                seen_ids.add(call.id)
        for action in self.actions:
            if action.call is not None and action.call not in seen_ids:
                raise ValueError(f"actions: {action.do} of unknown tool call {action.call!r}")
        if self.expect.status == "succeeded" and self.turns[-1].content is None:
            raise ValueError("a scenario expected to succeed must end with a content turn")
        self._latencies_within_deadline()
        return self

    def _latencies_within_deadline(self) -> None:
        """A latency past the deadline fails liveness whatever the engine does."""
        limit_ms = self.deadline_s * 1000
        latencies = {
            f"tools.{index}.behaviour.latency_ms": tool.behaviour.latency_ms
            for index, tool in enumerate(self.tools)
        }
        latencies["sink.latency_ms"] = self.sink.latency_ms
        for field, latency_ms in latencies.items():
            if latency_ms > limit_ms:
                raise ValueError(
                    f"{field} is {latency_ms}, beyond deadline_s ({self.deadline_s:g} s)"
                )

    def tool(self, name: str) -> ToolSpec:
        for tool in self.tools:
            if tool.name == name:
                return tool
        raise KeyError(name)

    @property
    def final_reply(self) -> str | None:
        return self.turns[-1].content


def substitute_run_key(value: Any, run_key: str) -> Any:
    """Replace `{run}` in every string of a JSON-like value, so runs of one scenario differ."""
    if isinstance(value, str):
        return value.replace(RUN_KEY_PLACEHOLDER, run_key)
    if isinstance(value, list):
        return [substitute_run_key(item, run_key) for item in value]
    if isinstance(value, dict):
        return {key: substitute_run_key(item, run_key) for key, item in value.items()}
    return value


def parse(data: Any, *, source: str = "<scenario>") -> Scenario:
    return validation.parse(Scenario, data, source=source, what="scenario")


def load(path: str | pathlib.Path) -> Scenario:
    path = pathlib.Path(path)
    return parse(validation.read_yaml(path, what="scenario"), source=str(path))


def bundled_dir() -> pathlib.Path:
    """The bundled scenarios, as package data (harness/scenarios links to scenarios/)."""
    return pathlib.Path(str(importlib.resources.files("harness") / "scenarios"))


def load_all(directory: str | pathlib.Path | None = None) -> list[Scenario]:
    directory = pathlib.Path(directory) if directory else bundled_dir()
    return [load(path) for path in sorted(directory.glob("*.yaml"))]


def find(name_or_path: str) -> Scenario:
    """A bundled scenario by name, or a scenario file by path."""
    candidate = pathlib.Path(name_or_path)
    if candidate.suffix in {".yaml", ".yml"} or candidate.exists():
        return load(candidate)
    bundled = bundled_dir() / f"{name_or_path}.yaml"
    if bundled.exists():
        return load(bundled)
    known = ", ".join(path.stem for path in sorted(bundled_dir().glob("*.yaml")))
    raise errors.CrashcertError(f"unknown scenario {name_or_path!r}; bundled: {known}")
