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
