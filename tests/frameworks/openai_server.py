"""A scripted OpenAI-compatible HTTP server on 127.0.0.1, for running real clients and frameworks offline.

Speaks just enough of two OpenAI APIs for the ``openai`` client and the frameworks built on it:

- ``POST {base}/chat/completions``: a ``chat.completion`` with one choice whose message is
  scripted text and/or ``tool_calls``, ``finish_reason`` and ``usage``; with ``"stream": true``
  the same answer as Server-Sent Events (``chat_completion_chunks``): ``chat.completion.chunk``s
  with the role, the text in word deltas, each tool call as a delta with its index, id and name
  then its arguments in two deltas, a last chunk with ``finish_reason``, a usage chunk (no
  choices) when ``stream_options.include_usage`` is set, then ``data: [DONE]``, all in one body;
- ``POST {base}/responses`` (non-streaming only): a ``response`` whose ``output`` holds a
  scripted ``message`` item and/or ``function_call`` items, and ``usage``.

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
import re
import threading
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.local_http import LocalJSONServer

__all__ = [
    "OpenAIServer",
    "RecordedRequest",
    "Reply",
    "Scripted",
    "chat_completion_chunks",
    "text",
    "tool_calls",
    "usage_of",
]

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
            answer = self._answer(path, body)
            if isinstance(answer, list):  # a streamed chat completion: its chunks as one SSE body
                events = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in answer) + "data: [DONE]\n\n"
                return 200, {"content-type": "text/event-stream"}, events.encode()
            return 200, {}, json.dumps(answer).encode()
        except LookupError:
            error = {"message": f"unknown path {path}", "type": "invalid_request_error"}
            return 404, {}, json.dumps({"error": error}).encode()
        except Exception as exc:  # scripted failure: a 400 so clients do not retry
            self.errors.append(f"{type(exc).__name__}: {exc}")
            error = {"message": f"{type(exc).__name__}: {exc}", "type": "invalid_request_error"}
            return 400, {}, json.dumps({"error": error}).encode()

    # -- request handling ------------------------------------------------------------------------
    def _answer(self, path: str, body: dict[str, Any]) -> dict[str, Any] | list[dict[str, Any]]:
        """The JSON answer, or for a streamed chat completion the list of its chunks."""
        api = "chat" if path.endswith("/chat/completions") else "responses" if path.endswith("/responses") else ""
        if not api:
            raise LookupError(path)
        if body.get("stream") and api != "chat":
            raise ValueError("streaming is only supported for chat completions by this test server")
        with self._lock:
            recorded = RecordedRequest(api, path, body, len(self.requests))
            self.requests.append(recorded)
        reply = self.script(api, body)
        recorded.reply = reply
        input_tokens, output_tokens = reply.usage or usage_of(recorded.index)
        model = str(body.get("model") or "unknown")
        if api == "chat" and body.get("stream"):
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
            return chat_completion_chunks(recorded.index, model, reply, (input_tokens, output_tokens) if include_usage else None)
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


def chat_completion_chunks(n: int, model: str, reply: Reply, usage: tuple[int, int] | None) -> list[dict[str, Any]]:
    """``reply`` as the ``chat.completion.chunk``s of the server's n-th request (see the module docstring)."""

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion.chunk",
            "created": CREATED + n,
            "model": model,
            "system_fingerprint": "fp_test",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": word}) for word in re.findall(r"\s*\S+\s*", reply.text or "")]
    for index, (call_id, name, args) in enumerate(reply.calls):
        arguments = json.dumps(args)
        half = len(arguments) // 2
        chunks.append(chunk({"tool_calls": [
            {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        ]}))
        for piece in (arguments[:half], arguments[half:]):
            chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    chunks.append(chunk({}, "tool_calls" if reply.calls else "stop"))
    if usage is not None:
        input_tokens, output_tokens = usage
        chunks.append({
            **chunk({}),
            "choices": [],
            "usage": {
                "prompt_tokens": input_tokens,
                "completion_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens,
            },
        })
    return chunks


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

