"""A scripted OpenAI-compatible HTTP server on 127.0.0.1, for running real clients and frameworks offline.

Speaks just enough of two OpenAI APIs for the ``openai`` client and the frameworks built on it:

- ``POST {base}/chat/completions`` (non-streaming): a ``chat.completion`` with one choice whose
  message is scripted text and/or ``tool_calls``, ``finish_reason`` and ``usage``;
- ``POST {base}/responses`` (non-streaming): a ``response`` whose ``output`` holds a scripted
  ``message`` item and/or ``function_call`` items, and ``usage``.

The script is a callable ``(api, request_body) -> Reply``; ``Scripted`` replays a list of replies
per model name (the model a request names), so several agents can share one server. Every request
is recorded (``server.requests``) so tests can check what the framework sent back (tool results).

Usage is deterministic: the n-th request (0-based, per server) reports ``input_tokens = 100 + n``
and ``output_tokens = 10 + n`` unless the reply sets its own.

    with OpenAIServer(Scripted({"m": [tool_calls(("call_1", "get_weather", {"city": "Paris"})), text("Sunny.")]})) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="test")
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.local_http import LocalJSONServer

__all__ = ["OpenAIServer", "RecordedRequest", "Reply", "Scripted", "text", "tool_calls", "usage_of"]

CREATED = 1_700_000_000


@dataclass(frozen=True)
class Reply:
    """One scripted model answer: text, tool calls (id, name, arguments dict), or both."""

    text: str | None = None
    calls: tuple[tuple[str, str, Any], ...] = ()
    usage: tuple[int, int] | None = None
    """(input_tokens, output_tokens); default: (100 + n, 10 + n) for the server's n-th request."""


def text(content: str, *, usage: tuple[int, int] | None = None) -> Reply:
    return Reply(text=content, usage=usage)


def tool_calls(*calls: tuple[str, str, Any], content: str | None = None, usage: tuple[int, int] | None = None) -> Reply:
    return Reply(text=content, calls=tuple(calls), usage=usage)


def usage_of(n: int) -> tuple[int, int]:
    """The default usage of the server's n-th request."""
    return 100 + n, 10 + n


@dataclass
class RecordedRequest:
    api: str
    """"chat" or "responses"."""
    path: str
    body: dict[str, Any]
    index: int
    reply: Reply | None = None


class Scripted:
    """Replies in order, per requested model name. Raises (-> HTTP 500) when a model's script runs out."""

    def __init__(self, replies: Mapping[str, Iterable[Reply]]) -> None:
        self._replies: dict[str, deque[Reply]] = defaultdict(deque, {m: deque(r) for m, r in replies.items()})
        self._lock = threading.Lock()

    def __call__(self, api: str, body: dict[str, Any]) -> Reply:
        model = str(body.get("model"))
        with self._lock:
            queue = self._replies[model]
            if not queue:
                raise AssertionError(f"no scripted reply left for model {model!r}")
            return queue.popleft()

    def remaining(self) -> dict[str, int]:
        return {m: len(q) for m, q in self._replies.items() if q}


Script = Callable[[str, dict[str, Any]], Reply]


class OpenAIServer(LocalJSONServer):
    """Serves ``script``'s replies on 127.0.0.1:<free port> in a daemon thread; use as a context manager."""

    thread_name = "openai-server"

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[RecordedRequest] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        super().__init__()

    def handle(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        try:
            return 200, {}, json.dumps(self._answer(path, body)).encode()
        except LookupError:
            error = {"message": f"unknown path {path}", "type": "invalid_request_error"}
            return 404, {}, json.dumps({"error": error}).encode()
        except Exception as exc:  # scripted failure: a 400 so clients do not retry
            self.errors.append(f"{type(exc).__name__}: {exc}")
            error = {"message": f"{type(exc).__name__}: {exc}", "type": "invalid_request_error"}
            return 400, {}, json.dumps({"error": error}).encode()

    # -- request handling ------------------------------------------------------------------------
    def _answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        api = "chat" if path.endswith("/chat/completions") else "responses" if path.endswith("/responses") else ""
        if not api:
            raise LookupError(path)
        if body.get("stream"):
            raise ValueError("streaming is not supported by this test server")
        with self._lock:
            recorded = RecordedRequest(api, path, body, len(self.requests))
            self.requests.append(recorded)
        reply = self.script(api, body)
        recorded.reply = reply
        input_tokens, output_tokens = reply.usage or usage_of(recorded.index)
        model = str(body.get("model") or "unknown")
        if api == "chat":
            return _chat_completion(recorded.index, model, reply, input_tokens, output_tokens)
        return _response(recorded.index, model, reply, input_tokens, output_tokens)


def _chat_completion(n: int, model: str, reply: Reply, input_tokens: int, output_tokens: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for call_id, name, args in reply.calls
        ]
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": CREATED + n,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if reply.calls else "stop", "logprobs": None}
        ],
        "usage": {
            "prompt_tokens": input_tokens,
            "completion_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
        },
        "system_fingerprint": "fp_test",
    }


def _response(n: int, model: str, reply: Reply, input_tokens: int, output_tokens: int) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if reply.text is not None:
        output.append({
            "type": "message",
            "id": f"msg_{n}",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
        })
    for i, (call_id, name, args) in enumerate(reply.calls):
        output.append({
            "type": "function_call",
            "id": f"fc_{n}_{i}",
            "call_id": call_id,
            "name": name,
            "arguments": json.dumps(args),
            "status": "completed",
        })
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": CREATED + n,
        "status": "completed",
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        },
    }

