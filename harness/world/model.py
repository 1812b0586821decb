"""The scripted model: OpenAI Chat Completions and Responses compatible, answering from
the scenario (`/v1/chat/completions`; `/v1/responses` reads its input as the same
transcript, harness/world/responses.py).

The run is the key in the marker `[crashcert-run: KEY]` of the first user message, the
turn the number of assistant messages. The same transcript always gets the same answer,
with `{run}` replaced by the run key, so runs of one scenario share a script. Every
request is recorded with the transcript problems it shows; only malformed requests, a
missing marker and an exhausted script are refused (400). A `stream: true` request is
answered as OpenAI's server-sent events (harness/world/stream.py).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from typing import Any

from harness import errors
from harness.scenario import schema
from harness.world import auth, http, ledger, responses, stream, transcript
from harness.world import hooks as hooks_module

MODEL_NAME = "crashcert-scripted"
_MARKER = re.compile(r"\[crashcert-run: ([^\]\s]+)\]")
_RUN_KEY = re.compile(r"[^\]\s]+")


def run_marker(run_key: str) -> str:
    """The text the harness embeds in a run's first user message."""
    if not _RUN_KEY.fullmatch(run_key):
        raise errors.CrashcertError(f"invalid run key {run_key!r}: no spaces or ']' allowed")
    return f"[crashcert-run: {run_key}]"


def find_run_key(messages: Sequence[Any]) -> str | None:
    """The run key of the marker in the first user message, if there is one."""
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            found = _MARKER.search(transcript.text_of(message.get("content")) or "")
            return found.group(1) if found else None
    return None


class ModelServer(http.Service):
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
        self._registered: set[str] = set()
        self._lock = threading.Lock()
        self._asked: dict[tuple[str, int], int] = {}  # requests per (run, turn)
        self._server = http.JsonServer(
            "model",
            [
                http.Route("POST", "/v1/chat/completions", self._complete),
                http.Route("POST", "/v1/responses", self._respond),
                http.Route("GET", "/v1/models", self._models),
            ],
            guard=guard,
        )

    @property
    def url(self) -> str:
        """The OpenAI base URL, `http://127.0.0.1:P/v1`."""
        return f"{self._server.url}/v1"

    def register_run(self, run_key: str) -> str:
        """Optional: once any run is registered, requests of other keys are a problem."""
        marker = run_marker(run_key)
        with self._lock:
            self._registered.add(run_key)
        return marker

    def entries(self) -> list[ledger.ModelRequest]:
        return [e for e in self.ledger.snapshot() if isinstance(e, ledger.ModelRequest)]

    def _scripted_failure(self, run_key: str, turn: int) -> None:
        """The first `fail_first` requests of a turn answer 500: the provider is down."""
        with self._lock:
            asked = self._asked[(run_key, turn)] = self._asked.get((run_key, turn), 0) + 1
        failures = self.scenario.turns[turn].fail_first
        if asked <= failures:
            raise http.HttpError(
                500, f"model unavailable (scripted: request {asked} of {failures} to fail)"
            )

    def _complete(self, request: http.Request) -> http.Response:
        return self._answer(request, ledger.CHAT_API)

    def _respond(self, request: http.Request) -> http.Response:
        return self._answer(request, responses.API)

    def _answer(self, request: http.Request, api: ledger.ModelApi) -> http.Response:
        messages: list[dict[str, Any]] = []
        run_key: str | None = None
        turn = 0
        problems: list[str] = []
        streamed = False
        try:
            body = request.json_object()
            streamed = body.get("stream") is True
            messages = _messages(body) if api == ledger.CHAT_API else responses.to_messages(body)
            turn = sum(1 for message in messages if message.get("role") == "assistant")
            run_key = find_run_key(messages)
            if run_key is None:
                raise http.HttpError(
                    400, "no run marker '[crashcert-run: KEY]' in the first user message"
                )
            problems = self._problems(messages, run_key)
            if turn >= len(self.scenario.turns):
                raise http.HttpError(
                    400,
                    f"script exhausted: scenario {self.scenario.name!r} has "
                    f"{len(self.scenario.turns)} turns and the request has {turn} assistant "
                    "messages",
                )
            self._scripted_failure(run_key, turn)
        except http.HttpError as error:
            self.ledger.append(
                ledger.ModelRequest(
                    run_key=run_key,
                    turn=turn,
                    messages=messages,
                    status_code=error.status,
                    problems=problems,
                    error=error.message,
                    stream=streamed,
                    api=api,
                )
            )
            raise
        scripted = self.scenario.turns[turn]
        message = assistant_message(scripted, run_key)
        usage = {
            "prompt_tokens": scripted.usage.prompt_tokens,
            "completion_tokens": scripted.usage.completion_tokens,
            "total_tokens": scripted.usage.total_tokens,
        }
        entry = self.ledger.append(
            ledger.ModelRequest(
                run_key=run_key,
                turn=turn,
                messages=messages,
                status_code=200,
                response=message,
                usage=usage,
                problems=problems,
                stream=streamed,
                api=api,
            )
        )
        hooks_module.call(self.hooks.model_answered, entry, name="model_answered")
        model = body.get("model")
        model = model if isinstance(model, str) else MODEL_NAME
        if api == responses.API:
            answer = responses.response(
                message, usage, seq=entry.seq, created=int(entry.t), model=model
            )
            if streamed:
                return http.Response(
                    200, None, events=responses.events(answer), framing="responses"
                )
            return http.Response(200, answer)
        completion = {
            "id": f"chatcmpl-{entry.seq}",
            "object": "chat.completion",
            "created": int(entry.t),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if scripted.tool_calls else "stop",
                    "logprobs": None,
                }
            ],
            "usage": usage,
        }
        if streamed:
            options = body.get("stream_options")
            with_usage = isinstance(options, dict) and options.get("include_usage") is True
            return http.Response(200, None, events=stream.chunks(completion, usage=with_usage))
        return http.Response(200, completion)

    def _problems(self, messages: list[dict[str, Any]], run_key: str) -> list[str]:
        problems = transcript.check(messages, turns=self.scenario.turns, run_key=run_key)
        with self._lock:
            unregistered = bool(self._registered) and run_key not in self._registered
        if unregistered:
            problems.insert(0, f"unregistered_run: run key {run_key!r} was never registered")
        return problems

    def _models(self, request: http.Request) -> http.Response:
        listing = {"id": MODEL_NAME, "object": "model", "created": 0, "owned_by": "crashcert"}
        return http.Response(200, {"object": "list", "data": [listing]})


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise http.HttpError(400, "'messages' must be a non-empty array of message objects")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise http.HttpError(400, f"messages[{index}] must be an object with a string 'role'")
    return messages


def assistant_message(turn: schema.Turn, run_key: str) -> dict[str, Any]:
    """The assistant message the scripted model answers for `turn` of run `run_key`."""
    if not turn.tool_calls:
        content = schema.substitute_run_key(turn.content, run_key)
        return {"role": "assistant", "content": content}
    calls = [
        {
            "id": call.id,
            "type": "function",
            "function": {
                "name": call.name,
                "arguments": json.dumps(schema.substitute_run_key(call.arguments, run_key)),
            },
        }
        for call in turn.tool_calls
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}
