"""Vercel AI SDK legacy telemetry (``ai`` <= v6 built in; v7 ``LegacyOpenTelemetry``).

``ai.operationId`` gives the kind: ``ai.generateText`` / ``ai.streamText`` (the call,
an agent scope) -> ``ai.generateText.doGenerate`` / ``ai.streamText.doStream`` (one
model call per step) and ``ai.toolCall`` (siblings). Content: ``ai.prompt.messages``
(AI SDK messages), ``ai.response.text``, ``ai.response.toolCalls``
(``[{toolCallId, toolName, input|args}]``), ``ai.response.reasoning``, ``ai.prompt.tools`` (the definitions); tools:
``ai.toolCall.{name, id, args|input, result|output}`` (both ``JSON.stringify``'d, so a string
result is a JSON string; a tool that throws ends ERROR with an exception event and no result; a call
whose input the tool's schema rejects runs no tool and is sent back as an ``error-text`` result);
usage ``ai.usage.*``. Checked against ``ai`` 5 and 6 in node (tests/test_frameworks_vercel.py).
Source: vercel/ai ``packages/otel/src/legacy-open-telemetry.ts`` and
``packages/ai/core/generate-text/generate-text.ts`` at ai@4.0.0 / 5.0.0 / 6.0.0.
"""

from __future__ import annotations

from typing import Any

from ...records import SpanRecord
from .base import (
    AGENT,
    LLM,
    OTHER,
    TOOL,
    Message,
    Operation,
    RequestedCall,
    as_str,
    fill,
    first_str,
    maybe_json,
    parse_json_value,
    present,
    span_error,
    usage_from,
)

MARKERS = ("ai.operationId",)
DETECT_KEYS = CONFIRM_KEYS = MARKERS
DETECT_NAMES = ("ai.",)

CALLS = ("ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject")
REFUSALS = ("error-text", "error-json")
"""Tool-result output types of a call the SDK did not run (input its schema rejected): the error sent instead."""
MODEL_CALLS = tuple(f"{call}.{suffix}" for call in CALLS for suffix in ("doGenerate", "doStream"))


def detect(record: SpanRecord) -> bool:
    return "ai.operationId" in record.attributes or record.name.startswith("ai.")


def kind(record: SpanRecord) -> str | None:
    operation = as_str(record.attributes.get("ai.operationId")) or record.name.split(" ")[0]
    if operation in MODEL_CALLS:
        return LLM
    if operation == "ai.toolCall":
        return TOOL
    if operation in CALLS:
        return AGENT
    return OTHER if "ai.operationId" in record.attributes else None


def extract(record: SpanRecord, op: Operation) -> None:
    attrs = record.attributes
    issues = op.issues
    fill(
        op,
        conversation_id=first_str(attrs, "ai.telemetry.metadata.sessionId", "ai.telemetry.metadata.conversationId"),
        provider=first_str(attrs, "ai.model.provider"),
        error=span_error(record),
    )
    if op.kind == LLM:
        fill(
            op,
            model=first_str(attrs, "ai.response.model", "ai.model.id"),
            usage=usage_from(
                attrs,
                ("ai.usage.inputTokens", "ai.usage.promptTokens"),
                ("ai.usage.outputTokens", "ai.usage.completionTokens"),
            ),
        )
        if present(attrs.get("ai.prompt.messages")):
            messages = parse_json_value(attrs["ai.prompt.messages"], "ai.prompt.messages", issues)
            if isinstance(messages, list):
                fill(op, input_messages=[sdk_message(m, issues) for m in messages if isinstance(m, dict)])
        output = _response(attrs, issues)
        if output.texts or output.tool_calls or output.reasoning:
            fill(op, output_messages=[output])
        if present(attrs.get("ai.prompt.tools")):
            fill(op, tool_definitions=_tools(attrs["ai.prompt.tools"], issues))
    elif op.kind == TOOL:
        fill(op, tool_name=first_str(attrs, "ai.toolCall.name"), tool_call_ids=[str(attrs["ai.toolCall.id"])] if present(attrs.get("ai.toolCall.id")) else [])
        for key in ("ai.toolCall.args", "ai.toolCall.input"):
            if op.tool_arguments is None and present(attrs.get(key)):
                op.tool_arguments = parse_json_value(attrs[key], key, issues)
        for key in ("ai.toolCall.result", "ai.toolCall.output"):
            if op.tool_result is None and present(attrs.get(key)):
                op.tool_result = _result(attrs[key], key, issues)
    elif op.kind == AGENT:
        fill(op, agent_name=first_str(attrs, "ai.telemetry.functionId", "gen_ai.agent.name"))
        prompt = parse_json_value(attrs.get("ai.prompt"), "ai.prompt", issues) if present(attrs.get("ai.prompt")) else None
        if isinstance(prompt, dict) and isinstance(prompt.get("prompt"), str):
            fill(op, input_messages=[Message("user", texts=[prompt["prompt"]])])
        elif isinstance(prompt, dict) and isinstance(prompt.get("messages"), list):
            fill(op, input_messages=[sdk_message(m, issues) for m in prompt["messages"] if isinstance(m, dict)])
        if present(attrs.get("ai.response.text")):
            fill(op, output_messages=[Message("assistant", texts=[str(attrs["ai.response.text"])])])


def _response(attrs: Any, issues: list[str]) -> Message:
    message = Message("assistant")
    if present(attrs.get("ai.response.text")):
        message.texts.append(str(attrs["ai.response.text"]))
    if present(attrs.get("ai.response.reasoning")):
        message.reasoning.append(str(attrs["ai.response.reasoning"]))
    if present(attrs.get("ai.response.toolCalls")):
        calls = parse_json_value(attrs["ai.response.toolCalls"], "ai.response.toolCalls", issues)
        if isinstance(calls, list):
            message.tool_calls = [c for c in (_call(c, issues) for c in calls) if c is not None]
        else:
            issues.append("ai.response.toolCalls: expected a list of tool calls")
    return message


def _result(value: Any, key: str, issues: list[str]) -> Any:
    """A tool result: ``JSON.stringify(output)``, so a quoted string is text; other text stays as it is."""
    if isinstance(value, str) and value.lstrip().startswith('"'):
        return parse_json_value(value, key, issues)
    return maybe_json(value, key, issues)


def _tools(value: Any, issues: list[str]) -> list[Any] | None:
    """``ai.prompt.tools``: one JSON string per tool offered (``{type, name, description, inputSchema}``)."""
    items = value if isinstance(value, (list, tuple)) else [value]
    tools = [parse_json_value(item, "ai.prompt.tools", issues) for item in items]
    return [t for t in tools if isinstance(t, dict)] or None


def _call(part: Any, issues: list[str]) -> RequestedCall | None:
    if not isinstance(part, dict) or not present(part.get("toolName")):
        return None
    arguments = part.get("input", part.get("args"))
    arguments = parse_json_value(arguments, "ai.response.toolCalls input", issues)
    return RequestedCall(str(part["toolName"]), arguments, as_str(part.get("toolCallId")))


def sdk_message(item: dict[str, Any], issues: list[str]) -> Message:
    """An AI SDK message: ``{role, content: string | [text | tool-call | tool-result parts]}``."""
    message = Message(role=str(item.get("role") or "unknown"))
    content = item.get("content")
    if isinstance(content, str):
        message.texts.append(content)
        return message
    for part in content if isinstance(content, list) else ():
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            message.texts.append(part["text"])
        elif kind == "reasoning" and isinstance(part.get("text"), str):
            message.reasoning.append(part["text"])
        elif kind == "tool-call":
            call = _call(part, issues)
            if call is not None:
                message.tool_calls.append(call)
        elif kind == "tool-result":
            result = part.get("output", part.get("result"))
            call_id = as_str(part.get("toolCallId"))
            if isinstance(result, dict) and set(result) <= {"type", "value"} and "value" in result:
                if result.get("type") in REFUSALS and call_id is not None:
                    message.refused.append(call_id)
                result = result["value"]  # v5+: {type: "text" | "json" | "error-text" | "error-json", value}
            message.tool_results.append((call_id, result))
    return message



