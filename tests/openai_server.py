"""The test suite's fake OpenAI-compatible server: a real HTTP server on 127.0.0.1, stdlib only.

It speaks the OpenAI wire protocol to the real ``openai`` client and the frameworks built on it:

- ``POST /v1/chat/completions``: a ``chat.completion`` (text, ``tool_calls``, refusal, ``usage``).
  With ``"stream": true``, the same answer as Server-Sent Events: ``chat.completion.chunk``s with
  the role, the text in word deltas, each tool call as a delta with its index, id and name then its
  arguments in two deltas, a last chunk with ``finish_reason``, a usage chunk (no choices) when
  ``stream_options.include_usage`` is set, then ``data: [DONE]``.
- ``POST /v1/responses``: a ``response`` whose ``output`` holds a ``message`` item and/or
  ``function_call`` items, and ``usage``. With ``"stream": true``, the Responses events from
  ``response.created`` to ``response.completed`` (text and arguments in deltas).

**Scripting**: one queue of behaviours plus a default. Each request takes the first queued
behaviour that fits it (a behaviour may name the model whose requests it answers: ``per_model``),
else the default (``answer()`` unless given). So a test can mix judge answers and agent turns::

    with FakeOpenAI() as server:                      # default: "yes" to every judge question
        server.script(status(429, retry_after="0.05"), answer({"agent_failed": "no"}))
        server.script(tool_calls(("call_1", "get_weather", {"city": "Paris"})), text("Sunny."))
        client = OpenAI(base_url=server.base_url, api_key="test", max_retries=0)

Behaviours (keyword options on every one: ``delay`` seconds before answering, ``usage``
``(input, output)`` tokens or ``False`` for none, ``model``, ``finish_reason``):

- ``answer(answers, default="yes")``: a judge's answer. The questions are the properties of the
  request's JSON schema (``response_format.json_schema`` or the Responses ``text.format``), else
  the ``- id: question`` lines after ``QUESTIONS`` in the user prompt; each gets ``answers[id]``
  (``"yes"``, ``"no"``, ``"maybe"``, anything) else ``default``; ``OMIT`` leaves it out. ``answers``
  may be a callable ``(ids, body) -> dict``. ``slow(seconds, answers)`` is a delayed ``answer``.
- ``text(content)``, ``tool_calls((id, name, args), ..., content=None)``: agent turns;
  ``raw(content)`` is ``text`` (prose, fenced JSON, garbage in the content).
- ``refusal(text)``, ``empty()`` (empty content), ``no_choices()`` (no choices / no output items).
- ``status(code, retry_after=None, body=None)``: an HTTP error with an OpenAI error body.
- ``not_json()``: a 200 whose body is not JSON; ``garbage()``: bytes that are not HTTP, then the
  connection closes; ``drop()``: the connection closes without an answer.
- ``hang()``: never answers (the connection stays open) until the server stops.
- ``unexpected(message)``: a 400, and ``message`` goes to ``server.errors`` (the default of
  ``scripted`` servers: a request past the script is a test failure, not a silent answer).

Every request is recorded in ``server.requests`` (``RecordedRequest``: ``api`` "chat", "responses"
or "" for an unknown path, ``body``, ``headers``, ``time``, the ``behaviour`` it got; ``r["body"]``
works too). ``server.errors`` lists what went wrong on the server's side (unknown paths,
``unexpected`` requests); ``max_in_flight`` is the most requests it served at once.

Token usage is the behaviour's, else the server's rule: ``sized_usage`` (default: about four
characters a token, so bigger prompts cost more) or ``counted_usage`` (the n-th request, from 0,
reports ``(100 + n, 10 + n)``: predictable numbers for exact assertions).

**How to port** a test written against the two older servers:

- ``tests.fake_openai_server`` (the judge's): change the import to ``tests.openai_server``; the
  names are the same (``FakeOpenAI(default)``, ``script``, ``set_default``, ``reset``,
  ``request_count``, ``max_in_flight``, ``requests[i]["body"]`` / ``["time"]``,
  ``answer``/``status``/``raw``/``refusal``/``empty``/``slow``, ``Behaviour("no_choices")``);
  ``Behaviour("http_garbage")`` is now ``not_json()`` (unknown kinds raise).
- ``tests.frameworks.openai_server`` (the frameworks'): ``OpenAIServer(Scripted({model: replies}))``
  becomes ``scripted({model: replies})``; ``text``, ``tool_calls``, ``requests[i].api`` / ``.body``
  and ``errors`` are unchanged; ``usage_of(n)`` is ``counted_usage``'s rule.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "OMIT", "Behaviour", "FakeOpenAI", "RecordedRequest", "answer", "counted_usage", "drop", "empty", "garbage",
    "hang", "no_choices", "not_json", "per_model", "question_ids", "raw", "refusal", "scripted", "sized_usage",
    "slow", "status", "text", "tool_calls", "unexpected",
]

Answers = Mapping[str, Any] | Callable[[list[str], dict[str, Any]], Mapping[str, Any]]
Call = tuple[str, str, Any]
"""A tool call: (call id, function name, arguments)."""
Usage = tuple[int, int]
"""(input tokens, output tokens)."""
UsageRule = Callable[[int, dict[str, Any], str], Usage]
"""(request index, request body, output text) -> usage."""

CREATED = 1_700_000_000
KINDS = frozenset({
    "answer", "reply", "refusal", "empty", "no_choices", "status", "not_json", "garbage", "drop", "hang", "unexpected",
})
OMIT = "<omit>"
"""An answer that leaves its question out of the judge's reply."""


@dataclass(frozen=True)
class Behaviour:
    """How the server answers one request (see the module docstring for the kinds)."""

    kind: str = "answer"
    answers: Answers | None = None
    default: str = "yes"
    content: str | None = None
    calls: tuple[Call, ...] = ()
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    usage: Usage | bool = True
    """True: the server's rule; False: no usage in the answer; (input, output): these."""
    finish_reason: str | None = None
    """None: ``tool_calls`` when there are calls, else ``stop``."""
    model: str | None = None
    """Only requests for this model take the behaviour from the queue (None: any request)."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown behaviour kind {self.kind!r}: one of {sorted(KINDS)}")


# --- behaviours -----------------------------------------------------------------------------------


def answer(answers: Answers | None = None, *, default: str = "yes", **options: Any) -> Behaviour:
    """Answer each judge question: ``answers[id]`` (``"yes"``/``"no"``/anything/``OMIT``), else ``default``."""
    return Behaviour("answer", answers=answers, default=default, **options)


def slow(seconds: float, answers: Answers | None = None, **options: Any) -> Behaviour:
    return answer(answers, delay=seconds, **options)


def text(content: str, **options: Any) -> Behaviour:
    """A 200 whose message content is exactly ``content``."""
    return Behaviour("reply", content=content, **options)


raw = text
"""The judge tests' name for ``text``: content that is prose, fenced JSON or garbage."""


def tool_calls(*calls: Call, content: str | None = None, **options: Any) -> Behaviour:
    return Behaviour("reply", content=content, calls=tuple(calls), **options)


def refusal(content: str = "I can't help with that.", **options: Any) -> Behaviour:
    return Behaviour("refusal", content=content, **options)


def empty(**options: Any) -> Behaviour:
    return Behaviour("empty", **options)


def no_choices(**options: Any) -> Behaviour:
    return Behaviour("no_choices", **options)


def status(code: int, *, retry_after: str | None = None, body: dict[str, Any] | None = None, **options: Any) -> Behaviour:
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    error = body or {"error": {"message": f"scripted {code}", "type": "server_error", "code": str(code)}}
    return Behaviour("status", status=code, headers=headers, content=json.dumps(error), **options)


def not_json(**options: Any) -> Behaviour:
    return Behaviour("not_json", **options)


def garbage(**options: Any) -> Behaviour:
    return Behaviour("garbage", **options)


def drop(**options: Any) -> Behaviour:
    return Behaviour("drop", **options)


def hang(**options: Any) -> Behaviour:
    return Behaviour("hang", **options)


def unexpected(message: str = "no scripted reply left", **options: Any) -> Behaviour:
    return Behaviour("unexpected", content=message, **options)


def per_model(replies: Mapping[str, Iterable[Behaviour]]) -> list[Behaviour]:
    """``replies`` as one queue, each behaviour answering only its model's requests, in order per model."""
    return [replace(behaviour, model=model) for model, behaviours in replies.items() for behaviour in behaviours]


# --- usage rules ----------------------------------------------------------------------------------


def sized_usage(index: int, body: dict[str, Any], output: str) -> Usage:
    """About four characters a token: bigger prompts and answers cost more, as with a real model."""
    prompt = body.get("messages") or body.get("input") or ""
    chars = sum(len(str(m.get("content", ""))) for m in prompt) if isinstance(prompt, list) else len(str(prompt))
    return chars // 4 + 1, len(output) // 4 + 1


def counted_usage(index: int, body: dict[str, Any], output: str) -> Usage:
    """The n-th request (from 0) reports ``(100 + n, 10 + n)``: predictable numbers for exact assertions."""
    return 100 + index, 10 + index


# --- judge questions ------------------------------------------------------------------------------

_QUESTION_LINE = re.compile(r"^- ([A-Za-z0-9_\-]+): ", re.MULTILINE)


def question_ids(body: dict[str, Any]) -> list[str]:
    """The questions a judge request asks: its JSON schema's properties, else the prompt's ``- id:`` lines."""
    chat_format = (body.get("response_format") or {}).get("json_schema") or {}
    responses_format = (body.get("text") or {}).get("format") or {}
    schema = chat_format.get("schema") or responses_format.get("schema") or {}
    if schema.get("properties"):
        return list(schema["properties"])
    return _QUESTION_LINE.findall(user_text(body).split("QUESTIONS", 1)[-1])


def user_text(body: dict[str, Any]) -> str:
    """The text of a request's user message (chat messages or Responses input): what the judge was shown."""
    messages = body.get("messages") or body.get("input") or []
    if isinstance(messages, str):
        return messages
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content", "")
            if isinstance(content, list):  # content parts
                return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
            return str(content)
    return ""


# --- the server -----------------------------------------------------------------------------------


@dataclass
class RecordedRequest:
    index: int
    api: str
    """"chat", "responses", or "" for an unknown path."""
    path: str
    headers: dict[str, str]
    """Lower-cased names."""
    body: dict[str, Any]
    """The JSON body ({} when it is not a JSON object)."""
    time: float
    """``time.monotonic()`` on arrival."""
    behaviour: Behaviour | None = None

    def __getitem__(self, key: str) -> Any:
        """``request["body"]``: the judge server's dict-style access, so its tests port unchanged."""
        return getattr(self, key)


@dataclass
class _Output:
    """What the model says, whichever API and framing carries it."""

    content: str | None = None
    refusal: str | None = None
    calls: tuple[Call, ...] = ()
    finish_reason: str = "stop"
    has_choice: bool = True


_APIS = {"/chat/completions": "chat", "/responses": "responses"}


class FakeOpenAI:
    """Serves scripted behaviours on 127.0.0.1:<free port> in a daemon thread; use as a context manager."""

    def __init__(self, default: Behaviour | None = None, *, script: Iterable[Behaviour] = (),
                 usage: UsageRule = sized_usage) -> None:
        self.default = default or answer()
        self.usage = usage
        self.requests: list[RecordedRequest] = []
        self.errors: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._script: list[Behaviour] = list(script)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fake-openai", daemon=True)

    # -- lifecycle -----------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving: hanging and delayed requests end with a dropped connection."""
        self._stopping.set()
        if self._thread.is_alive():
            self._httpd.shutdown()
            self._thread.join(timeout=5)
        self._httpd.server_close()

    stop = close

    def __enter__(self) -> FakeOpenAI:  # noqa: PYI034 - not subclassed; typing.Self is 3.11+
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- scripting -----------------------------------------------------------------------------------
    def script(self, *behaviours: Behaviour) -> None:
        """Queue behaviours: each request takes the first one that fits it."""
        with self._lock:
            self._script.extend(behaviours)

    def set_default(self, behaviour: Behaviour) -> None:
        with self._lock:
            self.default = behaviour

    def reset(self) -> None:
        """Forget the queue, the requests and the errors (the default stays)."""
        with self._lock:
            self._script.clear()
            self.requests.clear()
            self.errors.clear()
            self.max_in_flight = self.in_flight

    def remaining(self) -> list[Behaviour]:
        """The queued behaviours no request took yet."""
        with self._lock:
            return list(self._script)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def _take(self, model: str) -> Behaviour:
        for i, behaviour in enumerate(self._script):
            if behaviour.model is None or behaviour.model == model:
                return self._script.pop(i)
        return self.default

    # -- serving -------------------------------------------------------------------------------------
    def _serve(self, http: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        path = http.path.split("?")[0]
        api = next((name for suffix, name in _APIS.items() if path.endswith(suffix)), "")
        headers = {k.lower(): v for k, v in http.headers.items()}
        with self._lock:
            request = RecordedRequest(len(self.requests), api, path, headers, body, time.monotonic())
            self.requests.append(request)
            if api:
                request.behaviour = self._take(str(body.get("model")))
            else:
                self.errors.append(f"unknown path {path}")
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            behaviour = request.behaviour
            if behaviour is None:
                _send(http, 404, _error(f"unknown path {path}", "invalid_request_error"))
            elif behaviour.delay and self._stopping.wait(behaviour.delay):
                http.close_connection = True  # stopped while waiting: drop
            else:
                self._respond(http, request, behaviour)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _respond(self, http: BaseHTTPRequestHandler, request: RecordedRequest, behaviour: Behaviour) -> None:
        kind = behaviour.kind
        if kind in ("drop", "hang", "garbage"):
            if kind == "hang":
                self._stopping.wait()
            if kind == "garbage":
                _write(http, b"this is not HTTP\r\n\r\n")
            http.close_connection = True
        elif kind == "status":
            _send(http, behaviour.status, (behaviour.content or "").encode(), behaviour.headers)
        elif kind == "not_json":
            _send(http, 200, b"<html>not json</html>")
        elif kind == "unexpected":
            with self._lock:
                self.errors.append(f"{behaviour.content} (request {request.index}, model {request.body.get('model')!r})")
            _send(http, 400, _error(str(behaviour.content), "invalid_request_error"))
        else:
            self._complete(http, request, behaviour)

    def _complete(self, http: BaseHTTPRequestHandler, request: RecordedRequest, behaviour: Behaviour) -> None:
        body = request.body
        output = _output(behaviour, body)
        said = output.content or output.refusal or "".join(json.dumps(args) for _, _, args in output.calls)
        usage = self.usage(request.index, body, said) if behaviour.usage is True else behaviour.usage or None
        model = str(body.get("model") or "unknown")
        n = request.index
        if request.api == "chat" and body.get("stream"):
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
            chunks = _chat_chunks(n, model, output, usage if include_usage else None)
            events = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
            _send(http, 200, events.encode(), content_type="text/event-stream")
        elif request.api == "chat":
            _send(http, 200, json.dumps(_chat_completion(n, model, output, usage)).encode())
        elif body.get("stream"):
            events = "".join(
                f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
                for event in _response_events(_response(n, model, output, usage))
            )
            _send(http, 200, events.encode(), content_type="text/event-stream")
        else:
            _send(http, 200, json.dumps(_response(n, model, output, usage)).encode())


# --- wire formats ---------------------------------------------------------------------------------


def _output(behaviour: Behaviour, body: dict[str, Any]) -> _Output:
    finish = behaviour.finish_reason or ("tool_calls" if behaviour.calls else "stop")
    if behaviour.kind == "answer":
        ids = question_ids(body)
        given = behaviour.answers(ids, body) if callable(behaviour.answers) else (behaviour.answers or {})
        chosen = {qid: given.get(qid, behaviour.default) for qid in ids}
        content = json.dumps({
            qid: {"answer": value, "reason": f"scripted answer for {qid}"} for qid, value in chosen.items() if value != OMIT
        })
        return _Output(content=content, finish_reason=finish)
    if behaviour.kind == "refusal":
        return _Output(refusal=behaviour.content, finish_reason=finish)
    if behaviour.kind == "empty":
        return _Output(content="", finish_reason=finish)
    if behaviour.kind == "no_choices":
        return _Output(has_choice=False)
    return _Output(content=behaviour.content, calls=behaviour.calls, finish_reason=finish)


def _chat_usage(usage: Usage) -> dict[str, int]:
    return {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}


def _chat_completion(n: int, model: str, output: _Output, usage: Usage | None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": output.content, "refusal": output.refusal}
    if output.calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for call_id, name, args in output.calls
        ]
    choice = {"index": 0, "message": message, "finish_reason": output.finish_reason, "logprobs": None}
    completion: dict[str, Any] = {
        "id": f"chatcmpl-{n}", "object": "chat.completion", "created": CREATED + n, "model": model,
        "choices": [choice] if output.has_choice else [], "system_fingerprint": "fp_test",
    }
    if usage is not None:
        completion["usage"] = _chat_usage(usage)
    return completion


def _pieces(words: str) -> list[str]:
    """Text as streamed deltas: one word (with its spaces) each."""
    return re.findall(r"\s*\S+\s*", words)


def _halves(arguments: str) -> list[str]:
    return [arguments[: len(arguments) // 2], arguments[len(arguments) // 2:]]


def _chat_chunks(n: int, model: str, output: _Output, usage: Usage | None) -> list[dict[str, Any]]:
    """``output`` as the ``chat.completion.chunk``s of the server's n-th request (see the module docstring)."""

    def chunk(delta: dict[str, Any] | None, finish_reason: str | None = None) -> dict[str, Any]:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]
        return {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": CREATED + n, "model": model,
                "system_fingerprint": "fp_test", "choices": choices}

    chunks = [chunk({"role": "assistant", "content": ""})] if output.has_choice else [chunk(None)]
    if output.has_choice:
        chunks += [chunk({"content": word}) for word in _pieces(output.content or "")]
        if output.refusal is not None:
            chunks.append(chunk({"refusal": output.refusal}))
        for index, (call_id, name, args) in enumerate(output.calls):
            head = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
            chunks.append(chunk({"tool_calls": [head]}))
            chunks += [chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                       for piece in _halves(json.dumps(args))]
        chunks.append(chunk({}, output.finish_reason))
    if usage is not None:
        chunks.append({**chunk(None), "usage": _chat_usage(usage)})
    return chunks


def _response(n: int, model: str, output: _Output, usage: Usage | None) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    if output.content is not None:
        parts.append({"type": "output_text", "text": output.content, "annotations": []})
    if output.refusal is not None:
        parts.append({"type": "refusal", "refusal": output.refusal})
    if parts and output.has_choice:
        items.append({"type": "message", "id": f"msg_{n}", "status": "completed", "role": "assistant", "content": parts})
    for i, (call_id, name, args) in enumerate(output.calls):
        items.append({"type": "function_call", "id": f"fc_{n}_{i}", "call_id": call_id, "name": name,
                      "arguments": json.dumps(args), "status": "completed"})
    response: dict[str, Any] = {
        "id": f"resp_{n}", "object": "response", "created_at": CREATED + n, "status": "completed", "model": model,
        "output": items, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "usage": None,
    }
    if usage is not None:
        response["usage"] = {
            "input_tokens": usage[0], "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage[1], "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": sum(usage),
        }
    return response


def _response_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    """A finished ``response`` as the Responses API's stream events, ``response.created`` to ``response.completed``."""
    events: list[dict[str, Any]] = []
    sequence = itertools.count()

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": next(sequence), **fields})

    started = {**response, "status": "in_progress", "output": [], "usage": None}
    emit("response.created", response=started)
    emit("response.in_progress", response=started)
    for i, item in enumerate(response["output"]):
        where = {"item_id": item["id"], "output_index": i}
        if item["type"] == "message":
            emit("response.output_item.added", output_index=i, item={**item, "status": "in_progress", "content": []})
            for j, part in enumerate(item["content"]):
                field_name = "text" if part["type"] == "output_text" else "refusal"
                kind = "output_text" if field_name == "text" else "refusal"
                extra = {"logprobs": []} if kind == "output_text" else {}
                emit("response.content_part.added", **where, content_index=j, part={**part, field_name: ""})
                for piece in _pieces(part[field_name]):
                    emit(f"response.{kind}.delta", **where, content_index=j, delta=piece, **extra)
                emit(f"response.{kind}.done", **where, content_index=j, **{field_name: part[field_name]}, **extra)
                emit("response.content_part.done", **where, content_index=j, part=part)
        else:
            emit("response.output_item.added", output_index=i, item={**item, "status": "in_progress", "arguments": ""})
            for piece in _halves(item["arguments"]):
                emit("response.function_call_arguments.delta", **where, delta=piece)
            emit("response.function_call_arguments.done", **where, name=item["name"], arguments=item["arguments"])
        emit("response.output_item.done", output_index=i, item=item)
    emit("response.completed", response=response)
    return events


def _error(message: str, kind: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind}}).encode()


# --- HTTP plumbing --------------------------------------------------------------------------------


def _write(http: BaseHTTPRequestHandler, data: bytes) -> None:
    try:
        http.wfile.write(data)
    except OSError:
        pass  # the client gave up (timeout): nothing to tell it


def _send(http: BaseHTTPRequestHandler, code: int, data: bytes, headers: Mapping[str, str] | None = None,
          content_type: str = "application/json") -> None:
    try:
        http.send_response(code)
        http.send_header("content-type", content_type)
        http.send_header("content-length", str(len(data)))
        for key, value in (headers or {}).items():
            http.send_header(key, value)
        http.end_headers()
    except OSError:
        return
    _write(http, data)


def _handler(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                body = {}
            server._serve(self, body if isinstance(body, dict) else {})

    return Handler


def scripted(replies: Mapping[str, Iterable[Behaviour]], *, usage: UsageRule = counted_usage) -> FakeOpenAI:
    """The agent scenarios' server: ``replies`` in order per model, ``counted_usage``, and any request
    past the script answered 400 and listed in ``server.errors``."""
    return FakeOpenAI(unexpected(), script=per_model(replies), usage=usage)
