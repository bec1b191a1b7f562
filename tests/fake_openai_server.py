"""A real local HTTP server speaking the OpenAI chat completions API, scriptable per test.

``POST /v1/chat/completions`` answers the yes/no questions of a judge request
(found in ``response_format.json_schema.schema.properties``, or in the prompt's
``- id: question`` lines when no schema was sent) with ``usage`` fields.
Queue behaviours with ``script(...)``: each request takes the next one, and the
default behaviour (``answers``) serves the rest. Every request is recorded.
Binds 127.0.0.1 on a free port; stdlib only.

    with FakeOpenAI() as server:
        server.script(status(429, retry_after="0.05"), answer())
        OpenAI(base_url=server.base_url, api_key="test", max_retries=0)...
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.local_http import LocalJSONServer

Answers = dict[str, Any] | Callable[[list[str], dict[str, Any]], dict[str, Any]]


@dataclass
class Behaviour:
    kind: str = "answer"  # answer | status | raw | refusal | empty | no_choices | http_garbage
    answers: Answers | None = None
    default: str = "yes"
    content: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    usage: bool = True
    finish_reason: str = "stop"


def answer(answers: Answers | None = None, *, default: str = "yes", delay: float = 0.0, usage: bool = True) -> Behaviour:
    """Answer each question: ``answers[id]`` (``"yes"``/``"no"``/anything), else ``default``."""
    return Behaviour("answer", answers=answers, default=default, delay=delay, usage=usage)


def status(code: int, *, retry_after: str | None = None, delay: float = 0.0, body: dict[str, Any] | None = None) -> Behaviour:
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    text = json.dumps(body or {"error": {"message": f"scripted {code}", "type": "server_error", "code": str(code)}})
    return Behaviour("status", status=code, headers=headers, delay=delay, content=text)


def raw(content: str, *, delay: float = 0.0) -> Behaviour:
    """A 200 whose ``message.content`` is exactly ``content`` (garbage, prose, fenced JSON...)."""
    return Behaviour("raw", content=content, delay=delay)


def refusal(text: str = "I can't help with that.") -> Behaviour:
    return Behaviour("refusal", content=text)


def empty() -> Behaviour:
    return Behaviour("empty")


def slow(seconds: float, answers: Answers | None = None) -> Behaviour:
    return answer(answers, delay=seconds)


_QUESTION_LINE = re.compile(r"^- ([A-Za-z0-9_\-]+): ", re.M)


def question_ids(body: dict[str, Any]) -> list[str]:
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or {}
    if schema.get("properties"):
        return list(schema["properties"])
    user = next((m.get("content", "") for m in body.get("messages", []) if m.get("role") == "user"), "")
    return _QUESTION_LINE.findall(user.split("QUESTIONS", 1)[-1])


class FakeOpenAI(LocalJSONServer):
    thread_name = "fake-openai"

    def __init__(self, default: Behaviour | None = None) -> None:
        self.default = default or answer()
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._script: deque[Behaviour] = deque()
        self._lock = threading.Lock()
        super().__init__()

    # -- scripting -----------------------------------------------------------------
    def script(self, *behaviours: Behaviour) -> None:
        with self._lock:
            self._script.extend(behaviours)

    def set_default(self, behaviour: Behaviour) -> None:
        with self._lock:
            self.default = behaviour

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self.requests.clear()

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    # -- requests ------------------------------------------------------------------
    def handle(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        with self._lock:
            self.requests.append({"path": path, "headers": headers, "body": body, "time": time.monotonic()})
            behaviour = self._script.popleft() if self._script else self.default
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if path.split("?")[0] != "/v1/chat/completions":
                return 404, {}, b'{"error": {"message": "not found"}}'
            if behaviour.delay:
                time.sleep(behaviour.delay)
            return self.respond(behaviour, body)
        finally:
            with self._lock:
                self.in_flight -= 1

    def respond(self, behaviour: Behaviour, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        if behaviour.kind == "status":
            return behaviour.status, behaviour.headers, behaviour.content.encode()
        if behaviour.kind == "http_garbage":
            return 200, {}, b"<html>not json</html>"
        message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
        choices: list[dict[str, Any]] = [{"index": 0, "message": message, "finish_reason": behaviour.finish_reason, "logprobs": None}]
        if behaviour.kind == "answer":
            ids = question_ids(body)
            given = behaviour.answers(ids, body) if callable(behaviour.answers) else (behaviour.answers or {})
            message["content"] = json.dumps(
                {qid: {"answer": given.get(qid, behaviour.default), "reason": f"scripted answer for {qid}"} for qid in ids}
            )
        elif behaviour.kind == "raw":
            message["content"] = behaviour.content
        elif behaviour.kind == "refusal":
            message["refusal"] = behaviour.content
        elif behaviour.kind == "empty":
            message["content"] = ""
        elif behaviour.kind == "no_choices":
            choices = []
        prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
        payload: dict[str, Any] = {
            "id": f"chatcmpl-fake-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "fake"), "choices": choices,
        }
        if behaviour.usage:
            completion = len(message["content"] or message["refusal"] or "") // 4 + 1
            prompt = prompt_chars // 4 + 1
            payload["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        return 200, {}, json.dumps(payload).encode()

