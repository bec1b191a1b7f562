"""Older GenAI conventions still emitted in the wild.

* Indexed ``gen_ai.prompt.{i}.*`` / ``gen_ai.completion.{i}.*`` (OpenLLMetry <= 0.54,
  Koog, others), with ``tool_calls.{j}.{id,name,arguments}``. Koog quirks: each
  requested tool call is its own completion index whose ``content`` is a JSON list
  ``[{function: {name, arguments}, id, type}]``, and both assistant tool-call
  messages and tool results carry role ``tool``.
* Single-string ``gen_ai.prompt`` / ``gen_ai.completion`` (semconv <= 1.27 span
  events ``gen_ai.content.prompt|completion``; LangSmith's OTel export, which also
  sets ``langsmith.span.kind``).
* Deprecated message events ``gen_ai.{system,user,assistant,tool}.message`` and
  ``gen_ai.choice`` as span events, including Strands' Bedrock-style content blocks
  (``[{"text"}, {"toolUse"}, {"toolResult"}]``).
* ``gen_ai.system`` as provider, ``gen_ai.usage.prompt_tokens|completion_tokens``,
  ``llm.request.type``.
"""

from __future__ import annotations

from typing import Any

from ...records import SpanEvent, SpanRecord
from .base import (
    AGENT,
    LLM,
    NOT_SPECIFIED,
    OTHER,
    TOOL,
    Message,
    Operation,
    RequestedCall,
    as_str,
    bedrock_result,
    fill,
    first_str,
    maybe_json,
    parse_json_value,
    present,
    text_of,
    unwrap_tool_payload,
    usage_from,
)
from .cut_json import is_cut_short
from .indexed import Flattened, Pick
from .langgraph import LANGSMITH_NODE, langchain_messages, langchain_tool_output, langgraph_task
from .semconv import parse_message

MARKERS = ("llm.request.type",)

MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
CHOICE_EVENT = "gen_ai.choice"
STRING_EVENTS = {"gen_ai.content.prompt": "gen_ai.prompt", "gen_ai.content.completion": "gen_ai.completion"}
REQUEST_TYPES = {"chat": LLM, "completion": LLM}
LANGSMITH_KINDS = {"llm": LLM, "chat_model": LLM, "tool": TOOL}
DETECT_KEYS = (*MARKERS, "gen_ai.prompt", "gen_ai.completion", "gen_ai.prompt.0.role", "gen_ai.completion.0.role",
               "gen_ai.completion.0.content", "langsmith.span.kind")
CONFIRM_KEYS = DETECT_KEYS
"""``detect`` is true for a span with any of its keys: a span signalled by one is not asked again."""
DETECT_EVENTS = (*MESSAGE_EVENTS, CHOICE_EVENT, *STRING_EVENTS)


def detect(record: SpanRecord) -> bool:
    attrs = record.attributes
    if "llm.request.type" in attrs or "gen_ai.prompt" in attrs or "gen_ai.completion" in attrs:
        return True
    if "langsmith.span.kind" in attrs:  # LangSmith's export, its inputs and outputs hidden or not
        return True
    if "gen_ai.prompt.0.role" in attrs or "gen_ai.completion.0.role" in attrs or "gen_ai.completion.0.content" in attrs:
        return True
    return bool(record.events) and any(
        e.name in MESSAGE_EVENTS or e.name == CHOICE_EVENT or e.name in STRING_EVENTS for e in record.events
    )


def kind(record: SpanRecord) -> str | None:
    attrs = record.attributes
    if "langsmith.span.kind" in attrs:
        if LANGSMITH_NODE not in attrs and attrs.get("langsmith.metadata.ls_integration") == "langgraph":
            return AGENT  # a LangGraph graph run as no node of another: the run (its nodes carry their node's name)
        return LANGSMITH_KINDS.get(str(attrs["langsmith.span.kind"]).lower(), OTHER)
    if "llm.request.type" in attrs:
        value = attrs["llm.request.type"]
        return REQUEST_TYPES.get(value if type(value) is str else str(value), OTHER)
    return None


def guess_kind(record: SpanRecord) -> str | None:
    return LLM  # prompts and completions are what a model call records


def extract(record: SpanRecord, op: Operation) -> None:
    attrs = record.attributes
    if LANGSMITH_NODE in attrs:  # the LangGraph node task a span of LangSmith's export runs in
        node, namespace = langgraph_task(attrs)
        fill(op, graph_node=node, graph_namespace=namespace)
    if op.provider is None:  # ``fill``, spelled out: this runs on every model call of these instrumentations
        op.provider = first_str(attrs, "gen_ai.system")
    if op.model is None:
        op.model = first_str(attrs, "gen_ai.response.model", "gen_ai.request.model")
    kind = op.kind
    if kind == TOOL:
        _extract_tool(record, op)
        return
    if kind == AGENT:
        _extract_graph(record, op)
        return
    if kind != LLM:
        return
    issues = op.issues
    events = record.events
    eager = op.input_known  # else the prompt (the history, repeated on every call) is parsed when needed
    if eager:
        fill(op, input_messages=_indexed(attrs, issues, "prompt"))
    output = _indexed(attrs, issues, "completion")
    if output and not op.output_messages:  # ``fill``, spelled out here and below
        op.output_messages = output
    if eager:
        fill(op, input_messages=_single_string(record, "gen_ai.prompt", "user", issues))
    if "gen_ai.completion" in attrs or events:  # else there is no single string
        output = _single_string(record, "gen_ai.completion", "assistant", issues)
        if output and not op.output_messages:
            op.output_messages = output
    events_in, events_out = _from_events(events, issues) if events else (None, None)
    if eager:
        fill(op, input_messages=events_in)
    else:
        op.defer_input_messages(lambda issues: _indexed(attrs, issues, "prompt")
                                or _single_string(record, "gen_ai.prompt", "user", issues) or events_in)
    if events_out and not op.output_messages:
        op.output_messages = events_out
    if op.usage is None:
        op.usage = usage_from(attrs, ("gen_ai.usage.prompt_tokens",), ("gen_ai.usage.completion_tokens",))


# -- indexed attributes ---------------------------------------------------------


def _indexed(attrs: Any, issues: list[str], side: str) -> list[Message] | None:
    """``gen_ai.{side}.{i}.*`` (``side``: prompt or completion) as messages; None when there are none."""
    reader = _SIDES[side]
    layout = reader.layout(attrs)
    if not layout:
        return None
    get = attrs.get  # ``get(None)``: None, for a field the message does not have
    prefix = reader.prefix
    messages = [_indexed_message(get, message, prefix, issues) for message in layout]
    return _pair_tool_results(messages)


MessageLayout = tuple[int, "str | None", "str | None", "str | None", "tuple[tuple[int, str | None, str | None, str | None], ...]"]
"""``(index, role key, content key, tool_call_id key, calls)`` of one message (None: no such key), its
``calls`` as ``(j, name key, arguments key, id key)`` in ``j`` order."""


def _layout(picks: list[Pick]) -> tuple[MessageLayout, ...]:
    """Which keys hold what ``_indexed_message`` reads of each message, in index order: the keys of its
    plain fields and of its ``tool_calls.{j}.{id,name,arguments}``; the pre-tools ``function_call.*``
    fields read as one more call. Depends on the keys only (``Flattened.layout`` remembers it); picks of
    one field in several keys (``0`` and ``00``): the last one read, as its value would be."""
    by_index: dict[int, tuple[dict[str, str], dict[int, dict[str, str]]]] = {}
    for key, index, field, nested in picks:
        entry = by_index.get(index)
        if entry is None:
            entry = by_index[index] = ({}, {})
        if nested is None:
            entry[0][field] = key
        else:  # ``tool_calls.{j}.{name}``
            entry[1].setdefault(nested[1], {})[nested[2]] = key
    layout = []
    for index in sorted(by_index):
        fields, calls = by_index[index]
        if "function_call.name" in fields:  # pre-tools OpenAI API
            calls.setdefault(len(calls), {}).update(
                name=fields["function_call.name"], arguments=fields.get("function_call.arguments")
            )
        layout.append((index, fields.get("role"), fields.get("content"), fields.get("tool_call_id"), tuple(
            (j, call.get("name"), call.get("arguments"), call.get("id")) for j, call in sorted(calls.items())
        )))
    return tuple(layout)


_SIDES = {side: Flattened(f"gen_ai.{side}.", nested=(("tool_calls.", "."),), compile=_layout) for side in ("prompt", "completion")}
"""A message's fields, and its ``tool_calls.{j}.{id,name,arguments}`` split along."""


def _indexed_message(get: Any, layout: MessageLayout, prefix: str, issues: list[str]) -> Message:
    """The message a ``layout`` (``_layout``) says where to read, read with ``get`` (the span's
    ``attributes.get``). Its attribute prefix (``gen_ai.completion.0``, for issues) is spelled only where
    it is used."""
    index, role, content, tool_call_id, calls = layout
    role, content = get(role), get(content)
    message = Message(role if type(role) is str and role else str(role or "unknown"))
    requested = _indexed_calls(get, calls, prefix, index, issues) if calls else []
    if isinstance(content, str) and '"function"' in content:  # what ``_koog_calls`` looks for, first
        listed = _koog_calls(content, f"{prefix}{index}", issues)
        if listed is not None:  # Koog: the content itself is the list of tool calls
            requested.extend(listed)
            content = None
    message.tool_calls = requested
    if content is not None and content != "":
        call_id = get(tool_call_id)
        if role == "tool" or call_id:
            message.tool_results.append((as_str(call_id), content))
        elif type(content) is str and "[{" not in content:  # plain text: what ``_content_text`` returns
            message.texts.append(content)
        else:
            message.texts.append(_content_text(content, f"{prefix}{index}", issues))
    return message


def _indexed_calls(get: Any, calls: tuple[tuple[int, str | None, str | None, str | None], ...], prefix: str, message: int,
                   issues: list[str]) -> list[RequestedCall]:
    """A message's requested calls, read with ``get`` from the keys their layout gives (``_layout``)."""
    result = []
    for index, name, arguments, call_id in calls:
        name, arguments, call_id = get(name), get(arguments), get(call_id)
        if name is None or name == "" or name == NOT_SPECIFIED:  # not ``present``
            issues.append(f"{prefix}{message}.tool_calls.{index}: no name")
            continue
        found: list[str] = []
        parsed = parse_json_value(arguments, "", found)
        if found:  # parsed again for the issue: its attribute name is spelled only then
            parsed = parse_json_value(arguments, f"{prefix}{message}.tool_calls.{index}.arguments", issues)
        result.append(RequestedCall(name if type(name) is str else str(name), parsed,
                                    call_id if call_id is None or type(call_id) is str else str(call_id)))
    return result


def _koog_calls(content: str, prefix: str, issues: list[str]) -> list[RequestedCall] | None:
    """A content that is a JSON list of ``{function: {name, arguments}, id}``, else None."""
    text = content.strip()
    if not (text.startswith("[") and '"function"' in text):
        return None
    data = parse_json_value(text, f"{prefix}.content", issues)
    if not isinstance(data, list) or not data or not all(isinstance(d, dict) and isinstance(d.get("function"), dict) for d in data):
        return None
    calls = []
    for item in data:
        function = item["function"]
        if not present(function.get("name")):
            continue
        arguments = parse_json_value(function.get("arguments"), f"{prefix}.content arguments", issues)
        calls.append(RequestedCall(str(function["name"]), arguments, as_str(item.get("id"))))
    return calls


def _content_text(content: Any, prefix: str, issues: list[str]) -> str:
    """Content may be a JSON-encoded list of blocks (OpenLLMetry encodes list content)."""
    if isinstance(content, str) and content.strip().startswith("[{"):
        data = parse_json_value(content, f"{prefix}.content", [])
        if isinstance(data, list):
            return text_of(data) or content
    return text_of(content) or ""


def _pair_tool_results(messages: list[Message]) -> list[Message]:
    """Give id-less tool results the ids of the calls they answer, in request order (Koog)."""
    for message in messages:
        if message.tool_results:
            break
    else:
        return messages  # no result to pair (a model's output, usually)
    pending: list[str] = []
    for message in messages:
        pending.extend(call.call_id for call in message.tool_calls if call.call_id)
        for i, (call_id, result) in enumerate(message.tool_results):
            if call_id is None and pending:
                message.tool_results[i] = (pending.pop(0), result)
            elif call_id in pending:
                pending.remove(call_id)
    return messages


# -- single strings ---------------------------------------------------------------


def _single_string(record: SpanRecord, key: str, role: str, issues: list[str]) -> list[Message] | None:
    value = record.attributes.get(key)
    if value is None:
        for event in record.events:
            if STRING_EVENTS.get(event.name) == key and key in event.attributes:
                value = event.attributes[key]
                break
    if not present(value):
        return None
    return messages_from_any(value, role, key, issues)


def messages_from_any(value: Any, role: str, attribute: str, issues: list[str]) -> list[Message]:
    """A prompt/completion given as a message list, a ``{"messages": [...]}`` object, a LangChain payload
    (``langchain_messages``: LangSmith's OTel export), an OpenAI ChatCompletion (``{"choices": [{"message"}]}``:
    LangSmith's ``wrap_openai``) or plain text."""
    data = parse_json_value(value, attribute, issues)
    if is_cut_short(data) or data == {} or data == []:  # a cut start (counted) or nothing (LangSmith's hidden inputs)
        return []
    if isinstance(data, (dict, list)):
        langchain = langchain_messages(data)
        if langchain is not None:
            return langchain
    if isinstance(data, dict) and isinstance(data.get("choices"), list):  # an OpenAI ChatCompletion (wrap_openai)
        data = [c["message"] for c in data["choices"] if isinstance(c, dict) and isinstance(c.get("message"), dict)]
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        data = data["messages"]
    if isinstance(data, dict) and "role" in data:
        data = [data]
    if isinstance(data, list) and data and all(isinstance(d, dict) and "role" in d for d in data):
        return [parse_message(d, attribute, issues) for d in data]
    text = text_of(data) if not isinstance(data, str) else data
    return [Message(role=role, texts=[text])] if text else []


# -- deprecated message events -------------------------------------------------------


def _from_events(events: tuple[SpanEvent, ...], issues: list[str]) -> tuple[list[Message] | None, list[Message] | None]:
    inputs: list[Message] = []
    outputs: list[Message] = []
    for event in events:
        if event.name in MESSAGE_EVENTS:
            inputs.append(event_message(event, MESSAGE_EVENTS[event.name], issues))
        elif event.name == CHOICE_EVENT:
            outputs.append(choice_message(event, issues))
    return (_pair_tool_results(inputs) or None), (outputs or None)


def event_message(event: SpanEvent, role: str, issues: list[str]) -> Message:
    """One ``gen_ai.*.message`` event: ``content`` (text, chat JSON or content blocks), ``tool_calls``, ``id``."""
    attrs = event.attributes
    item: dict[str, Any] = {"role": as_str(attrs.get("role")) or role}
    content = maybe_json(attrs.get("content"), f"{event.name}.content", issues)
    tool_calls = parse_json_value(attrs.get("tool_calls"), f"{event.name}.tool_calls", issues)
    if isinstance(content, dict) and ("content" in content or "tool_calls" in content):
        item.update(content)  # the whole event body was stored as one JSON attribute
    else:
        item["content"] = content
    if isinstance(tool_calls, list):
        item["tool_calls"] = tool_calls
    if attrs.get("id") is not None and item["role"] == "tool":
        item.setdefault("tool_call_id", as_str(attrs.get("id")))
    return _with_blocks(item, event.name, issues)


def choice_message(event: SpanEvent, issues: list[str]) -> Message:
    """A ``gen_ai.choice`` event: ``message`` is a chat message or Strands content blocks.

    Semantic Kernel logs the whole body as one JSON string (``{"message": ..., "finish_reason": ...}``),
    which a joined log record holds as its ``content``."""
    message = maybe_json(event.attributes.get("message"), f"{event.name}.message", issues)
    if message is None and "content" in event.attributes:
        body = maybe_json(event.attributes["content"], f"{event.name}.content", issues)
        if isinstance(body, dict) and isinstance(body.get("message"), dict):
            message = body["message"]
    if isinstance(message, dict) and ("content" in message or "tool_calls" in message):
        item = {"role": "assistant", **message}
    else:
        item = {"role": "assistant", "content": message}
    return _with_blocks(item, event.name, issues)


def _with_blocks(item: dict[str, Any], attribute: str, issues: list[str]) -> Message:
    """Parse a chat-shaped item whose content may be Bedrock/Strands blocks."""
    content = item.get("content")
    if isinstance(content, list) and any(isinstance(b, dict) and ("toolUse" in b or "toolResult" in b) for b in content):
        message = Message(role=str(item.get("role") or "unknown"))
        for block in content:
            if not isinstance(block, dict):
                continue
            if isinstance(block.get("text"), str):
                message.texts.append(block["text"])
            elif isinstance(block.get("toolUse"), dict):
                use = block["toolUse"]
                message.tool_calls.append(RequestedCall(str(use.get("name") or "unknown"), use.get("input"), as_str(use.get("toolUseId"))))
            elif isinstance(block.get("toolResult"), dict):
                result = block["toolResult"]
                message.tool_results.append((as_str(result.get("toolUseId")), bedrock_result(result.get("content"))))
        if message.tool_results and not message.texts and not message.tool_calls:
            message.role = "tool"
        return message
    if isinstance(content, list) and all(isinstance(b, dict) for b in content):
        item = {**item, "content": text_of(content)}
    return parse_message(item, attribute, issues)


def _extract_graph(record: SpanRecord, op: Operation) -> None:
    """A LangGraph graph in LangSmith's export: its input and output states (``{"messages": [...]}``), named by the
    compiled graph (read so by ``langgraph.SubgraphAgents`` too, for a graph run as a node of another)."""
    attrs = record.attributes
    if "langsmith.span.kind" not in attrs:
        return
    if present(attrs.get("gen_ai.prompt")) and op.input_messages is None:
        op.input_messages = messages_from_any(attrs["gen_ai.prompt"], "user", "gen_ai.prompt", op.issues) or None
    if present(attrs.get("gen_ai.completion")) and op.output_messages is None:  # the state's last answer
        state = messages_from_any(attrs["gen_ai.completion"], "assistant", "gen_ai.completion", op.issues)
        op.output_messages = [m for m in state if m.role == "assistant"][-1:] or None
    if LANGSMITH_NODE not in attrs:
        fill(op, agent_name=record.name)


def _extract_tool(record: SpanRecord, op: Operation) -> None:
    """Tool spans: LangSmith strings, or Strands' ``gen_ai.tool.message`` / ``gen_ai.choice`` events."""
    attrs = record.attributes
    issues = op.issues
    if present(attrs.get("gen_ai.prompt")):  # ``{}``: no arguments, or LangSmith's hidden inputs: not known here
        arguments = parse_json_value(attrs["gen_ai.prompt"], "gen_ai.prompt", issues)
        if arguments != {}:
            fill(op, tool_arguments=arguments)
    if present(attrs.get("gen_ai.completion")):  # LangSmith: {"output": <the ToolMessage>}, its call id and status
        result = unwrap_tool_payload(maybe_json(attrs["gen_ai.completion"], "gen_ai.completion", issues))
        if result != {}:  # ``{}``: LangSmith's hidden outputs
            fill(op, tool_result=langchain_tool_output(op, result))
    for event in record.events:
        if event.name == "gen_ai.tool.message":
            fill(op, tool_arguments=bedrock_result(parse_json_value(event.attributes.get("content"), "gen_ai.tool.message.content", issues)))
        elif event.name == CHOICE_EVENT and "message" in event.attributes:
            value = maybe_json(event.attributes["message"], "gen_ai.choice.message", issues)
            fill(op, tool_result=bedrock_result(value))
        else:
            continue
        call_id = as_str(event.attributes.get("id"))
        if present(call_id):
            fill(op, tool_call_ids=[call_id])
