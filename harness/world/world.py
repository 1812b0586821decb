"""The world of one scenario: scripted model, tool services and reply sink, started together.

All three ledgers share one sequence counter, so `seq` orders events across services.
`snapshot()` is what the trial history stores and the checkers read.
"""

from __future__ import annotations

import concurrent.futures
from typing import TYPE_CHECKING, Any

import pydantic

from harness import errors
from harness.scenario import schema
from harness.world import auth, ledger, model, sink, tools
from harness.world import hooks as hooks_module

if TYPE_CHECKING:
    from harness.world import mcp as mcp_module


# Re-exported: the harness builds a run's input with the marker the model looks for.
run_marker = model.run_marker
find_run_key = model.find_run_key
WorldHooks = hooks_module.WorldHooks


class WorldSnapshot(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    model: list[ledger.ModelRequest] = pydantic.Field(default_factory=list)
    tools: list[ledger.ToolEntry] = pydantic.Field(default_factory=list)
    sink: list[ledger.ReplyRequest | ledger.ReplyDelivery | ledger.ReplyQuery] = pydantic.Field(
        default_factory=list
    )
    # Requests without the trial's secret, refused: never the engine's (harness/world/auth.py).
    foreign: list[ledger.ForeignRequest] = pydantic.Field(default_factory=list)

    def entries(self) -> list[ledger.AnyEntry]:
        """Every entry of the three ledgers in the order things happened."""
        merged: list[ledger.AnyEntry] = [*self.model, *self.tools, *self.sink]
        return sorted(merged, key=lambda entry: entry.seq)

    def tool_requests(self, tool: str | None = None) -> list[ledger.ToolRequest]:
        return [
            e for e in self.tools if isinstance(e, ledger.ToolRequest) and tool in (None, e.tool)
        ]

    def tool_effects(self, tool: str | None = None) -> list[ledger.ToolEffect]:
        return [
            e for e in self.tools if isinstance(e, ledger.ToolEffect) and tool in (None, e.tool)
        ]

    def tool_queries(self) -> list[ledger.ToolQuery]:
        return [e for e in self.tools if isinstance(e, ledger.ToolQuery)]

    def reply_requests(self) -> list[ledger.ReplyRequest]:
        return [e for e in self.sink if isinstance(e, ledger.ReplyRequest)]

    def deliveries(self) -> list[ledger.ReplyDelivery]:
        return [e for e in self.sink if isinstance(e, ledger.ReplyDelivery)]

    def reply_queries(self) -> list[ledger.ReplyQuery]:
        return [e for e in self.sink if isinstance(e, ledger.ReplyQuery)]


class World:
    def __init__(
        self, scenario: schema.Scenario, *, hooks: hooks_module.WorldHooks | None = None
    ) -> None:
        self.scenario = scenario
        # One hooks object shared by the services: replacing its attributes takes effect.
        self.hooks = hooks or hooks_module.WorldHooks()
        self.counter = ledger.SequenceCounter()
        # One secret for the trial: every URL in env() carries it, every service demands it.
        self.guard = auth.Guard()
        counter, hooks_, guard = self.counter, self.hooks, self.guard
        self.model = model.ModelServer(scenario, counter=counter, hooks=hooks_, guard=guard)
        self.tools = tools.ToolServices(scenario, counter=counter, hooks=hooks_, guard=guard)
        self.sink = sink.ReplySink(scenario.sink, counter=counter, hooks=hooks_, guard=guard)
        # The same tool services over MCP, for a scenario that chooses it (imported only
        # then: `mcp` is an optional extra).
        self.tools_mcp: mcp_module.McpToolServer | None = None
        if scenario.tools_transport == "mcp":
            try:
                from harness.world import mcp
            except ImportError as error:
                raise errors.CrashcertError(
                    f"scenario {scenario.name!r} serves its tools over MCP, which needs the "
                    f"`mcp` package: pip install 'crashcert[mcp]' ({error})"
                ) from None
            self.tools_mcp = mcp.McpToolServer(self.tools, guard=self.guard)
        self._started = False

    @property
    def model_url(self) -> str:
        return self.model.url

    @property
    def tools_url(self) -> str:
        return self.tools.url

    @property
    def tools_mcp_url(self) -> str | None:
        return None if self.tools_mcp is None else self.tools_mcp.url

    @property
    def tools_endpoint(self) -> str:
        """Where the scenario's engine calls its tools: the MCP URL or the HTTP one."""
        return self.tools_mcp_url or self.tools_url

    @property
    def reply_url(self) -> str:
        return self.sink.url

    def start(self) -> None:
        started: list[Any] = []
        try:
            for service in self._services():
                service.start()
                started.append(service)
        except BaseException:
            for service in started:
                service.stop()
            raise
        self._started = True

    def stop(self) -> None:
        """Stop all services; hung requests are cut, never waited for. Idempotent."""
        # In parallel: each accept loop takes up to a poll interval to notice.
        services = self._services()
        with concurrent.futures.ThreadPoolExecutor(len(services)) as pool:
            for stopped in [pool.submit(service.stop) for service in services]:
                stopped.result()
        self._started = False

    def _services(self) -> list[Any]:
        services: list[Any] = [self.model, self.tools, self.sink]
        return services if self.tools_mcp is None else [*services, self.tools_mcp]

    def __enter__(self) -> World:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def env(self) -> dict[str, str]:
        """What a worker process needs to find this world (CONTRACT section 1)."""
        env = {
            "OPENAI_BASE_URL": self.model_url,
            "OPENAI_API_KEY": self.guard.secret,
            "CRASHCERT_REPLY_URL": self.reply_url,
        }
        # One tools transport, the scenario's: an engine cannot fall back to the other.
        if self.tools_mcp_url is not None:
            env["CRASHCERT_TOOLS_MCP_URL"] = self.tools_mcp_url
        else:
            env["CRASHCERT_TOOLS_URL"] = self.tools_url
        return env

    def register_run(self, run_key: str) -> str:
        """Optional; returns the marker to embed in the run's first user message."""
        return self.model.register_run(run_key)

    def snapshot(self) -> WorldSnapshot:
        return WorldSnapshot(
            model=self.model.entries(),
            tools=self.tools.entries(),
            sink=self.sink.entries(),
            foreign=self.guard.refused(),
        )
