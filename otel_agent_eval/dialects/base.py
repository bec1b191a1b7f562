"""Dialect-neutral shapes shared by every dialect and by assembly."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..model import TokenUsage
from ..records import SpanRecord

AGENT = "agent"
LLM = "llm"
TOOL = "tool"
STEP = "step"
WORKFLOW = "workflow"
OTHER = "other"
"""Stated explicitly by a dialect (embeddings, retrieval, a task chain...): not part of a step."""
KINDS = (AGENT, LLM, TOOL, STEP, WORKFLOW)

MAX_JSON_CHARS = 1_000_000
"""Attribute strings longer than this are not parsed as JSON (kept raw, with an issue)."""


@dataclass(slots=True)
class RequestedCall:
    """A tool call as the model asked for it (from its output message)."""

    name: str
    arguments: Any = None
    call_id: str | None = None


@dataclass(slots=True)
class Message:
    role: str
    texts: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    tool_calls: list[RequestedCall] = field(default_factory=list)
    tool_results: list[tuple[str | None, Any]] = field(default_factory=list)

    @property
    def text(self) -> str | None:
        return "\n".join(self.texts) if self.texts else None


@dataclass(slots=True)
class Operation:
    """One span read as a GenAI operation. Fields stay None when unknown."""

    record: SpanRecord
    kind: str | None = None
    agent_name: str | None = None
    conversation_id: str | None = None
    model: str | None = None
    provider: str | None = None
    input_messages: list[Message] | None = None
    output_messages: list[Message] | None = None
    tool_name: str | None = None
    tool_call_ids: list[str] = field(default_factory=list)
    tool_arguments: Any = None
    tool_result: Any = None
    error: str | None = None
    usage: TokenUsage | None = None
    issues: list[str] = field(default_factory=list)

    @property
    def span_id(self) -> int:
        return self.record.span_id

    @property
    def has_content(self) -> bool:
        return bool(
            self.input_messages
            or self.output_messages
            or self.tool_arguments is not None
            or self.tool_result is not None
        )

    def requested_calls(self) -> list[RequestedCall]:
        return [call for msg in self.output_messages or () for call in msg.tool_calls]

    def output_text(self) -> str | None:
        texts = [msg.text for msg in self.output_messages or () if msg.text]
        return "\n".join(texts) if texts else None

    def reasoning_text(self) -> str | None:
        texts = [r for msg in self.output_messages or () for r in msg.reasoning]
        return "\n".join(texts) if texts else None


def parse_json_value(value: Any, attribute: str, issues: list[str]) -> Any:
    """Decode a JSON-string attribute; on failure keep the raw value and record why.

    Structured values (already lists/dicts, as some SDKs and OTLP kvlists give)
    pass through unchanged.
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text or text[0] not in "[{\"0123456789-tfn":
        return value
    if len(text) > MAX_JSON_CHARS:
        issues.append(f"{attribute}: {len(text)} characters, over the {MAX_JSON_CHARS} parse limit; kept raw")
        return value
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        issues.append(f"{attribute}: malformed JSON ({exc.__class__.__name__}: {str(exc)[:120]}); kept raw")
        return value


def maybe_json(value: Any, attribute: str, issues: list[str]) -> Any:
    """Decode a free-form value (a tool result, ``output.value``) only when it looks like an object or list.

    Plain text such as ``3 results`` stays text instead of being reported as malformed JSON.
    """
    if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):
        return parse_json_value(value, attribute, issues)
    return value


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value == value and abs(value) != float("inf"):
        return int(value)
    if isinstance(value, str):
        try:
            return int(float(value))
        except ValueError:
            return None
    return None


def as_str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return str(value)


def canonical_json(value: Any) -> str:
    """A stable text form of tool arguments, for matching calls by (name, args)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
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


def present(value: Any) -> bool:
    """False for the placeholders instrumentations write when they know nothing."""
    return value is not None and value != "" and value != "<not specified>"


def first_str(attrs: Any, *keys: str) -> str | None:
    """The first present attribute among ``keys``, as a string."""
    for key in keys:
        value = attrs.get(key)
        if present(value):
            return as_str(value)
    return None


def usage_from(attrs: Any, input_keys: tuple[str, ...], output_keys: tuple[str, ...]) -> TokenUsage | None:
    """Token usage from the first present key of each list; None when neither is there."""
    input_tokens = next((as_int(attrs[k]) for k in input_keys if k in attrs), None)
    output_tokens = next((as_int(attrs[k]) for k in output_keys if k in attrs), None)
    if input_tokens is None and output_tokens is None:
        return None
    return TokenUsage(input_tokens=input_tokens or 0, output_tokens=output_tokens or 0)


def text_of(value: Any) -> str | None:
    """Plain text from a message content that may be a string or a list of content blocks.

    Understands OpenAI (``{"type": "text", "text"}``), semconv (``{"content"}``) and
    Bedrock/Gemini (``{"text"}``) blocks; other values are returned as JSON.
    """
    if value is None:
        return None
    if isinstance(value, str):
        return value
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


def span_name_subject(name: str, *prefixes: str) -> str | None:
    """``agent_run [x]`` / ``invoke_agent x`` -> ``x``: the subject a span name carries."""
    for prefix in prefixes:
        if name.startswith(prefix + " "):
            subject = name[len(prefix) + 1 :].strip()
            if subject.startswith("[") and subject.endswith("]"):
                subject = subject[1:-1].strip()
            return subject or None
    return None


def unwrap_tool_payload(value: Any) -> Any:
    """Strip the wrappers some instrumentations put around tool arguments and results.

    Traceloop decorators record ``{"args": [...], "kwargs": {...}}``; OpenLLMetry's
    LangChain callback records ``{"input_str", "inputs", "tags", "metadata", "kwargs"}``
    for inputs and ``{"output", "kwargs"}`` for outputs, where the output may be a
    serialized LangChain ``ToolMessage`` (``{"lc": 1, ..., "kwargs": {"content"}}``).
    """
    if not isinstance(value, dict):
        return value
    keys = set(value)
    if keys and keys <= {"args", "kwargs"} and isinstance(value.get("args", []), list):
        args, kwargs = value.get("args") or [], value.get("kwargs") or {}
        if not args:
            return kwargs
        if not kwargs and len(args) == 1:
            return args[0]
        return {"args": args, **kwargs} if isinstance(kwargs, dict) else value
    if ("input_str" in keys or "inputs" in keys) and keys <= {"input_str", "inputs", "tags", "metadata", "kwargs"}:
        inputs = value.get("inputs")
        return inputs if inputs not in (None, {}, "") else value.get("input_str")
    if "output" in keys and keys <= {"output", "kwargs"}:
        return unwrap_tool_payload(value["output"])
    if value.get("lc") == 1 and isinstance(value.get("kwargs"), dict) and "content" in value["kwargs"]:
        return value["kwargs"]["content"]
    return value


def span_error(record: SpanRecord) -> str | None:
    """The error a span reports: status message, exception event, or ``error.type``."""
    if not record.is_error:
        return None
    if record.status_message:
        return record.status_message
    for event in record.events:
        if event.name == "exception":
            message = event.attributes.get("exception.message")
            kind = event.attributes.get("exception.type")
            if message or kind:
                return f"{kind}: {message}" if kind and message else str(message or kind)
    error_type = record.attributes.get("error.type")
    return str(error_type) if error_type else "error"
