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

ADK 2.x (``tests/test_frameworks_adk.py``) writes GenAI semconv by default (``invoke_workflow``,
``invoke_agent``, ``generate_content``, ``execute_tool``: read by the semconv dialect, with content
on the span or in ``gen_ai.client.inference.operation.details`` log records), the schema above with
``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1`` (where each ``call_llm`` wraps a semconv
``generate_content`` span: one model call, merged into one step). Both schemas share what this
module still corrects, on every span of scope ``gcp.vertex.agent``:

- ``execute_tool (merged)``, written after parallel calls with a synthetic call id and the
  results of the calls already recorded, is bookkeeping, not a tool execution (``ignores``);
- ``<not specified>`` stands for a missing call id or result (a tool that raised): absent;
- a streamed model call (``StreamingMode.SSE``, semconv) records one output message per chunk,
  finish reason ``""``, then the whole response: the response is the message with a finish reason;
- the history ADK sends an agent relays other agents' turns as user messages starting
  ``For context:``; they are not the user's, so not the agent's task (role ``other_agent``, ``finish``);
- ``transfer_to_agent(agent_name)`` hands the run to a sub-agent whose ``invoke_agent`` span is a
  sibling of the caller's: ``rules.TransferTools`` makes it the caller's child, linked to that step.
"""

from __future__ import annotations

from typing import Any

from ...records import SpanRecord
from ..rules import TRANSFER_TOOLS
from .base import (
    AGENT,
    LLM,
    NOT_SPECIFIED,
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
CONFIRM_KEYS = ("gcp.vertex.agent.llm_request", "gcp.vertex.agent.tool_call_args")
DETECT_KEYS = (*CONFIRM_KEYS, "gen_ai.system")
DETECT_SCOPES = (SYSTEM,)
MERGED_TOOLS_SPAN = "execute_tool (merged)"
OTHER_AGENT_PREFIX = "For context:"
"""How ADK's relay of another agent's turns starts (``flows/llm_flows/context/_fencing.py``)."""
OTHER_AGENT = "other_agent"
TRANSFER_TOOL, TRANSFER_ARGUMENT = "transfer_to_agent", "agent_name"
"""ADK's tool that hands the run to another agent (``rules.TransferTools``)."""


def detect(record: SpanRecord) -> bool:
    attrs = record.attributes
    return (
        record.scope_name == SYSTEM
        or attrs.get("gen_ai.system") == SYSTEM
        or "gcp.vertex.agent.llm_request" in attrs
        or "gcp.vertex.agent.tool_call_args" in attrs
    )


def ignores(record: SpanRecord) -> bool:
    """ADK's merged-tools span: bookkeeping after parallel calls, not a tool execution."""
    return record.name == MERGED_TOOLS_SPAN


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
    if op.tool_call_ids == [NOT_SPECIFIED]:
        op.tool_call_ids = []
    if op.kind == LLM:
        request = _json(attrs, "gcp.vertex.agent.llm_request", issues)
        response = _json(attrs, "gcp.vertex.agent.llm_response", issues)
        _expect_object(request, "gcp.vertex.agent.llm_request", issues)
        _expect_object(response, "gcp.vertex.agent.llm_response", issues)
        if isinstance(request, dict):
            fill(op, model=as_str(request.get("model")))
            if isinstance(request.get("config"), dict):
                fill(op, tool_definitions=_tool_definitions(request["config"]))
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
            result = maybe_json(attrs["gcp.vertex.agent.tool_response"], "gcp.vertex.agent.tool_response", issues)
            if result != {"result": NOT_SPECIFIED}:
                op.tool_result = result
    elif op.kind == AGENT:
        fill(op, agent_name=span_name_subject(record.name, "agent_run", "invoke_agent"))


def finish(op: Operation) -> None:
    if op.kind == TOOL and op.tool_name == TRANSFER_TOOL:
        op.transfer_argument = TRANSFER_ARGUMENT
    if op.kind == LLM:
        op.map_input_messages(_relays_as_other_agent)
        outputs = op.output_messages
        if outputs and len(outputs) > 1 and any(m.finish_reason == "" for m in outputs):
            # Streamed (StreamingMode.SSE): one message per chunk (finish reason ""), then the
            # whole response; the response is the one with a finish reason.
            final = [m for m in outputs if m.finish_reason]
            if final:
                op.output_messages = final


def _tool_definitions(config: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Gemini ``function_declarations`` as semconv ``gen_ai.tool.definitions`` (what ADK 2 writes)."""
    found = []
    for tool in config.get("tools") or ():
        for declaration in tool.get("function_declarations") or () if isinstance(tool, dict) else ():
            if isinstance(declaration, dict) and present(declaration.get("name")):
                parameters = declaration.get("parameters_json_schema", declaration.get("parameters"))
                found.append({"name": declaration["name"], "description": declaration.get("description"),
                              "parameters": parameters, "type": "function"})
    return found or None


def _relays_as_other_agent(messages: list[Message] | None) -> list[Message] | None:
    for message in messages or ():
        if message.role == "user" and message.texts and message.texts[0].startswith(OTHER_AGENT_PREFIX):
            message.role = OTHER_AGENT
    return messages


def _json(attrs: Any, key: str, issues: list[str]) -> Any:
    return parse_json_value(attrs[key], key, issues) if present(attrs.get(key)) else None


def _expect_object(value: Any, key: str, issues: list[str]) -> None:
    """ADK writes the request and response as JSON objects: any other JSON value is read as nothing,
    and said (a string is malformed JSON ``parse_json_value`` has reported already)."""
    if value is not None and not isinstance(value, (dict, str)):
        issues.append(f"{key}: expected a JSON object, got {type(value).__name__}; not read")


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


RULES = (TRANSFER_TOOLS,)
