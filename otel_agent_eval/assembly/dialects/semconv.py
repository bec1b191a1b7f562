"""OpenTelemetry GenAI semantic conventions (v1.37+ message parts, tool attributes).

``gen_ai.operation.name`` gives the kind; content lives in
``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON lists of
``{role, parts[]}``) and ``gen_ai.tool.call.*``.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

from ...records import STATUS_ERROR, SpanRecord
from ..rules import ANSWER_ON_THE_AGENT, TRANSFER_TOOLS
from .base import (
    AGENT,
    LLM,
    NOT_SPECIFIED,
    OTHER,
    STEP,
    TOOL,
    WORKFLOW,
    WRAPPER_KEYS,
    Message,
    Operation,
    RequestedCall,
    as_str,
    bedrock_result,
    fill,
    first_str,
    maybe_json,
    parse_json_value,
    span_error,
    text_of,
    unwrap_tool_payload,
    usage_from,
)

MARKERS = (
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.system",
    "gen_ai.tool.name",
    "gen_ai.agent.name",
)
DETECT_KEYS = (*MARKERS, "gen_ai.input.messages")
"""Every attribute key ``detect`` looks at: only spans carrying one are asked (``dialects.detected``)."""
CONFIRM_KEYS = DETECT_KEYS
"""Keys whose presence alone is a ``detect``: a span that has one is not asked again."""

OPERATION_KINDS = {
    "invoke_agent": AGENT,
    "create_agent": OTHER,
    "invoke_workflow": WORKFLOW,
    "chat": LLM,
    "generate_content": LLM,
    "text_completion": LLM,
    "execute_tool": TOOL,
    "agent_step": STEP,
    "execute_event_loop_cycle": STEP,
}

DETAILS_EVENT = "gen_ai.client.inference.operation.details"
"""Carries the span's content as event attributes (Strands latest mode, event-only content joined to a span)."""
_EVENT_NAME = attrgetter("name")

STRANDS = "strands-agents"
SWARM_CONTEXT, SWARM_TASK = "Context:\n", "User Request: "
SWARM_SECTIONS = (
    "\n\nPrevious agents who worked on this:", "\n\nShared knowledge from previous agents:",
    "\n\nOther agents available for collaboration:", "\n\nYou have access to swarm coordination tools",
)
"""What a Strands ``Swarm`` sends each agent instead of the user's message (``Swarm._build_node_input``):
``Context:\n``, an optional ``Handoff Message: ...``, ``User Request: {task}``, then these sections."""
"""Strands' ``gen_ai.provider.name``: its tool results are Bedrock content blocks (``_extract_tool``)."""
SWARM_HANDOFF, SWARM_HANDOFF_ARGUMENT = "handoff_to_agent", "agent_name"
"""A Strands swarm agent's tool that hands the run to the agent it names, whose ``invoke_agent`` is a
sibling of the caller's under ``invoke_swarm`` (``rules.TransferTools`` links them)."""

INPUT_TOKENS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
OUTPUT_TOKENS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.definitions")
_CONTENT = frozenset(CONTENT_KEYS)
_OBJECT_OR_LIST = ("{", "[")
MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model")
PROVIDER_KEYS = ("gen_ai.provider.name", "gen_ai.system")


def detect(record: SpanRecord) -> bool:
    attrs = record.attributes
    for key in MARKERS:  # a loop, not any(): this runs on every span
        if key in attrs:
            return True
    return "gen_ai.input.messages" in attrs


def kind(record: SpanRecord) -> str | None:
    operation = record.attributes.get("gen_ai.operation.name")
    if operation is None or "langsmith.span.kind" in record.attributes:  # LangSmith calls a prompt run "chat" too:
        return None  # its own kind says what the span is (``legacy.kind``)
    return OPERATION_KINDS.get(operation, OTHER)  # embeddings, retrieval, memory...: not part of a step


def guess_kind(record: SpanRecord) -> str | None:
    """No operation name (older or partial instrumentations): infer from the attributes present."""
    attrs = record.attributes
    if "gen_ai.operation.name" in attrs:
        return None
    if "gen_ai.tool.name" in attrs:
        return TOOL
    if any(key in attrs for key in CONTENT_KEYS) or "gen_ai.request.model" in attrs:
        return LLM
    if "gen_ai.agent.name" in attrs:
        return AGENT
    return None


def content(record: SpanRecord) -> dict[str, Any]:
    """Content attributes: on the span, else on a ``gen_ai.client.inference.operation.details`` event."""
    found = {key: record.attributes[key] for key in CONTENT_KEYS if key in record.attributes}
    for event in record.events:
        if event.name == DETAILS_EVENT:
            for key in CONTENT_KEYS:
                if key not in found and key in event.attributes:
                    found[key] = event.attributes[key]
    return found


def extract(record: SpanRecord, op: Operation) -> None:
    attrs = record.attributes
    get = attrs.get
    kind = op.kind
    # What ``fill`` and ``first_str`` do, spelled out: this runs on every span, and usually first
    # (every field empty). ``first_str`` is asked only when the first value found is not a plain string.
    if kind == AGENT and op.agent_name is None and (value := get("gen_ai.agent.name")) is not None:
        op.agent_name = as_str(value) or None
    if op.conversation_id is None and (value := get("gen_ai.conversation.id")) is not None:
        op.conversation_id = as_str(value) or None
    if op.model is None:
        value = get("gen_ai.response.model")
        if value is None:
            value = get("gen_ai.request.model")
        if value is not None:
            op.model = value if type(value) is str and value and value != NOT_SPECIFIED else first_str(attrs, *MODEL_KEYS)
    if op.provider is None:
        value = get("gen_ai.provider.name")
        if value is None:
            value = get("gen_ai.system")
        if value is not None:
            op.provider = value if type(value) is str and value and value != NOT_SPECIFIED else first_str(attrs, *PROVIDER_KEYS)
    if op.error is None and record.status_code == STATUS_ERROR:
        op.error = span_error(record)
    if kind == TOOL:
        _extract_tool(record, op)
        return
    if kind == LLM and op.usage is None:
        input_tokens, output_tokens = get("gen_ai.usage.input_tokens"), get("gen_ai.usage.output_tokens")
        if type(input_tokens) is int and type(output_tokens) is int:  # the usual counts: ``usage_from``'s answer
            op.usage = (input_tokens or 0, output_tokens or 0)
        else:
            op.usage = usage_from(attrs, INPUT_TOKENS, OUTPUT_TOKENS)
    _extract_content(record, op)


def _extract_content(record: SpanRecord, op: Operation) -> None:
    """Messages and tool definitions: on the span, else on a details event."""
    found = content(record) if record.events else record.attributes  # the same look-ups, without copying
    issues = op.issues
    if "gen_ai.input.messages" in found and op._pending_input is None and op._input_messages is None:  # not ``input_known``
        raw = found["gen_ai.input.messages"]
        if op.kind == LLM:  # system prompt + history on every model call: parsed when assembly needs it
            op.defer_input_messages(lambda issues: parse_messages(raw, "gen_ai.input.messages", issues))
        else:
            op.input_messages = parse_messages(raw, "gen_ai.input.messages", issues)
    if "gen_ai.output.messages" in found and op.output_messages is None:
        op.output_messages = parse_messages(found["gen_ai.output.messages"], "gen_ai.output.messages", issues)
    if "gen_ai.tool.definitions" in found and op.tool_definitions is None:
        definitions = parse_json_value(found["gen_ai.tool.definitions"], "gen_ai.tool.definitions", issues)
        if isinstance(definitions, list):
            op.tool_definitions = definitions


def _extract_tool(record: SpanRecord, op: Operation) -> None:
    attrs = record.attributes
    events = record.events
    # Messages on a tool span are rare: content keys, or a details event. Any other event (a failed
    # tool's ``exception``) holds none, and its stack trace is not looked at here.
    if not _CONTENT.isdisjoint(attrs) or (events and DETAILS_EVENT in map(_EVENT_NAME, events)):
        _extract_content(record, op)
    get = attrs.get
    issues = op.issues
    if op.tool_name is None and (value := get("gen_ai.tool.name")) is not None:
        op.tool_name = value if type(value) is str and value and value != NOT_SPECIFIED else first_str(attrs, "gen_ai.tool.name")
    if not op.tool_call_ids and (value := get("gen_ai.tool.call.id")) is not None:
        if type(value) is str:  # ``call_ids`` of the usual value
            value = value.strip()
            op.tool_call_ids = [value] if value else []
        else:
            op.tool_call_ids = call_ids(value)
    if op.tool_arguments is None:
        arguments = get("gen_ai.tool.call.arguments")
        if arguments is not None and arguments != "" and arguments != NOT_SPECIFIED:  # ``present``, inlined
            arguments = parse_json_value(arguments, "gen_ai.tool.call.arguments", issues)
            # ``unwrap_tool_payload``'s own first test, before calling it: most arguments have no wrapper
            # (parsed values are plain: a dict is exactly a ``dict``)
            op.tool_arguments = (
                unwrap_tool_payload(arguments) if type(arguments) is dict and not WRAPPER_KEYS.isdisjoint(arguments)
                else arguments
            )
    if op.tool_result is None:
        result = get("gen_ai.tool.call.result")
        if result is not None and result != "" and result != NOT_SPECIFIED:
            if type(result) is str and result[:1] in _OBJECT_OR_LIST:  # ``maybe_json``'s test, met at once
                result = parse_json_value(result, "gen_ai.tool.call.result", issues)
            else:
                result = maybe_json(result, "gen_ai.tool.call.result", issues)
            op.tool_result = (
                unwrap_tool_payload(result) if type(result) is dict and not WRAPPER_KEYS.isdisjoint(result) else result
            )
    # Tool spans that record their content as messages (Strands latest mode): a tool_call
    # part holds the arguments, a tool_call_response part the result. (``input_known``, inlined.)
    if op._pending_input is not None or op._input_messages is not None or op.output_messages:
        _tool_from_messages(op, op.input_messages or [])
    if op.provider == STRANDS and op.tool_result is not None:
        # Strands (latest mode) records the result, in ``gen_ai.tool.call.result`` and in the
        # ``tool_call_response`` part, as Bedrock blocks (``[{"text": ...}]``); its default mode's
        # ``gen_ai.choice`` event holds the same blocks, which the legacy dialect unwraps to the
        # text: the same run must give the same result in both modes.
        op.tool_result = bedrock_result(op.tool_result)


def finish(op: Operation) -> None:
    if op.provider == STRANDS:
        op.map_input_messages(_swarm_tasks)
        if op.tool_name == SWARM_HANDOFF:
            op.transfer_argument = SWARM_HANDOFF_ARGUMENT


def _swarm_tasks(messages: list[Message] | None) -> list[Message] | None:
    """A Strands swarm agent's input: the user's request, not the swarm's context around it."""
    for message in messages or ():
        if message.role == "user" and len(message.texts) == 1:
            task = swarm_task(message.texts[0])
            if task is not None:
                message.texts = [task]
    return messages


def swarm_task(text: str) -> str | None:
    """The ``User Request`` of a Strands swarm's node input, or None when ``text`` is not one."""
    if not text.startswith(SWARM_CONTEXT):
        return None
    start = text.find(SWARM_TASK, len(SWARM_CONTEXT))
    if start < 0 or (start > len(SWARM_CONTEXT) and text[start - 1] != "\n"):
        return None
    start += len(SWARM_TASK)
    ends = [end for end in (text.find(section, start) for section in SWARM_SECTIONS) if end >= 0]
    return text[start:min(ends)] if ends else text[start:].rstrip()


def _tool_from_messages(op: Operation, inputs: list[Message]) -> None:
    for message in inputs:
        for call in message.tool_calls:
            fill(op, tool_name=call.name, tool_arguments=call.arguments)
            if call.call_id:
                fill(op, tool_call_ids=[call.call_id])
    for message in (op.output_messages or []) + inputs:
        for call_id, result in message.tool_results:
            fill(op, tool_result=result)
            if call_id:
                fill(op, tool_call_ids=[call_id])


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


def chat_parts(item: dict[str, Any]) -> list[dict[str, Any]]:
    """Parts for a message in the plain chat shape ``{role, content, tool_calls?, tool_call_id?}``.

    That shape is used by the deprecated ``gen_ai.*.message`` / ``gen_ai.choice`` event
    bodies, single-string ``gen_ai.prompt`` JSON and OpenAI-style message lists.
    """
    parts: list[dict[str, Any]] = []
    content = item.get("content")
    call_id = item.get("tool_call_id") or (item.get("id") if item.get("role") == "tool" else None)
    if item.get("role") == "tool" or item.get("tool_call_id"):
        if content is not None:
            parts.append({"type": "tool_call_response", "id": call_id, "response": content})
    elif content is not None and content != "":
        parts.append({"type": "text", "content": text_of(content)})
    for call in item.get("tool_calls") or ():
        if not isinstance(call, dict):
            continue
        function = call.get("function") if isinstance(call.get("function"), dict) else call
        parts.append(
            {"type": "tool_call", "id": call.get("id"), "name": function.get("name"), "arguments": function.get("arguments")}  # type: ignore[union-attr]
        )
    return parts


def parse_message(item: dict[str, Any], attribute: str, issues: list[str]) -> Message:
    """One message; ``item`` is plain (as ``parse_json_value`` returns it)."""
    role = item.get("role")
    finish_reason = item.get("finish_reason")
    message = Message(
        role if type(role) is str and role else str(role or "unknown"), [], [], [], [], [],
        None if finish_reason is None else str(finish_reason),
    )
    parts = item.get("parts")
    if parts is None:
        parts = chat_parts(item)
    if not isinstance(parts, list):
        parts = []
    texts = message.texts
    for part in parts:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            content = part.get("content")
            if content is not None:
                texts.append(content if isinstance(content, str) else str(content))
        elif kind == "tool_call":
            name = part.get("name")
            if not name:
                issues.append(f"{attribute}: tool_call part without a name")
                continue
            arguments = part.get("arguments")
            if isinstance(arguments, str):  # else already plain: messages come from parse_json_value
                arguments = parse_json_value(arguments, f"{attribute} tool_call arguments", issues)
            call_id = part.get("id")
            call_id = (call_id.strip() or None) if type(call_id) is str else _last_call_id(call_id)
            message.tool_calls.append(RequestedCall(name if type(name) is str else str(name), arguments, call_id))
        elif kind == "tool_call_response":
            result = part["response"] if "response" in part else part.get("result")
            message.tool_results.append((_last_call_id(part.get("id")), result))
        elif kind in ("reasoning", "thinking"):
            content = part.get("content")
            if content:
                message.reasoning.append(str(content))
    return message


def _last_call_id(value: Any) -> str | None:
    """The last of ``call_ids(value)``, or None; a string id (the usual case) without making the list."""
    if isinstance(value, str):
        return value.strip() or None
    ids = call_ids(value)
    return ids[-1] if ids else None


RULES = (TRANSFER_TOOLS, ANSWER_ON_THE_AGENT)
