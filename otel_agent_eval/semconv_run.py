"""A plain GenAI semconv agent run, assembled in one pass.

In the GenAI semantic conventions an agent run is typically one ``invoke_agent`` span
whose children are its ``chat`` and ``execute_tool`` spans, each tool span naming the
call id it ran. For such a trace the assembly rules (``assemble.py``) reduce to: one
step per model call in start order; each tool span fills the requested call of its id. The general path reads
every span through every dialect into an ``Operation``, then drafts, indexes and
back-fills: for this shape that machinery costs more than the reading itself
(docs/performance.md, "Pipeline"). Here the spans are read once, straight into
the ``AgentTrace`` fields.

It takes a trace only when it can give exactly what the general path gives, and
returns None otherwise; ``assemble`` then takes the general path. Declined: a span
another dialect also claims, span events, a span kind other than agent, model
call and tool (a step span, a second agent), a model or tool call that is not a
child of the agent span, an operation above the agent span, a model call with no
output messages, a tool span without exactly one call id or whose id no earlier
turn asked for (still open), a tool span without a result (the general path
back-fills it) or with message content, and any reading issue (malformed JSON:
the general path reports it). ``tests/test_assembly_perf_semconv_run.py`` holds the
two paths equal on chosen and generated traces, and ``tests/conftest.py`` on every
trace the test suite assembles.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter
from typing import Any

from .assembly.dialects import AGENT_NAME_PREFIXES, DIALECTS, semconv
from .assembly.dialects.base import (
    AGENT,
    LLM,
    OTHER,
    TOOL,
    Message,
    as_str,
    first_str,
    last_user_text,
    maybe_json,
    output_text,
    parse_json_value,
    present,
    reasoning_text,
    span_error,
    span_name_subject,
    token_counts,
    unwrap_tool_payload,
)
from .metadata import run_metadata
from .model import AgentTrace, step_texts
from .records import OWN_SCOPE, SpanRecord, span_id_hex, trace_id_hex

_OTHER_DIALECTS = tuple(dialect for dialect in DIALECTS if dialect is not semconv)
_CONTENT_KEYS = frozenset(semconv.CONTENT_KEYS)
"""On a tool span: its content recorded as messages (Strands latest mode), which the general path reads."""
_START_ORDER = attrgetter("start_time_unix_nano", "span_id")
"""Start time, then span id, as the general path orders operations (``assemble._start_order``)."""


def assemble_semconv_run(records: Mapping[int, SpanRecord]) -> AgentTrace | None:
    """The AgentTrace of one trace's spans (span id -> record), or None when it is not of this shape."""
    agent: SpanRecord | None = None
    llms: list[SpanRecord] = []
    tools: list[SpanRecord] = []
    for record in records.values():
        if record.scope_name == OWN_SCOPE:
            continue
        for dialect in _OTHER_DIALECTS:
            if dialect.detect(record):
                return None
        if not semconv.detect(record):
            continue  # no GenAI span: ancestry only
        if record.events:
            return None
        kind = semconv.kind(record)
        if kind == LLM:
            llms.append(record)
        elif kind == TOOL:
            tools.append(record)
        elif kind == AGENT and agent is None:
            agent = record
        elif kind != OTHER:  # a kind to guess, a step or workflow span, a second agent
            return None
    if agent is None or not tools:
        return None
    key = agent.span_id
    for record in llms + tools:
        if record.parent_span_id != key:
            return None
    operations = {key, *(record.span_id for record in llms), *(record.span_id for record in tools)}
    seen = {key}
    current = agent.parent_span_id
    while current is not None and current in records and current not in seen:
        if current in operations:
            return None
        seen.add(current)
        current = records[current].parent_span_id
    llms.sort(key=_START_ORDER)
    tools.sort(key=_START_ORDER)

    issues: list[str] = []  # any issue declines the trace: the general path reports it
    steps: list[dict[str, Any]] = []
    open_calls: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    """Requested call id -> (its step, its ``ToolCall`` fields) until a tool span fills it."""
    conversation_id: str | None = None
    tool_definitions: list[Any] | None = None
    input_tokens = output_tokens = 0
    for index, record in enumerate(llms):
        attrs = record.attributes
        if "gen_ai.output.messages" not in attrs:
            return None
        outputs = semconv.parse_messages(attrs["gen_ai.output.messages"], "gen_ai.output.messages", issues)
        if not outputs:
            return None
        if "gen_ai.tool.definitions" in attrs:
            definitions = parse_json_value(attrs["gen_ai.tool.definitions"], "gen_ai.tool.definitions", issues)
            if tool_definitions is None and isinstance(definitions, list) and definitions:
                tool_definitions = definitions
        if issues:
            return None
        if conversation_id is None:
            conversation_id = as_str(attrs.get("gen_ai.conversation.id")) or None
        step_calls: list[dict[str, Any]] = []
        step = {"index": index, "tool_calls": step_calls, "span_ids": [span_id_hex(record.span_id)], "issues": []}
        for message in outputs:
            for call in message.tool_calls:
                call_id = call.call_id
                if call_id in open_calls:
                    if open_calls[call_id][0] is step:
                        continue  # asked twice in one output: one call
                    return None  # asked again by a later turn: the general path decides which ran
                fields = {
                    "name": call.name, "arguments": call.arguments, "result": None, "error": None, "call_id": call_id,
                    "span_id": None, "start_time_unix_nano": None, "end_time_unix_nano": None,
                    "requested": True, "executed": False,
                }
                if call_id is not None:
                    open_calls[call_id] = (step, fields)
                step_calls.append(fields)
        step["thought"], step["output"] = step_texts(output_text(outputs), reasoning_text(outputs), bool(step_calls))
        step["model"] = first_str(attrs, "gen_ai.response.model", "gen_ai.request.model")
        counts = token_counts(attrs, semconv.INPUT_TOKENS, semconv.OUTPUT_TOKENS) or (0, 0)
        step["usage"] = {"input_tokens": counts[0], "output_tokens": counts[1]}
        input_tokens += counts[0]
        output_tokens += counts[1]
        step["error"] = span_error(record)
        steps.append(step)

    for record in tools:
        attrs = record.attributes
        if not _CONTENT_KEYS.isdisjoint(attrs):
            return None  # content as messages (Strands latest mode)
        ids = semconv.call_ids(attrs.get("gen_ai.tool.call.id"))
        if len(ids) != 1 or ids[0] not in open_calls:
            return None
        step, call = open_calls.pop(ids[0])
        result = attrs.get("gen_ai.tool.call.result")
        if not present(result) or semconv.STRANDS in (attrs.get("gen_ai.provider.name"), attrs.get("gen_ai.system")):
            return None  # Strands' Bedrock-block results: the general path unwraps them
        arguments = attrs.get("gen_ai.tool.call.arguments")
        if present(arguments):
            arguments = unwrap_tool_payload(parse_json_value(arguments, "gen_ai.tool.call.arguments", issues))
            # a bare value where the request has an object says less (``_StepDraft.attach``)
            if arguments is not None and (not isinstance(call["arguments"], dict) or isinstance(arguments, (dict, list))):
                call["arguments"] = arguments
        result = unwrap_tool_payload(maybe_json(result, "gen_ai.tool.call.result", issues))
        if issues or result is None:
            return None
        call["result"] = result
        call["error"] = span_error(record)
        call["span_id"] = span_id = span_id_hex(record.span_id)
        call["executed"] = True
        call["start_time_unix_nano"] = record.start_time_unix_nano
        call["end_time_unix_nano"] = record.end_time_unix_nano
        step["span_ids"].append(span_id)

    attrs = agent.attributes
    agent_inputs = _messages(attrs, "gen_ai.input.messages", issues)
    agent_outputs = _messages(attrs, "gen_ai.output.messages", issues)
    if "gen_ai.tool.definitions" in attrs:
        definitions = parse_json_value(attrs["gen_ai.tool.definitions"], "gen_ai.tool.definitions", issues)
        if isinstance(definitions, list) and definitions:
            tool_definitions = definitions  # the agent's come first
    task = last_user_text(agent_inputs)
    if not task and "gen_ai.input.messages" in llms[0].attributes:
        task = last_user_text(_messages(llms[0].attributes, "gen_ai.input.messages", issues))
    if issues:
        return None
    final_output = output_text(agent_outputs)
    final_output = final_output.strip() if final_output and final_output.strip() else None
    if final_output is None:
        final_output = next((step["output"].strip() for step in reversed(steps) if step["output"]), None)
    error = span_error(agent)
    members = llms + tools
    return AgentTrace.model_validate(dict(
        trace_id=trace_id_hex(agent.trace_id),
        agent_span_id=span_id_hex(key),
        agent_name=(
            as_str(attrs.get("gen_ai.agent.name")) or span_name_subject(agent.name, *AGENT_NAME_PREFIXES) or agent.name
        ),
        conversation_id=as_str(attrs.get("gen_ai.conversation.id")) or conversation_id,
        input=task,
        final_output=final_output,
        steps=steps,
        status="error" if error else "ok",
        error=error,
        start_time_unix_nano=min(agent.start_time_unix_nano, *(r.start_time_unix_nano for r in members)),
        end_time_unix_nano=max(agent.end_time_unix_nano, *(r.end_time_unix_nano for r in members)),
        usage={"input_tokens": input_tokens, "output_tokens": output_tokens},
        content_captured=True,  # every model call has output messages
        tool_definitions=tool_definitions,
        issues=[],
        metadata=run_metadata(agent.resource, attrs),
    ))


def _messages(attrs: Mapping[str, Any], key: str, issues: list[str]) -> list[Message] | None:
    return semconv.parse_messages(attrs[key], key, issues) if key in attrs else None
