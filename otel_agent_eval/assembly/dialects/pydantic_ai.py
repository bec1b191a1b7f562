"""pydantic-ai instrumentation v2 names (the default in the 1.2x releases).

``agent run`` / ``{agent} run`` spans carry ``agent_name`` and ``final_result``
(and ``gen_ai.aggregated_usage.*`` / agent-level usage, deliberately never read:
step usage comes from the model spans only). ``running tool`` spans carry
``tool_arguments`` / ``tool_response``; the ``running N tools`` group span is
transparent. Model spans use semconv messages (read by ``semconv``).
Source: pydantic/pydantic-ai ``pydantic_ai_slim/pydantic_ai/_instrumentation.py``;
recorded trace langfuse ``pydantic-ai-tools-2025-12-04.json`` (pydantic-ai 1.26.0).
"""

from __future__ import annotations

from ...records import SpanRecord
from .base import AGENT, TOOL, Message, Operation, fill, first_str, maybe_json, parse_json_value, present

MARKERS = ()  # its spans also carry gen_ai.agent.name / gen_ai.tool.name / gen_ai.operation.name
CONFIRM_KEYS = ("tool_arguments",)
DETECT_KEYS = (*CONFIRM_KEYS, "final_result")
DETECT_SCOPES = ("pydantic-ai", "pydantic_ai")


def detect(record: SpanRecord) -> bool:
    attrs = record.attributes
    return record.scope_name.startswith(("pydantic-ai", "pydantic_ai")) or "tool_arguments" in attrs or (
        "agent_name" in attrs and "final_result" in attrs
    )


def kind(record: SpanRecord) -> str | None:
    name = record.name
    if name.startswith("running tool") and not name.startswith("running tools"):
        return TOOL
    if (name == "agent run" or name.endswith(" run")) and "agent_name" in record.attributes:
        return AGENT
    return None


def extract(record: SpanRecord, op: Operation) -> None:
    attrs = record.attributes
    issues = op.issues
    if op.kind == TOOL:
        if op.tool_arguments is None and present(attrs.get("tool_arguments")):
            op.tool_arguments = parse_json_value(attrs["tool_arguments"], "tool_arguments", issues)
        if op.tool_result is None and present(attrs.get("tool_response")):
            op.tool_result = maybe_json(attrs["tool_response"], "tool_response", issues)
        name = record.name.partition(":")[2].strip()
        fill(op, tool_name=name or None)
    elif op.kind == AGENT:
        fill(op, agent_name=first_str(attrs, "agent_name"))
        final = attrs.get("final_result")
        if present(final):
            fill(op, output_messages=[Message("assistant", texts=[final if isinstance(final, str) else str(final)])])
