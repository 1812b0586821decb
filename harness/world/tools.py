"""The tool services: scripted behaviours and a ledger of requests and real effects.

`POST /tools/{name}` runs a tool as the scenario scripts it. Behaviours, in this order:
`reject_invalid_arguments` (arguments that do not match the declared parameters are refused
422, for good, no effect); `latency_ms`; `hang` (never answered until the world stops, no
effect); the first `fail_first` requests of one (tool, arguments) pair answer 503 without
an effect; the next `effect_then_fail` ones apply the effect and answer 500; later ones
succeed. A service that honours idempotency keys applies one effect per key and answers repeats with
the stored result; one that does not applies an effect on every successful request (that
is how a blind retry refunds twice). Every request and every effect is recorded.
A tool with `redeploy` changes its declaration (version, so fingerprint) once the scripted
number of requests reached it, recorded in the ledger before that request is answered; an
engine upgrade (the `upgrade` fault) redeploys every tool at once (`upgrade`).
A scenario with `tools_transport: mcp` reaches the same `call` and `query` over MCP
(harness/world/mcp.py): one ledger, one set of behaviours, whatever the transport.
"""

from __future__ import annotations

import collections
import json
import threading
from typing import Any

from harness.scenario import schema
from harness.world import arguments as arguments_module
from harness.world import auth, http, ledger
from harness.world import hooks as hooks_module

IDEMPOTENCY_HEADER = "Idempotency-Key"
HUNG_STATUS = 0  # recorded for a request that never got an answer


class ToolServices(http.Service):
    def __init__(
        self,
        scenario: schema.Scenario,
        *,
        counter: ledger.SequenceCounter | None = None,
        hooks: hooks_module.WorldHooks | None = None,
        guard: auth.Guard | None = None,
    ) -> None:
        self.scenario = scenario
        self.hooks = hooks or hooks_module.WorldHooks()
        self.ledger = ledger.Ledger(counter)
        # Decisions and their ledger entries happen under one lock, so that two racing
        # requests with one key still make one effect. Hooks run outside it.
        self._lock = threading.Lock()
        self._attempts: collections.Counter[tuple[str, str]] = collections.Counter()
        self._applied: dict[tuple[str, str], Any] = {}  # (tool, key) -> result of 1st effect
        self._arrived: collections.Counter[str] = collections.Counter()  # requests per tool
        self._redeployed: set[str] = set()
        # Tools an engine upgrade redeployed: name -> the declaration served since.
        self._upgraded: dict[str, schema.ToolSpec] = {}
        self._server = http.JsonServer(
            "tools",
            [
                http.Route("GET", "/tools", self._list),
                http.Route("POST", "/tools/{name}", self._execute),
                http.Route("GET", "/tools/{name}/effects/{key}", self._query),
            ],
            guard=guard,
        )

    def entries(self) -> list[ledger.ToolEntry]:
        kinds = (ledger.ToolRequest, ledger.ToolEffect, ledger.ToolQuery, ledger.ToolRedeploy)
        return [e for e in self.ledger.snapshot() if isinstance(e, kinds)]

    def declared(self, spec: schema.ToolSpec) -> schema.ToolSpec:
        """The tool as `GET /tools` declares it now."""
        with self._lock:
            return self._declared(spec)

    def _declared(self, spec: schema.ToolSpec) -> schema.ToolSpec:
        if spec.name in self._upgraded:
            return self._upgraded[spec.name]
        return spec.redeployed() if spec.name in self._redeployed else spec

    def upgrade(self, release: str) -> list[ledger.ToolRedeploy]:
        """An engine upgrade ships new versions of its tools: from now on `GET /tools`
        declares every tool at `<version>+<release>` (a new fingerprint), each recorded."""
        changed: list[ledger.ToolRedeploy] = []
        with self._lock:
            for spec in self.scenario.tools:
                now = self._declared(spec)
                suffix = f"+{release}"
                if now.version.endswith(suffix):
                    continue  # already this release: nothing changes
                new = now.model_copy(update={"version": now.version + suffix, "redeploy": None})
                self._upgraded[spec.name] = new
                changed.append(
                    self.ledger.append(
                        ledger.ToolRedeploy(
                            tool=spec.name, version=new.version, fingerprint=new.fingerprint
                        )
                    )
                )
        return changed

    def _list(self, request: http.Request) -> http.Response:
        return http.Response(200, {"tools": self.declarations()})

    def declarations(self) -> list[dict[str, Any]]:
        return [self.declared(tool).declaration() for tool in self.scenario.tools]

    def _execute(self, request: http.Request) -> http.Response:
        key = request.header(IDEMPOTENCY_HEADER) or None
        try:
            arguments: Any = request.json_object()
            invalid = None
        except http.HttpError as error:
            arguments, invalid = _raw(request.body), error
        return self.call(request.params["name"], key, arguments, invalid=invalid)

    def call(
        self, name: str, key: str | None, arguments: Any, *, invalid: http.HttpError | None = None
    ) -> http.Response:
        """One request of a tool, whatever carried it (HTTP here, MCP in world/mcp.py): the
        answer as an HTTP status and body. `invalid` rejects arguments that are no object.
        A hung request raises http.Abandon once the world stops."""
        try:
            spec = self.scenario.tool(name)
        except KeyError:
            known = ", ".join(tool.name for tool in self.scenario.tools) or "none"
            return self._reject(
                name, key, None, http.HttpError(404, f"no tool {name!r}; known: {known}")
            )
        if invalid is not None:
            return self._reject(name, key, arguments, invalid)
        behaviour = spec.behaviour
        if behaviour.reject_invalid_arguments:
            wrong = arguments_module.problems(spec.parameters, arguments)
            if wrong:
                refused = http.HttpError(
                    422,
                    f"arguments of {name} do not match its parameters: {'; '.join(wrong)}",
                    extra={"applied": False, "errors": wrong},
                )
                return self._reject(name, key, arguments, refused)
        if not self._server.pause(behaviour.latency_ms / 1000):
            raise http.Abandon()
        if behaviour.hang:
            with self._lock:
                self._reached(spec, self._record(name, key, arguments, HUNG_STATUS, "hung"))
            self._server.stopping.wait()
            raise http.Abandon()
        with self._lock:
            if spec.honours_idempotency_key and key and (name, key) in self._applied:
                stored = self._applied[(name, key)]
                self._reached(spec, self._record(name, key, arguments, 200, "deduplicated", stored))
                return http.Response(200, {"result": stored})
            pair = (name, json.dumps(arguments, sort_keys=True, separators=(",", ":")))
            self._attempts[pair] += 1
            attempt = self._attempts[pair]
            if attempt <= behaviour.fail_first:
                self._reached(spec, self._record(name, key, arguments, 503, "failed_before_effect"))
                return http.error_response(
                    503,
                    f"{name} is unavailable (scripted failure {attempt} of "
                    f"{behaviour.fail_first}); nothing was applied, retry with the same key",
                    extra={"applied": False},
                )
            failing = attempt <= behaviour.fail_first + behaviour.effect_then_fail
            if failing:  # the result is recorded as the answer only when it is sent
                entry = self._record(name, key, arguments, 500, "effect_then_failed")
            else:
                entry = self._record(name, key, arguments, 200, "ok", behaviour.result)
            self._reached(spec, entry)
            effect = self.ledger.append(
                ledger.ToolEffect(tool=name, key=key, arguments=arguments, request_seq=entry.seq)
            )
            if key:
                self._applied.setdefault((name, key), behaviour.result)
        # The effect is real now; a kill in the hook loses the answer, not the effect.
        hooks_module.call(self.hooks.tool_effect_applied, effect, name="tool_effect_applied")
        if failing:
            return http.error_response(
                500,
                f"{name} failed after it may have been applied (scripted); check before retrying",
                extra={"applied": None},
            )
        return http.Response(200, {"result": behaviour.result})

    def _query(self, request: http.Request) -> http.Response:
        return self.query(request.params["name"], request.params["key"])

    def query(self, name: str, key: str) -> http.Response:
        """Was key applied? 200 with the result, 404 if not; raises http.HttpError (404 for
        an unknown tool, 405 for one that cannot be queried)."""
        try:
            spec = self.scenario.tool(name)
        except KeyError:
            raise http.HttpError(404, f"no tool {name!r}") from None
        if not spec.queryable:
            self.ledger.append(ledger.ToolQuery(tool=name, key=key, found=False, status_code=405))
            raise http.HttpError(405, f"tool {name!r} cannot be queried by idempotency key")
        with self._lock:
            found = (name, key) in self._applied
            result = self._applied.get((name, key))
            status = 200 if found else 404
            self.ledger.append(
                ledger.ToolQuery(tool=name, key=key, found=found, status_code=status, result=result)
            )
        if found:
            return http.Response(200, {"applied": True, "result": result})
        return http.Response(404, {"applied": False})

    def _reached(self, spec: schema.ToolSpec, request: ledger.ToolRequest) -> None:
        """Count a request that reached the tool; redeploy it when the scenario says.
        Called under the lock, so `GET /tools` never sees a half-made change."""
        self._arrived[spec.name] += 1
        if spec.redeploy is None or self._arrived[spec.name] != spec.redeploy.after_requests:
            return
        if spec.name in self._upgraded:
            return  # an upgrade already replaced this tool: the scripted redeploy is past
        self._redeployed.add(spec.name)
        new = spec.redeployed()
        self.ledger.append(
            ledger.ToolRedeploy(
                tool=spec.name,
                version=new.version,
                fingerprint=new.fingerprint,
                after_request_seq=request.seq,
            )
        )

    def _record(
        self,
        tool: str,
        key: str | None,
        arguments: Any,
        status: int,
        outcome: str,
        result: Any = None,
    ) -> ledger.ToolRequest:
        return self.ledger.append(
            ledger.ToolRequest(
                tool=tool,
                key=key,
                arguments=arguments,
                status_code=status,
                outcome=outcome,
                result=result,
            )
        )

    def _reject(
        self, tool: str, key: str | None, arguments: Any, error: http.HttpError
    ) -> http.Response:
        self._record(tool, key, arguments, error.status, "rejected")
        return error.response()


def _raw(body: bytes) -> Any:
    """What a rejected body was, for the ledger: its JSON value, or its text."""
    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")
