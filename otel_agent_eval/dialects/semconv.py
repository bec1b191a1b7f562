"""OpenTelemetry GenAI semantic conventions (v1.37+ message parts, tool attributes).

``gen_ai.operation.name`` gives the kind; content lives in
``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON lists of
``{role, parts[]}``) and ``gen_ai.tool.call.*``.
"""

from __future__ import annotations

from typing import Any

from ..model import TokenUsage
from ..records import SpanRecord
from .base import (
    AGENT,
    LLM,
    STEP,
    TOOL,
    WORKFLOW,
    Message,
    Operation,
    RequestedCall,
    as_int,
    as_str,
    parse_json_value,
    span_error,
)

MARKERS = (
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.system",
    "gen_ai.tool.name",
    "gen_ai.agent.name",
)

OPERATION_KINDS = {
    "invoke_agent": AGENT,
    "create_agent": None,
    "invoke_workflow": WORKFLOW,
    "chat": LLM,
    "generate_content": LLM,
    "text_completion": LLM,
    "execute_tool": TOOL,
    "agent_step": STEP,
    "execute_event_loop_cycle": STEP,
}


def detect(record: SpanRecord) -> bool:
    attrs = record.attributes
    return any(key in attrs for key in MARKERS)


def _kind(attrs: Any) -> str | None:
    operation = attrs.get("gen_ai.operation.name")
    if operation in OPERATION_KINDS:
        return OPERATION_KINDS[operation]
    if operation is not None:
        return None  # embeddings, retrieval, memory...: not part of a step
    if "gen_ai.tool.name" in attrs:
        return TOOL
    if "gen_ai.input.messages" in attrs or "gen_ai.output.messages" in attrs or "gen_ai.request.model" in attrs:
        return LLM
    if "gen_ai.agent.name" in attrs:
        return AGENT
    return None


def extract(record: SpanRecord, op: Operation) -> None:
    attrs = record.attributes
    issues = op.issues
    op.kind = op.kind or _kind(attrs)
    op.agent_name = op.agent_name or as_str(attrs.get("gen_ai.agent.name"))
    op.conversation_id = op.conversation_id or as_str(attrs.get("gen_ai.conversation.id"))
    op.model = op.model or as_str(attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model"))
    if op.input_messages is None and "gen_ai.input.messages" in attrs:
        op.input_messages = parse_messages(attrs["gen_ai.input.messages"], "gen_ai.input.messages", issues)
    if op.output_messages is None and "gen_ai.output.messages" in attrs:
        op.output_messages = parse_messages(attrs["gen_ai.output.messages"], "gen_ai.output.messages", issues)
    if op.kind == TOOL:
        op.tool_name = op.tool_name or as_str(attrs.get("gen_ai.tool.name"))
        if not op.tool_call_ids:
            op.tool_call_ids = call_ids(attrs.get("gen_ai.tool.call.id"))
        if op.tool_arguments is None and "gen_ai.tool.call.arguments" in attrs:
            op.tool_arguments = parse_json_value(attrs["gen_ai.tool.call.arguments"], "gen_ai.tool.call.arguments", issues)
        if op.tool_result is None and "gen_ai.tool.call.result" in attrs:
            op.tool_result = parse_json_value(attrs["gen_ai.tool.call.result"], "gen_ai.tool.call.result", issues)
    if op.usage is None and op.kind == LLM:
        input_tokens = as_int(attrs.get("gen_ai.usage.input_tokens", attrs.get("gen_ai.usage.prompt_tokens")))
        output_tokens = as_int(attrs.get("gen_ai.usage.output_tokens", attrs.get("gen_ai.usage.completion_tokens")))
        if input_tokens is not None or output_tokens is not None:
            op.usage = TokenUsage(input_tokens=input_tokens or 0, output_tokens=output_tokens or 0)
    op.error = op.error or span_error(record)


def call_ids(value: Any) -> list[str]:
    """``gen_ai.tool.call.id`` is a string, or a list of strings (Microsoft Agent Framework)."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if v is not None and str(v).strip()]
    text = str(value).strip()
    return [text] if text else []


def parse_messages(value: Any, attribute: str, issues: list[str]) -> list[Message] | None:
    """Parse a semconv message list (``[{role, parts[]}]``), tolerating schema drift."""
    data = parse_json_value(value, attribute, issues)
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        if data is not None and data != "":
            issues.append(f"{attribute}: expected a list of messages, got {type(data).__name__}")
        return None
    messages: list[Message] = []
    for item in data:
        if not isinstance(item, dict):
            issues.append(f"{attribute}: skipped a message that is not an object")
            continue
        messages.append(parse_message(item, attribute, issues))
    return messages


def parse_message(item: dict[str, Any], attribute: str, issues: list[str]) -> Message:
    message = Message(role=str(item.get("role") or "unknown"))
    parts = item.get("parts")
    if parts is None and "content" in item:  # plain {role, content} chat shape
        parts = [{"type": "text", "content": item["content"]}]
    if not isinstance(parts, list):
        parts = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            content = part.get("content")
            if content is not None:
                message.texts.append(content if isinstance(content, str) else str(content))
        elif kind in ("reasoning", "thinking"):
            content = part.get("content")
            if content:
                message.reasoning.append(str(content))
        elif kind == "tool_call":
            name = part.get("name")
            if not name:
                issues.append(f"{attribute}: tool_call part without a name")
                continue
            arguments = parse_json_value(part.get("arguments"), f"{attribute} tool_call arguments", issues)
            ids = call_ids(part.get("id"))
            message.tool_calls.append(RequestedCall(str(name), arguments, ids[-1] if ids else None))
        elif kind == "tool_call_response":
            ids = call_ids(part.get("id"))
            result = part["response"] if "response" in part else part.get("result")
            message.tool_results.append((ids[-1] if ids else None, result))
    return message
