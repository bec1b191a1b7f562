"""OpenLLMetry / Traceloop entity spans (the ``@workflow/@task/@agent/@tool`` layer).

``traceloop.span.kind`` gives the kind; ``traceloop.entity.name`` names the agent or
tool; ``traceloop.entity.input`` / ``output`` hold JSON, wrapped as
``{"args": [...], "kwargs": {...}}`` by the decorators or in the LangChain callback
wrapper (see ``base.unwrap_tool_payload``). OpenLLMetry's LLM spans use the legacy
indexed attributes or semconv messages, read by those modules.
Source: traceloop/openllmetry ``traceloop-sdk/traceloop/sdk/decorators/base.py``,
``opentelemetry-semantic-conventions-ai`` 0.5.2.
"""

from __future__ import annotations

from ..records import SpanRecord
from .base import (
    AGENT,
    OTHER,
    TOOL,
    WORKFLOW,
    Message,
    Operation,
    fill,
    first_str,
    parse_json_value,
    present,
    text_of,
    unwrap_tool_payload,
)

MARKERS = ("traceloop.span.kind",)

SPAN_KINDS = {"workflow": WORKFLOW, "agent": AGENT, "tool": TOOL}
SESSION_KEYS = ("traceloop.association.properties.session_id", "traceloop.association.properties.thread_id")


def detect(record: SpanRecord) -> bool:
    attrs = record.attributes
    return "traceloop.span.kind" in attrs or "traceloop.entity.name" in attrs


def kind(record: SpanRecord) -> str | None:
    span_kind = record.attributes.get("traceloop.span.kind")
    return None if span_kind is None else SPAN_KINDS.get(str(span_kind), OTHER)


def extract(record: SpanRecord, op: Operation) -> None:
    attrs = record.attributes
    issues = op.issues
    fill(op, conversation_id=first_str(attrs, *SESSION_KEYS))
    name = first_str(attrs, "traceloop.entity.name")
    entity_input = _payload(attrs, "traceloop.entity.input", issues)
    entity_output = _payload(attrs, "traceloop.entity.output", issues)
    if op.kind == TOOL:
        fill(op, tool_name=name, tool_arguments=entity_input, tool_result=entity_output)
    elif op.kind == AGENT:
        fill(op, agent_name=name)
        if entity_input is not None:
            fill(op, input_messages=[Message("user", texts=[text_of(entity_input) or ""])])
        if isinstance(entity_output, str) and entity_output:
            fill(op, output_messages=[Message("assistant", texts=[entity_output])])


def _payload(attrs: object, key: str, issues: list[str]) -> object:
    value = attrs.get(key)  # type: ignore[attr-defined]
    if not present(value):
        return None
    return unwrap_tool_payload(parse_json_value(value, key, issues))  # json.dumps of the value
