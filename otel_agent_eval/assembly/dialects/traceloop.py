"""OpenLLMetry / Traceloop entity spans (the ``@workflow/@task/@agent/@tool`` layer).

``traceloop.span.kind`` gives the kind; ``traceloop.entity.name`` names the agent or
tool; ``traceloop.entity.input`` / ``output`` hold JSON, wrapped as
``{"args": [...], "kwargs": {...}}`` by the decorators or in the LangChain callback
wrapper (see ``base.unwrap_tool_payload``). OpenLLMetry's LLM spans use the legacy
indexed attributes or semconv messages, read by those modules.
Source: traceloop/openllmetry ``traceloop-sdk/traceloop/sdk/decorators/base.py``,
``opentelemetry-semantic-conventions-ai`` 0.5.2.

What the real LangChain instrumentation (``opentelemetry-instrumentation-langchain`` 0.62,
LangGraph; ``tests/test_frameworks_openllmetry.py``) adds to that:

* a tool span's output is ``{"output": <dumpd ToolMessage>, "kwargs"}``, and the ToolMessage
  holds the call id (``tool_call_id``) the span has nowhere else (no ``gen_ai.tool.call.id``),
  and ``status: "error"`` when the tool failed. Without the id, three identical
  ``search(query="x")`` calls in fast turns went to the wrong turns (the time-order fallback);
* the graph's ``traceloop.entity.input`` / ``output`` wrap the LangGraph state:
  ``{"inputs"|"outputs": {"messages": [...]}, "tags", "metadata", "kwargs"}``; the task is the
  last user message, the answer the last AI message;
* model spans carry no ``traceloop.span.kind``, only ``traceloop.workflow.name`` and the
  association properties; their ``gen_ai.request.model`` is the literal ``unknown`` when
  the instrumentation found no model in the invocation params, while LangChain's
  ``ls_model_name`` metadata (``traceloop.association.properties.ls_model_name``) names it.
* multi-agent LangGraph: the node and checkpoint namespace are
  ``traceloop.association.properties.langgraph_*`` (``langgraph.langgraph_task``), a handoff tool's
  output is the ``Command`` in the same ``{"output", "kwargs"}`` wrapper, and the
  ``ParentCommand`` a handoff raises ends the spans it passes ERROR (``base.span_error`` skips it).

What ``opentelemetry-instrumentation-openai-agents`` 0.62 adds (``tests/test_frameworks_openai_agents_openllmetry.py``):
every ``{agent}.agent`` span is a child of the ``Agent Workflow`` span, the agent run as a tool and the
handoff target included, and neither names the agent that started it (the handoff span, ``{from} →
unknown.handoff``, is named before the SDK knows the target). ``WorkflowSiblings`` links them: an
agent that started inside another agent's tool span of its name ran as that tool; the agent started
next after a ``handoff`` span took over from the agent that handed off.
"""

from __future__ import annotations

from typing import Any

from ...records import SpanRecord
from ..rules import CLOCK_SKEW_NS, Rule, Scope
from .base import (
    AGENT,
    LLM,
    NOT_SPECIFIED,
    OTHER,
    TOOL,
    WORKFLOW,
    Message,
    Operation,
    first_str,
    parse_json_value,
    present,
    text_of,
    tool_message,
    unwrap_tool_payload,
)
from .cut_json import is_cut_short
from .langgraph import LANGGRAPH_TASK_KEYS, langchain_text, langchain_tool_output, langgraph_task, parent_command

MARKERS = ("traceloop.span.kind",)
DETECT_KEYS = (*MARKERS, "traceloop.entity.name", "traceloop.workflow.name")
CONFIRM_KEYS = DETECT_KEYS
"""``detect`` is true for a span with any of its keys: a span signalled by one is not asked again."""

SPAN_KINDS = {"workflow": WORKFLOW, "agent": AGENT, "tool": TOOL}
SESSION_ID, THREAD_ID = "traceloop.association.properties.session_id", "traceloop.association.properties.thread_id"
MODEL_NAME_KEY = "traceloop.association.properties.ls_model_name"
NODE_KEY = LANGGRAPH_TASK_KEYS[0]
ENTITY_NAME, ENTITY_INPUT, ENTITY_OUTPUT = "traceloop.entity.name", "traceloop.entity.input", "traceloop.entity.output"
UNKNOWN_MODEL = "unknown"
"""What OpenLLMetry's LangChain instrumentation writes as the model when it found none."""


def detect(record: SpanRecord) -> bool:
    attrs = record.attributes
    return "traceloop.span.kind" in attrs or "traceloop.entity.name" in attrs or "traceloop.workflow.name" in attrs


def kind(record: SpanRecord) -> str | None:
    span_kind = record.attributes.get("traceloop.span.kind")
    return None if span_kind is None else SPAN_KINDS.get(str(span_kind), OTHER)


def extract(record: SpanRecord, op: Operation) -> None:
    attrs = record.attributes
    # ``fill`` of each field, spelled out: this runs on every span of these instrumentations
    if NODE_KEY in attrs or "metadata" in attrs:  # else ``langgraph_task`` finds nothing
        node, namespace = langgraph_task(attrs)
        if node and op.graph_node is None:
            op.graph_node = node
        if namespace and op.graph_namespace is None:
            op.graph_namespace = namespace
    if op.conversation_id is None:
        thread = attrs.get(THREAD_ID) if SESSION_ID not in attrs else None
        if type(thread) is str and thread and thread != NOT_SPECIFIED:  # ``first_str`` of the usual keys
            op.conversation_id = thread
        else:
            op.conversation_id = first_str(attrs, SESSION_ID, THREAD_ID) or None
    # The entity payloads, parsed whatever the kind where present: a malformed one is an issue on any span
    issues = op.issues
    raw_input = raw_output = _ABSENT  # as recorded (``json.dumps`` of the value), where ``present`` (inlined)
    if (value := attrs.get(ENTITY_INPUT)) is not None and value != "" and value != NOT_SPECIFIED:
        raw_input = parse_json_value(value, ENTITY_INPUT, issues)
    if (value := attrs.get(ENTITY_OUTPUT)) is not None and value != "" and value != NOT_SPECIFIED:
        raw_output = parse_json_value(value, ENTITY_OUTPUT, issues)
    kind = op.kind
    if kind == TOOL:
        _extract_tool(attrs, op, raw_input, raw_output)
    elif kind == AGENT:  # ``fill`` of three fields, spelled out
        name = first_str(attrs, ENTITY_NAME)
        # a payload cut short (kept raw, its issue says so) is no task nor answer: the model calls say more
        entity_input = None if raw_input is _ABSENT or is_cut_short(raw_input) else unwrap_tool_payload(raw_input)
        entity_output = None if raw_output is _ABSENT or is_cut_short(raw_output) else unwrap_tool_payload(raw_output)
        if name and op.agent_name is None:
            op.agent_name = name
        task = _state_text(entity_input, "user")
        if task is None and entity_input is not None:
            task = text_of(entity_input) or ""
        if task is not None and not op.input_messages:
            op.input_messages = [Message("user", texts=[task])]
        answer = _state_text(entity_output, "assistant")
        if answer is None and isinstance(entity_output, str) and entity_output:
            answer = entity_output
        if answer and not op.output_messages:
            op.output_messages = [Message("assistant", texts=[answer])]
    elif kind == LLM and (op.model is None or op.model == UNKNOWN_MODEL):
        op.model = first_str(attrs, MODEL_NAME_KEY) or op.model


def _extract_tool(attrs: Any, op: Operation, raw_input: object, raw_output: object) -> None:
    """A tool span: ``fill(op, tool_name=..., tool_arguments=..., tool_result=...)`` spelled out (every
    tool span of these instrumentations). The result: what a LangChain tool's output records (the
    entity output, else ``gen_ai.tool.call.result``: ``_langchain_output``), which takes precedence;
    else the unwrapped entity output."""
    if op.tool_name is None:
        name = attrs.get(ENTITY_NAME)
        op.tool_name = name if type(name) is str and name and name != NOT_SPECIFIED else first_str(attrs, ENTITY_NAME)
    if raw_input is not _ABSENT and (op.tool_arguments is None or op.tool_arguments == []):
        arguments = unwrap_tool_payload(raw_input)
        if arguments is not None and arguments != [] and arguments != "":
            op.tool_arguments = arguments
    if raw_output is not _ABSENT and _langchain_output(op, raw_output):
        return
    value = attrs.get("gen_ai.tool.call.result")
    if present(value) and _langchain_output(op, parse_json_value(value, "gen_ai.tool.call.result", [])):
        return
    if raw_output is not _ABSENT:
        result = unwrap_tool_payload(raw_output)
        if not _empty(result) and _empty_field(op.tool_result):
            op.tool_result = result


def _empty(value: object) -> bool:
    """What ``fill`` never sets."""
    return value is None or value == [] or value == ""


def _empty_field(value: object) -> bool:
    """What ``fill`` overwrites."""
    return value is None or value == []


_OUTPUT_WRAPPER = frozenset(("output", "kwargs"))


def _langchain_output(op: Operation, output: Any) -> bool:
    """What a LangChain tool's output (``{"output": <ToolMessage or Command>, "kwargs"}``, parsed) records:
    the result, the call id, a failure, a handoff (``langgraph.langchain_tool_output``; see the module
    doc); False when the output is none of those."""
    if isinstance(output, dict) and output.keys() <= _OUTPUT_WRAPPER:
        output = output.get("output")
    message = tool_message(output)
    if message is None and parent_command(output) is None:
        return False
    op.tool_result = langchain_tool_output(op, output, message)
    return True


def _state_text(value: object, role: str) -> str | None:
    """The last ``role`` message's text of a LangGraph state (``{"messages": [...]}``), possibly
    still in the chain callback's ``{"outputs": ..., "kwargs"}`` wrapper; None for anything else."""
    if isinstance(value, dict) and "outputs" in value and value.keys() <= _STATE_WRAPPER:
        value = value["outputs"]
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        return langchain_text(value["messages"], role)
    return None


_STATE_WRAPPER = frozenset(("outputs", "kwargs"))
_ABSENT = object()
"""An entity payload that is not there."""


HANDOFF_KIND = "handoff"
"""``traceloop.span.kind`` of an openai-agents handoff span (read as no operation: it executes nothing)."""


class WorkflowSiblings(Rule):
    """OpenLLMetry openai-agents: link the agents it records as siblings under the workflow (module doc)."""

    def regroup(self, assembly: Any, scopes: dict[int, Scope]) -> None:
        roots = sorted(
            (s for s in scopes.values() if s.parent is None and s.agent is not None
             and s.agent.record.attributes.get("traceloop.span.kind") == "agent"),
            key=lambda s: s.root.start_time_unix_nano,
        )
        if len(roots) < 2:
            return
        for scope in roots:  # an agent run as a tool: it started inside the tool span of its name
            start = scope.root.start_time_unix_nano
            for other in roots:
                tool = next((
                    t for t in other.tools if t.tool_name == scope.agent.agent_name  # type: ignore[union-attr]
                    and t.record.start_time_unix_nano <= start <= t.record.end_time_unix_nano
                ), None) if other is not scope and not other.within(scope) else None
                if tool is not None:
                    scope.move_under(other)
                    assembly.started_by[scope.key] = tool.span_id
                    break
        handoffs = sorted(
            (r for r in assembly.records.values() if r.attributes.get("traceloop.span.kind") == HANDOFF_KIND),
            key=lambda r: r.start_time_unix_nano,
        )
        for handoff in handoffs:  # the agent started next took over from the agent that handed off
            source = assembly.nearest(handoff.span_id, AGENT)
            source = scopes.get(source.span_id) if source is not None else None
            named = handoff.attributes.get("gen_ai.handoff.to_agent")
            after = handoff.start_time_unix_nano - CLOCK_SKEW_NS
            target = next((
                s for s in roots
                if s.parent is None and s is not source and s.root.start_time_unix_nano >= after
                and (named is None or s.agent.agent_name == named)  # type: ignore[union-attr]
            ), None) if source is not None else None
            if target is not None and not source.within(target):  # type: ignore[union-attr]
                target.move_under(source)


RULES = (WorkflowSiblings(),)
