"""Google ADK native tracing (scope ``gcp.vertex.agent``).

Span names carry the kind: ``call_llm`` (model call; the tool spans it triggers are
its *children*), ``execute_tool {name}``, ``agent_run [{name}]`` (older) or
``invoke_agent {name}``, ``invocation`` (the runner). Content is Gemini-shaped JSON:
``gcp.vertex.agent.llm_request`` (``contents[].parts[].{text, function_call,
function_response}``) and ``gcp.vertex.agent.llm_response`` (``content.parts``);
tools keep ``gcp.vertex.agent.tool_call_args`` / ``tool_response``. Function calls in
the model output have no id; the tool span has a synthetic ``adk-...`` id.
Source: google/adk-python ``src/google/adk/telemetry/tracing.py``; recorded trace
langfuse ``google-adk-2025-08-28.json`` (ADK 1.12.0).
"""

from __future__ import annotations

from typing import Any

from ...records import SpanRecord
from .base import (
    AGENT,
    LLM,
    TOOL,
    WORKFLOW,
    Message,
    Operation,
    RequestedCall,
    as_str,
    fill,
    first_str,
    maybe_json,
    parse_json_value,
    present,
    span_name_subject,
)

MARKERS = ("gcp.vertex.agent.llm_request",)

SYSTEM = "gcp.vertex.agent"
DETECT_KEYS = ("gcp.vertex.agent.llm_request", "gcp.vertex.agent.tool_call_args", "gen_ai.system")
DETECT_SCOPES = (SYSTEM,)


def detect(record: SpanRecord) -> bool:
    attrs = record.attributes
    return (
        record.scope_name == SYSTEM
        or attrs.get("gen_ai.system") == SYSTEM
        or "gcp.vertex.agent.llm_request" in attrs
        or "gcp.vertex.agent.tool_call_args" in attrs
    )


def kind(record: SpanRecord) -> str | None:
    name = record.name
    if name == "call_llm":
        return LLM
    if name.startswith("execute_tool"):
        return TOOL
    if name.startswith(("agent_run", "invoke_agent")):
        return AGENT
    if name.startswith("invocation"):
        return WORKFLOW
    return None


def extract(record: SpanRecord, op: Operation) -> None:
    attrs = record.attributes
    issues = op.issues
    fill(op, conversation_id=first_str(attrs, "gcp.vertex.agent.session_id"))
    if op.kind == LLM:
        request = _json(attrs, "gcp.vertex.agent.llm_request", issues)
        response = _json(attrs, "gcp.vertex.agent.llm_response", issues)
        if isinstance(request, dict):
            fill(op, model=as_str(request.get("model")))
            contents = request.get("contents")
            if isinstance(contents, list) and contents:
                fill(op, input_messages=[gemini_message(c) for c in contents if isinstance(c, dict)])
        if isinstance(response, dict):
            content = response.get("content")
            if isinstance(content, dict):
                fill(op, output_messages=[gemini_message(content)])
            if present(response.get("error_message")) and op.error is None:
                op.error = f"{response.get('error_code') or 'error'}: {response['error_message']}"
    elif op.kind == TOOL:
        fill(op, tool_name=span_name_subject(record.name, "execute_tool"))
        if op.tool_arguments is None and present(attrs.get("gcp.vertex.agent.tool_call_args")):
            op.tool_arguments = parse_json_value(attrs["gcp.vertex.agent.tool_call_args"], "gcp.vertex.agent.tool_call_args", issues)
        if op.tool_result is None and present(attrs.get("gcp.vertex.agent.tool_response")):
            op.tool_result = maybe_json(attrs["gcp.vertex.agent.tool_response"], "gcp.vertex.agent.tool_response", issues)
    elif op.kind == AGENT:
        fill(op, agent_name=span_name_subject(record.name, "agent_run", "invoke_agent"))


def _json(attrs: Any, key: str, issues: list[str]) -> Any:
    return parse_json_value(attrs[key], key, issues) if present(attrs.get(key)) else None


def gemini_message(content: dict[str, Any]) -> Message:
    """A Gemini ``Content`` (``{role, parts[]}``) as a Message; role ``model`` is the assistant."""
    role = str(content.get("role") or "unknown")
    message = Message(role="assistant" if role == "model" else role)
    for part in content.get("parts") or ():
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            (message.reasoning if part.get("thought") else message.texts).append(part["text"])
        call = part.get("function_call") or part.get("functionCall")
        if isinstance(call, dict) and present(call.get("name")):
            message.tool_calls.append(RequestedCall(str(call["name"]), call.get("args"), as_str(call.get("id"))))
        response = part.get("function_response") or part.get("functionResponse")
        if isinstance(response, dict):
            message.tool_results.append((as_str(response.get("id")), response.get("response")))
    if message.tool_results and not message.texts and not message.tool_calls:
        message.role = "tool"
    return message
