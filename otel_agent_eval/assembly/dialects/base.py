"""Dialect-neutral shapes shared by every dialect and by assembly."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...jsontext import fast_encode
from ...records import STATUS_ERROR, SpanRecord, clean
from .cut_json import CUT_SHORT, cut_short

AGENT = "agent"
LLM = "llm"
TOOL = "tool"
STEP = "step"
WORKFLOW = "workflow"
OTHER = "other"
"""Stated explicitly by a dialect (embeddings, retrieval, a task chain...): not part of a step."""

MAX_JSON_CHARS = 1_000_000
"""Attribute strings longer than this are not parsed as JSON (kept raw, with an issue)."""

_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
"""``raw_decode`` without its Python frame (most attribute values are small); raises ``StopIteration``."""
_CANONICAL = fast_encode(json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str, check_circular=False))
"""``json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)`` without building an encoder per
call, nor its Python wrappers (as costly as encoding small arguments); a circular value ends in RecursionError,
answered as the ValueError of the circular check was (``canonical_json``: its repr)."""


@dataclass(slots=True)
class RequestedCall:
    """A tool call as the model asked for it (from its output message)."""

    name: str
    arguments: Any = None
    call_id: str | None = None


@dataclass(slots=True, init=False)
class Message:
    role: str
    texts: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    tool_calls: list[RequestedCall] = field(default_factory=list)
    tool_results: list[tuple[str | None, Any]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    """Call ids whose result here is the error the framework sent instead of running the tool (the AI
    SDK's ``error-text`` for input its schema rejected): such a call with no tool span is an error."""
    finish_reason: str | None = None
    """As recorded (semconv output messages): ``""`` marks a streamed chunk in some instrumentations."""

    def __init__(
        self, role: str, texts: list[str] | None = None, reasoning: list[str] | None = None,
        tool_calls: list[RequestedCall] | None = None, tool_results: list[tuple[str | None, Any]] | None = None,
        refused: list[str] | None = None, finish_reason: str | None = None,
    ) -> None:
        # Written out: the generated one (five ``default_factory`` lists) costs a third more, on every span read.
        self.role = role
        self.texts = [] if texts is None else texts
        self.reasoning = [] if reasoning is None else reasoning
        self.tool_calls = [] if tool_calls is None else tool_calls
        self.tool_results = [] if tool_results is None else tool_results
        self.refused = [] if refused is None else refused
        self.finish_reason = finish_reason

    @property
    def text(self) -> str | None:
        return "\n".join(self.texts) if self.texts else None


@dataclass(slots=True, init=False)
class Operation:
    """One span read as a GenAI operation. Fields stay None when unknown.

    ``input_messages`` of a model call may be parsed lazily (see ``defer_input_messages``):
    every chat span repeats the system prompt and the history, and assembly reads
    them only to back-fill call ids and results, and for the task text.
    """

    record: SpanRecord
    kind: str | None = None
    agent_name: str | None = None
    conversation_id: str | None = None
    model: str | None = None
    provider: str | None = None
    _input_messages: list[Message] | None = field(default=None, init=False, repr=False)
    _pending_input: tuple[Callable[[list[str]], list[Message] | None], int] | None = field(
        default=None, init=False, repr=False
    )
    """A parser of the input messages not yet run, and where its issues go in ``issues``."""
    output_messages: list[Message] | None = None
    tool_name: str | None = None
    tool_call_ids: list[str] = field(default_factory=list)
    tool_arguments: Any = None
    tool_result: Any = None
    handoff_to: str | None = None
    """A tool span that only records a handoff to another agent (its name), not a tool's work."""
    transfer_argument: str | None = None
    """A tool that hands the run to another agent named by this argument (ADK ``transfer_to_agent``'s
    ``agent_name``): the agent started next by that name is the caller's child (``rules.TransferTools``)."""
    agent_turn: bool = False
    """An agent span that records one turn of the agent it names, not the agent's run (LlamaIndex's
    ``run_agent_step``): an agent's turns under one run are that agent's run (``openinference.AgentTurns``)."""
    node_id: str | None = None
    """The agent's node id in a multi-agent graph (OpenInference ``graph.node.id``)."""
    parent_node_id: str | None = None
    """The node id of the agent this one was handed work by (``graph.node.parent_id``), when stated."""
    graph_node: str | None = None
    """The graph node this span runs in (LangGraph ``langgraph_node`` metadata)."""
    graph_namespace: str | None = None
    """The checkpoint namespace of the graph node task this span runs in (LangGraph
    ``langgraph_checkpoint_ns``): one ``node:task_id`` segment per graph level, joined by ``|``."""
    error: str | None = None
    usage: tuple[int, int] | None = None
    """(input, output) tokens (``usage_from``)."""
    tool_definitions: list[Any] | None = None
    issues: list[str] = field(default_factory=list)

    span_id: int = field(init=False, repr=False)
    """``record.span_id``: read for every look-up assembly makes, an attribute rather than a property."""
    _canonical: tuple[Any, str] | None = field(default=None, init=False, repr=False, compare=False)

    def __init__(self, record: SpanRecord, kind: str | None = None, **fields: Any) -> None:
        """``fields``: any of the fields above by name. Written out: one is made for every span read, and
        the generated ``__init__`` (its ``default_factory`` lists, ``__post_init__``) costs a fifth more."""
        self.record, self.kind, self.span_id, self.agent_turn = record, kind, record.span_id, False
        self.tool_call_ids, self.issues = [], []
        self.agent_name = self.conversation_id = self.model = self.provider = self.output_messages = None
        self.tool_name = self.tool_arguments = self.tool_result = self.handoff_to = self.transfer_argument = None
        self.node_id = self.parent_node_id = self.graph_node = self.graph_namespace = self.error = None
        self.usage = self.tool_definitions = self._input_messages = self._pending_input = self._canonical = None
        for name, value in fields.items():
            setattr(self, name, value)

    def canonical_arguments(self) -> str:
        """``canonical_json(tool_arguments)``, encoded once while ``tool_arguments`` is the same object
        (a tool span without a call id is compared with the open calls of every candidate turn)."""
        cached = self._canonical
        if cached is None or cached[0] is not self.tool_arguments:
            cached = self._canonical = (self.tool_arguments, canonical_json(self.tool_arguments))
        return cached[1]

    @property
    def input_messages(self) -> list[Message] | None:
        """The input messages, parsed on first read."""
        if self._pending_input is not None:
            self._parse_input()
        return self._input_messages

    @input_messages.setter
    def input_messages(self, value: list[Message] | None) -> None:
        if self._pending_input is not None:
            self._parse_input()  # an overwritten value still reports its issues
        self._input_messages = value

    def _parse_input(self) -> None:
        """Run the deferred parser; its issues go where an eager parse would have put them."""
        assert self._pending_input is not None
        parse, position = self._pending_input
        self._pending_input = None
        found: list[str] = []
        self._input_messages = parse(found)
        self.issues[position:position] = found

    @property
    def input_known(self) -> bool:
        """Are the input messages set or deferred already (without parsing them)?"""
        return self._pending_input is not None or self._input_messages is not None

    def defer_input_messages(self, parse: Callable[[list[str]], list[Message] | None]) -> None:
        """Parse the input messages when first read: ``parse(issues)`` returns them and appends its issues."""
        self._pending_input = (parse, len(self.issues))

    def map_input_messages(self, change: Callable[[list[Message] | None], list[Message] | None]) -> None:
        """Apply ``change`` to the input messages, when they are parsed (a dialect's correction of another's reading)."""
        if self._pending_input is None:
            self._input_messages = change(self._input_messages)
            return
        parse, position = self._pending_input
        self._pending_input = (lambda issues: change(parse(issues)), position)

    @property
    def has_content(self) -> bool:
        return bool(
            self.output_messages
            or self.tool_arguments is not None
            or self.tool_result is not None
            or self.input_messages  # last: it may need parsing
        )

    def requested_calls(self) -> list[RequestedCall]:
        return [call for msg in self.output_messages or () for call in msg.tool_calls]

    def output_text(self) -> str | None:
        return output_text(self.output_messages)

    def reasoning_text(self) -> str | None:
        return reasoning_text(self.output_messages)


def output_text(messages: list[Message] | None) -> str | None:
    """The text of the messages, one line per message that has any."""
    texts = [text for msg in messages or () if (text := msg.text)]
    return "\n".join(texts) if texts else None


def reasoning_text(messages: list[Message] | None) -> str | None:
    texts = [r for msg in messages or () for r in msg.reasoning]
    return "\n".join(texts) if texts else None


def last_user_text(messages: list[Message] | None) -> str | None:
    """The last user message's text: the task an agent or a model call was given."""
    for message in reversed(messages or []):
        if message.role == "user" and message.text:
            return message.text
    return None


MAX_DEPTH = 64


def plain(value: Any, depth: int = 0) -> Any:
    """A structured value as plain ``dict``/``list``s.

    SDKs and OTLP decoding hand structured attribute values and log bodies over as
    tuples and read-only mappings (``BoundedAttributes``, ``MappingProxyType``);
    dialects only need to check for ``dict`` and ``list``.
    """
    if value is None or isinstance(value, (str, bytes, bytearray, int, float, bool)) or depth > MAX_DEPTH:
        return value
    if isinstance(value, Mapping):
        return {str(k): plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [plain(v, depth + 1) for v in value]
    return value


def parse_json_value(value: Any, attribute: str, issues: list[str]) -> Any:
    """Decode a JSON-string attribute; on failure keep the raw value and record why.

    JSON cut short (an attribute value length limit) is kept raw too, its issue saying so
    (``cut_json``). Structured values (lists/dicts, tuples and read-only mappings,
    as SDKs and OTLP arrays/kvlists give) come back as plain lists and dicts.
    """
    if not isinstance(value, str):
        return plain(value)
    text = value.strip()
    if not text or text[0] not in "[{\"0123456789-tfn":
        return value
    if len(text) > MAX_JSON_CHARS:
        return _not_parsed(value, text, attribute, issues)
    try:
        parsed, end = _SCAN(text, 0)
    except (StopIteration, ValueError, RecursionError):
        return _not_parsed(value, text, attribute, issues)
    if end != len(text):  # trailing data
        return _not_parsed(value, text, attribute, issues)
    # A \ud800-\udfff escape can spell a lone surrogate, which no UTF-8 output accepts.
    return clean(parsed) if "\\u" in text and ("\\ud" in text or "\\uD" in text) else parsed


def _not_parsed(value: str, text: str, attribute: str, issues: list[str]) -> str:
    """``value`` kept raw, with the issue why: too long, cut short (an attribute value length limit), or what
    ``json.loads(text)`` raises."""
    if len(text) > MAX_JSON_CHARS:
        issues.append(f"{attribute}: {len(text)} characters, over the {MAX_JSON_CHARS} parse limit; kept raw")
        return value
    try:
        json.loads(text)
    except (ValueError, RecursionError) as exc:
        if cut_short(text):
            issues.append(f"{attribute}: {CUT_SHORT} at {len(text)} characters (an attribute value length limit?); "
                          "kept raw")
        else:
            issues.append(f"{attribute}: malformed JSON ({exc.__class__.__name__}: {str(exc)[:120]}); kept raw")
    return value


def maybe_json(value: Any, attribute: str, issues: list[str]) -> Any:
    """Decode a free-form value (a tool result, ``output.value``) only when it looks like an object or list.

    Plain text such as ``3 results`` stays text instead of being reported as malformed JSON.
    """
    if isinstance(value, str):
        return parse_json_value(value, attribute, issues) if value.strip()[:1] in ("[", "{") else value
    return plain(value)


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value == value and abs(value) != float("inf"):  # noqa: PLR0124 - not NaN
        return int(value)
    if isinstance(value, str):
        try:
            return int(float(value))
        except ValueError:
            return None
    return None


def as_str(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return str(value)


def canonical_json(value: Any) -> str:
    """A stable text form of tool arguments, for matching calls by (name, args)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return value
    try:
        return _CANONICAL(value)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def fill(op: Operation, **fields: Any) -> None:
    """Set each field of ``op`` that is still empty (None, or an empty list) to a non-empty value."""
    for name, value in fields.items():
        if value is None or value == [] or value == "":
            continue
        current = getattr(op, name)
        if current is None or current == []:
            setattr(op, name, value)


NOT_SPECIFIED = "<not specified>"  # what some instrumentations (ADK) write for a value they do not know


def present(value: Any) -> bool:
    """False for the placeholders instrumentations write when they know nothing."""
    return value is not None and value != "" and value != NOT_SPECIFIED


def first_str(attrs: Any, *keys: str) -> str | None:
    """The first present attribute among ``keys``, as a string."""
    for key in keys:
        value = attrs.get(key)
        if value is not None and value != "" and value != NOT_SPECIFIED:  # present(), inlined: a hot path
            return value if isinstance(value, str) else str(value)
    return None


def usage_from(attrs: Any, input_keys: tuple[str, ...], output_keys: tuple[str, ...]) -> tuple[int, int] | None:
    """Token usage as (input, output) counts from the first present key of each list; None when
    neither is there. Counts, not a ``TokenUsage``: a step's usage is their sum, made a model by
    the one validation of the trace (a model per model call cost a validation each)."""
    input_tokens = output_tokens = None
    for key in input_keys:
        if key in attrs:
            input_tokens = value if type(value := attrs[key]) is int else as_int(value)
            break
    for key in output_keys:
        if key in attrs:
            output_tokens = value if type(value := attrs[key]) is int else as_int(value)
            break
    if input_tokens is None and output_tokens is None:
        return None
    return input_tokens or 0, output_tokens or 0


def text_of(value: Any) -> str | None:
    """Plain text from a message content that may be a string or a list of content blocks.

    Understands OpenAI (``{"type": "text", "text"}``), semconv (``{"content"}``) and
    Bedrock/Gemini (``{"text"}``) blocks; other values are returned as JSON.
    """
    if value is None:
        return None
    if isinstance(value, str):
        return value
    value = plain(value)
    if isinstance(value, dict):
        value = [value]
    if isinstance(value, list):
        texts = []
        for block in value:
            if isinstance(block, str):
                texts.append(block)
            elif isinstance(block, dict) and block.get("type") in (None, "text", "output_text", "input_text"):
                text = block.get("text", block.get("content"))
                if isinstance(text, str):
                    texts.append(text)
        if texts:
            return "\n".join(texts)
    return canonical_json(value)


def bedrock_result(content: Any) -> Any:
    """Bedrock tool result content ``[{"text"}|{"json"}]`` -> the text or the JSON value."""
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict):
        block = content[0]
        if "json" in block:
            return block["json"]
        if "text" in block:
            return block["text"]
    if isinstance(content, list) and all(isinstance(b, dict) and "text" in b for b in content):
        return "\n".join(str(b["text"]) for b in content)
    return content


def span_name_subject(name: str, *prefixes: str) -> str | None:
    """``agent_run [x]`` / ``invoke_agent x`` -> ``x``: the subject a span name carries."""
    for prefix in prefixes:
        if name.startswith(prefix + " "):
            subject = name[len(prefix) + 1 :].strip()
            if subject.startswith("[") and subject.endswith("]"):
                subject = subject[1:-1].strip()
            return subject or None
    return None


WRAPPER_KEYS = frozenset(("args", "kwargs", "input_str", "inputs", "output", "lc", "type"))
"""Every wrapper ``unwrap_tool_payload`` strips has one of these keys: a dict with none of them is
returned as it is (a hot reader may test this before calling it)."""
_DECORATOR = frozenset(("args", "kwargs"))
_CALLBACK_INPUT = frozenset(("input_str", "inputs", "tags", "metadata", "kwargs"))
_CALLBACK_OUTPUT = frozenset(("output", "kwargs"))
"""The wrappers' keys (constants: a set literal in a comparison is built on every call)."""


def unwrap_tool_payload(value: Any) -> Any:
    """Strip the wrappers some instrumentations put around tool arguments and results.

    Traceloop decorators record ``{"args": [...], "kwargs": {...}}``; OpenLLMetry's
    LangChain callback records ``{"input_str", "inputs", "tags", "metadata", "kwargs"}``
    for inputs and ``{"output", "kwargs"}`` for outputs, where the output may be a
    serialized LangChain ``ToolMessage`` (``{"lc": 1, ..., "kwargs": {"content"}}``).
    ``value`` is plain already (as ``parse_json_value`` and ``maybe_json`` return it).
    """
    if not isinstance(value, dict) or WRAPPER_KEYS.isdisjoint(value):  # the common case: no wrapper
        return value
    keys = value.keys()
    if keys and keys <= _DECORATOR and isinstance(value.get("args", []), list):
        args, kwargs = value.get("args") or [], value.get("kwargs") or {}
        if not args:
            return kwargs
        if not kwargs and len(args) == 1:
            return args[0]
        return {"args": args, **kwargs} if isinstance(kwargs, dict) else value
    if ("input_str" in keys or "inputs" in keys) and keys <= _CALLBACK_INPUT:
        inputs = value.get("inputs")
        return inputs if inputs is not None and inputs != {} and inputs != "" else value.get("input_str")
    if "output" in keys and keys <= _CALLBACK_OUTPUT:
        return unwrap_tool_payload(value["output"])
    message = tool_message(value)  # after the wrappers above: none of them is a ToolMessage (no "type", no "lc")
    if message is not None:
        return message[0]
    if value.get("lc") == 1 and isinstance(value.get("kwargs"), dict) and "content" in value["kwargs"]:
        return value["kwargs"]["content"]
    return value


def tool_message(value: Any) -> tuple[Any, str | None, bool] | None:
    """A serialized LangChain ``ToolMessage`` as ``(content, tool_call_id, failed)``, else None.

    Three serializations occur: ``{"type": "tool", "data": {"content", "tool_call_id", "status"}}``
    (``messages_to_dict``; OpenInference's LangChain tracer), the ``dumpd`` constructor form
    ``{"lc": 1, "type": "constructor", "id": [..., "ToolMessage"], "kwargs": {...}}``, and the message's own
    fields ``{"type": "tool", "content", "tool_call_id", "status"}`` (``model_dump``; LangSmith's OTel export).
    """
    if not isinstance(value, dict):
        return None
    data = None
    if value.get("type") == "tool":
        data = value["data"] if isinstance(value.get("data"), dict) else value
    elif (value.get("lc") == 1 and isinstance(value.get("kwargs"), dict) and isinstance(value.get("id"), list)
          and value["id"] and value["id"][-1] == "ToolMessage"):
        data = value["kwargs"]
    if data is None or "content" not in data:
        return None
    call_id = data.get("tool_call_id")
    if type(call_id) is not str or call_id == "" or call_id == NOT_SPECIFIED:  # else the usual id, as it is
        call_id = str(call_id) if present(call_id) else None
    return data["content"], call_id, data.get("status") == "error"


CONTROL_FLOW_ERRORS = frozenset(("ParentCommand", "GraphInterrupt", "NodeInterrupt"))
"""LangGraph's ``GraphBubbleUp`` exceptions: a handoff to the parent graph, a pause for human
input. Raised to steer the graph, not failures; OpenLLMetry still ends their spans ERROR."""


def _control_flow(record: SpanRecord) -> bool:
    """Did the span end ERROR only because a ``CONTROL_FLOW_ERRORS`` exception went through it? Every
    exception event's type must be one (the first that is not answers), else, with no exception
    event, ``error.type``. Only the types are read: not the message, nor the stack trace, but for
    LangSmith's OTel export, which records every exception as type ``Exception`` with its message
    starting ``ParentCommand(...)``: the name before the parenthesis is the type."""
    raised = False
    for event in record.events:
        if event.name == "exception":
            kind = str(event.attributes.get("exception.type", ""))
            if kind == "Exception":
                kind = str(event.attributes.get("exception.message", "")).partition("(")[0]
            if kind[kind.rfind(".") + 1:] not in CONTROL_FLOW_ERRORS:  # ``rsplit(".", 1)[-1]``
                return False
            raised = True
    if raised:
        return True
    kind = record.attributes.get("error.type")
    if kind is None and "error.type" not in record.attributes:
        return False
    kind = str(kind)
    return kind[kind.rfind(".") + 1:] in CONTROL_FLOW_ERRORS


def span_error(record: SpanRecord) -> str | None:
    """The error a span reports: status message, exception event, or ``error.type``."""
    if record.status_code != STATUS_ERROR or _control_flow(record):  # ``is_error``, inlined
        return None
    if record.status_message:
        return record.status_message
    raised = _exception(record)
    if raised is not None:
        return raised
    error_type = record.attributes.get("error.type")
    return str(error_type) if error_type else "error"


def _exception(record: SpanRecord) -> str | None:
    """``type: message`` of the span's first exception event that says anything."""
    for event in record.events:
        if event.name == "exception":
            message = event.attributes.get("exception.message")
            kind = event.attributes.get("exception.type")
            if message or kind:
                return f"{kind}: {message}" if kind and message else str(message or kind)
    return None


def tool_error(record: SpanRecord) -> str | None:
    """A tool span's error: its ERROR status, else an exception event (a tool that raised, on a span
    some instrumentations still end OK, often with the error text as its result), control flow aside."""
    if record.status_code == STATUS_ERROR:
        return span_error(record)
    if not record.events or _control_flow(record):
        return None
    return _exception(record)
