"""The example agents' shared kit (tests/contract/agent_kit): a worker reads its lease when
it starts, not when the warm server imported the store; and every hardened example's model
client sends a lost request once, never again under the one attempt reserved for it."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import pathlib
import socketserver
import sys
import threading
import types
from collections.abc import Callable, Iterator

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # as each example's entry module puts it
from agent_kit import store, worker  # noqa: E402 - found on the path just put


def test_a_forked_worker_reads_its_own_lease_not_the_servers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CRASHCERT_LEASE_MS", raising=False)
    importlib.reload(store)  # the warm server's import, with the server's environment
    assert store.LEASE_S == 1.0
    monkeypatch.setenv("CRASHCERT_LEASE_MS", "2500")  # the worker's own environment
    seen: list[tuple[float, str, str]] = []

    def build() -> None:
        seen.append((store.LEASE_S, store.OPTIONS, store.OWNER))
        raise SystemExit  # the loop would claim forever

    monkeypatch.setenv("CRASHCERT_WORKER_ID", "w-7")
    with pytest.raises(SystemExit):
        worker.serve(build, lambda *_: None, hardened=True)
    # read before the agent is built: a checkpointer's connection takes OPTIONS then
    assert seen == [(2.5, "-c idle_in_transaction_session_timeout=5000", "w-7")]
    importlib.reload(store)


def _example(folder: str, entry: str) -> types.ModuleType:
    """An example's entry module, loaded under its own name (two examples share module names)."""
    spec = importlib.util.spec_from_file_location(
        f"{folder}.{entry}", HERE / folder / f"{entry}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(HERE / folder))
    try:
        for name in ("recorded_model", "world_tools", "agent_graph", "reporting_saver"):
            sys.modules.pop(name, None)  # the other example's module of the same name
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(HERE / folder))


class _Dropping(socketserver.BaseRequestHandler):
    """Takes a request and closes the connection unanswered: the model's answer lost."""

    def handle(self) -> None:
        self.server.taken.append(1)  # type: ignore[attr-defined]
        self.request.recv(65536)


@pytest.fixture
def lost(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The model's endpoint, dropping every request; yields the connections it took."""
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Dropping) as server:
        server.taken = []  # type: ignore[attr-defined]
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        port = server.server_address[1]
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "crashcert")
        yield server.taken  # type: ignore[attr-defined]
        server.shutdown()
        thread.join(5)


def _agents_sdk() -> Callable[[], object]:
    pytest.importorskip("agents", reason="openai-agents not installed")
    model = _example("openai_agents_engine", "recorded_model").build()
    return lambda: asyncio.run(model._client.responses.create(model="m", input="hi"))


def _pydantic_ai() -> Callable[[], object]:
    pytest.importorskip("pydantic_ai", reason="pydantic-ai not installed")
    client = _example("pydantic_ai_engine", "recorded_model").build().wrapped.client
    return lambda: asyncio.run(client.responses.create(model="m", input="hi"))


def _langgraph() -> Callable[[], object]:
    pytest.importorskip("langchain_openai", reason="langchain-openai not installed")
    model = _example("langgraph_engine", "agent_graph").chat_model(True)
    return lambda: model.invoke("hi")


@pytest.mark.parametrize("ask", [_agents_sdk, _pydantic_ai, _langgraph])
def test_a_hardened_model_client_sends_a_lost_request_once(
    lost: list[int], ask: Callable[[], Callable[[], object]]
) -> None:
    # The openai client's default max_retries=2 sent it three times from a live worker:
    # the world answered more requests than the one attempt counted (budget.not_restored).
    request = ask()
    with pytest.raises(Exception, match=r"(?i)connection"):
        request()
    assert lost == [1]
