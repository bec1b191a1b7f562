"""OpenInference (Arize / Phoenix) flattened attributes.

``openinference.span.kind`` gives the kind; messages are flattened as
``llm.{input,output}_messages.{i}.message.{role, content, name, tool_call_id,
contents.{k}.message_content.{type,text}, tool_calls.{j}.tool_call.{id,
function.name, function.arguments}}``; tool spans keep ``tool.name``, ``tool.id``
and their arguments / result in the generic ``input.value`` / ``output.value``
(which Koog also uses on its tool spans, without the span kind).
LangChain's tracer records LangGraph's run ``metadata`` as JSON: ``langgraph_node`` and
``langgraph_checkpoint_ns`` (a graph run as a node of another graph nests it: ``a:<id>|b:<id>``).
A LangGraph handoff tool's ``output.value`` is the ``Command`` it returned (``langgraph.langchain_tool_output``).
LlamaIndex records no AGENT span: a ``{Workflow}.run_agent_step`` CHAIN span is one turn of the agent its
input event's repr names (``current_agent_name``), read as an agent turn (``AgentTurns`` joins them).
Source: Arize-ai/openinference ``spec/semantic_conventions.md`` (0.1.32).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import Any

from ...records import SpanRecord
from ..rules import TRANSFER_TOOLS, Rule, Scope
from .base import (
    AGENT,
    LLM,
    OTHER,
    STEP,
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
    span_error,
    span_name_subject,
    text_of,
    usage_from,
)
from .cut_json import is_cut_short
from .indexed import indexed_fields
from .langgraph import langchain_text, langchain_tool_output, langgraph_task

MARKERS = ("openinference.span.kind",)
DETECT_KEYS = (*MARKERS, "input.value", "output.value")

SPAN_KINDS = {"LLM": LLM, "TOOL": TOOL, "AGENT": AGENT}
STEP_SPAN_NAMES = ("turn",)
"""CHAIN spans that stand for one agent turn (OpenAI Agents SDK >= 0.14 ``turn`` custom spans)."""
PREPARE_SPAN_SUFFIXES = ("._prepare_chat_with_tools",)
"""LLM spans that only prepare a request (LlamaIndex ``FunctionCallingLLM._prepare_chat_with_tools``,
recorded next to the ``astream_chat``/``achat`` span that holds the response)."""
AGENT_TURN_SUFFIX = ".run_agent_step"
"""LlamaIndex's CHAIN span of one agent turn (one model response), in a workflow that records no AGENT span."""
_CURRENT_AGENT = re.compile(r"current_agent_name='((?:[^'\\]|\\.)*)'")
"""The agent a LlamaIndex ``AgentSetup``/``AgentInput`` event repr (``run_agent_step``'s ``input.value``) is for."""
_PYTHON_REPR = re.compile(r"^[A-Z]\w*\(\w+=.*(\)|\.\.\.)$", re.DOTALL)
"""A Python object's repr (LlamaIndex's ``StopEvent(result=AgentOutput(...``, truncated with ``...``)."""


def detect(record: SpanRecord) -> bool:
    attrs = record.attributes
    return "openinference.span.kind" in attrs or "input.value" in attrs or "output.value" in attrs


def kind(record: SpanRecord) -> str | None:
    span_kind = record.attributes.get("openinference.span.kind")
    if span_kind is None:
        return None
    span_kind = str(span_kind).upper()
    if span_kind == "CHAIN" and record.name in STEP_SPAN_NAMES:
        return STEP
    if span_kind == "CHAIN" and record.name.endswith(AGENT_TURN_SUFFIX) and _turn_agent(record) is not None:
        return AGENT  # one turn of the agent it names (``AgentTurns``)
    if span_kind == "CHAIN" and (record.parent_span_id is None or record.parent_is_remote):
        return WORKFLOW  # the root chain (a compiled LangGraph, a LangChain chain): the run's I/O
    if span_kind == "LLM" and record.name.endswith(PREPARE_SPAN_SUFFIXES):
        return OTHER  # builds a request, calls no model: not a model response
    return SPAN_KINDS.get(span_kind, OTHER)


def extract(record: SpanRecord, op: Operation) -> None:
    attrs = record.attributes
    issues = op.issues
    node, namespace = langgraph_task(attrs)
    # ``fill`` of four fields, spelled out: this runs on every span of this dialect
    if op.conversation_id is None:
        op.conversation_id = first_str(attrs, "session.id")
    if op.error is None:
        op.error = span_error(record) or None
    if node and op.graph_node is None:
        op.graph_node = node
    if namespace and op.graph_namespace is None:
        op.graph_namespace = namespace
    if op.kind == LLM:
        if op.input_known:
            fill(op, input_messages=_flattened(attrs, issues, "input"))
        else:  # the history, repeated on every model call: parsed when assembly needs it
            op.defer_input_messages(lambda found: _flattened(attrs, found, "input"))
        # ``fill`` of four fields, spelled out: every model call of this dialect
        output = _flattened(attrs, issues, "output")
        if output and not op.output_messages:
            op.output_messages = output
        if op.model is None:
            op.model = first_str(attrs, "llm.response.model_name", "llm.model_name", "llm.request.model_name")
        if op.provider is None:
            op.provider = first_str(attrs, "llm.provider", "llm.system")
        if op.usage is None:
            op.usage = usage_from(attrs, ("llm.token_count.prompt",), ("llm.token_count.completion",))
        if op.output_messages is None and present(attrs.get("llm.choices.0.completion.text")):
            op.output_messages = [Message("assistant", texts=[str(attrs["llm.choices.0.completion.text"])])]
        if op.output_messages is None and present(attrs.get("output.value")):
            op.output_messages = _bare_tool_calls(attrs["output.value"], issues)
        _fill_missing_arguments(attrs, op)
    elif op.kind == TOOL:
        _extract_tool(attrs, op)
    elif op.kind == AGENT and record.name.endswith(AGENT_TURN_SUFFIX) and (name := _turn_agent(record)):
        op.agent_name, op.agent_turn = name, True  # its I/O is a Python repr of a workflow event: no text
    elif op.kind in (AGENT, WORKFLOW):
        if op.kind == AGENT:
            fill(
                op,
                agent_name=first_str(attrs, "agent.name", "graph.node.id") or _run_span_agent(op.record.name),
                node_id=first_str(attrs, "graph.node.id"),
                parent_node_id=_handed_over_by(attrs),
            )
        text = _io_text(attrs, "input.value", issues)
        if text:
            fill(op, input_messages=[Message("user", texts=[text])])
        text = _io_text(attrs, "output.value", issues)
        if text:
            fill(op, output_messages=[Message("assistant", texts=[text])])


def _bare_tool_calls(value: Any, issues: list[str]) -> list[Message] | None:
    """A response recorded only as its tool calls, ``output.value`` a JSON list of chat
    ``{id, function: {name, arguments}}`` (CrewAI's event-listener LLM spans, which flatten no
    output message when the model called tools): one assistant message requesting them."""
    text = as_str(value)
    if not text or not text.startswith("[{"):
        return None
    raw = maybe_json(text, "output.value", issues)
    if not isinstance(raw, list):
        return None
    calls = []
    for item in raw:
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict) or not present(function.get("name")):
            return None
        arguments = parse_json_value(function.get("arguments"), "output.value tool_call arguments", issues)
        calls.append(RequestedCall(str(function["name"]), arguments, as_str(item.get("id"))))
    return [Message("assistant", tool_calls=calls)]


_CREWAI_TOOL_NAME = re.compile(r"Tool Name: ([^\n]+)\n")
CREWAI_DELEGATIONS = frozenset((
    "delegate_work_to_coworker", "ask_question_to_coworker", "Delegate work to coworker", "Ask question to coworker",
))
"""CrewAI's tools that run a coworker agent (``allow_delegation``), named in their ``coworker`` argument: the
coworker's spans sit under the tool span, with no AGENT span (``rules.TransferTools`` makes it an agent)."""


def _crewai_tool_name(attrs: Any) -> str | None:
    """The name the model calls a CrewAI tool by (``delegate_work_to_coworker``), which its
    ``tool.name`` (``Delegate work to coworker``) is not: the first line of CrewAI's description."""
    description = attrs.get("tool.description")
    match = _CREWAI_TOOL_NAME.match(description) if isinstance(description, str) else None
    return match.group(1).strip() if match else None


def _unquoted(name: str) -> str:
    """A tool name recorded as its Python repr (``'get_weather'``: CrewAI's event-listener LLM
    spans, for the calls echoed in their input) is the name."""
    return name[1:-1] if len(name) > 2 and name[0] == name[-1] == "'" else name


def _handed_over_by(attrs: Any) -> str | None:
    """The agent this one took over from (``graph.node.parent_id``). CrewAI's instrumentor sets it
    to the agent of the crew's previous task: a sequential crew runs its agents as peers, none
    hands over to the next, so a CrewAI task's agent (``task_id`` set, in both of the
    instrumentor's modes) names none."""
    return None if "task_id" in attrs else first_str(attrs, "graph.node.parent_id")


def _fill_missing_arguments(attrs: Any, op: Operation) -> None:
    """Requested calls whose flattened ``function.arguments`` was left out (the OpenAI Agents
    instrumentor drops an empty ``"{}"``) take them from the raw response in ``output.value``."""
    missing = [call for call in op.requested_calls() if call.arguments is None and call.call_id]
    if not missing or not present(attrs.get("output.value")):
        return
    raw: dict[str, Any] = {}
    _raw_calls(maybe_json(attrs["output.value"], "output.value", []), raw, 0)
    for call in missing:
        if call.call_id in raw:
            call.arguments = parse_json_value(raw[call.call_id], "output.value tool_call arguments", op.issues)


def _raw_calls(value: Any, found: dict[str, Any], depth: int) -> None:
    """Tool calls in a raw provider response: chat ``{id, function: {name, arguments}}`` or
    Responses ``{type: function_call, call_id, name, arguments}``."""
    if depth > 8:
        return
    if isinstance(value, list):
        for item in value:
            _raw_calls(item, found, depth + 1)
    elif isinstance(value, dict):
        function = value.get("function")
        call_id = value.get("call_id") or value.get("id")
        if isinstance(function, dict) and "arguments" in function and present(call_id):
            found.setdefault(str(call_id), function["arguments"])
        elif value.get("type") == "function_call" and "arguments" in value and present(call_id):
            found.setdefault(str(call_id), value["arguments"])
        for key in ("choices", "message", "output", "tool_calls"):
            if isinstance(value.get(key), (list, dict)):
                _raw_calls(value[key], found, depth + 1)


def _extract_tool(attrs: Any, op: Operation) -> None:
    issues = op.issues
    if op.tool_name is None:  # ``fill`` of two fields, spelled out: every tool span of this dialect
        op.tool_name = _crewai_tool_name(attrs) or first_str(attrs, "tool.name")
    if not op.tool_call_ids and present(attrs.get("tool.id")):
        op.tool_call_ids = [str(attrs["tool.id"])]
    if op.tool_name is None and (op.record.name == "handoff" or op.record.name.startswith("handoff to ")):
        # OpenAI Agents handoff: input.value / output.value name the source and target agents;
        # the tool the model called (transfer_to_...) is not recorded.
        op.handoff_to = first_str(attrs, "output.value") or span_name_subject(op.record.name, "handoff to")
        return
    if op.tool_name in CREWAI_DELEGATIONS:
        op.transfer_argument = "coworker"
    if op.tool_arguments is None and present(attrs.get("input.value")):
        op.tool_arguments = _requested_arguments(parse_json_value(attrs["input.value"], "input.value", issues), attrs)
    if op.tool_arguments is None and present(attrs.get("tool.parameters")):
        parameters = parse_json_value(attrs["tool.parameters"], "tool.parameters", issues)
        if not _is_schema(parameters):  # the openai-agents instrumentor puts the JSON schema there
            op.tool_arguments = parameters
    if op.tool_result is None and present(attrs.get("output.value")):
        result = maybe_json(attrs["output.value"], "output.value", issues)
        if isinstance(result, dict) and "response" in result and result.keys() <= _ADK_RESPONSE:
            if present(result.get("id")):  # ADK + OpenInference: {id, name, response}
                fill(op, tool_call_ids=[str(result["id"])])
            result = result["response"]
        op.tool_result = langchain_tool_output(op, _tool_output_content(result))


_ADK_RESPONSE = frozenset(("id", "name", "response"))
"""The keys of an ADK function response (``{id, name, response}``) recorded as a tool's ``output.value``."""
_CALL_ENVELOPE = frozenset(("args", "kwargs", "sanitize_inputs_outputs"))
"""Keys of the call envelope OpenInference records as a tool's ``input.value`` for smolagents
(``{"args": [...], "sanitize_inputs_outputs": ..., "kwargs": {...}}``: ``Tool.__call__``'s bound arguments)."""


def _requested_arguments(value: Any, attrs: Any) -> Any:
    """The arguments the model asked for, out of a framework's call envelope.

    Positional ``args`` (a smolagents CodeAgent's ``final_answer("...")``) are named after the
    tool's parameters (``tool.parameters``: smolagents' ``inputs``, in signature order); when
    they cannot be named the envelope is kept as recorded."""
    if not isinstance(value, dict) or not isinstance(value.get("kwargs"), dict) or not set(value) <= _CALL_ENVELOPE:
        return value
    args = value.get("args") or []
    if not isinstance(args, list):
        return value
    parameters = maybe_json(attrs.get("tool.parameters"), "tool.parameters", [])
    if isinstance(parameters, dict) and _is_schema(parameters):
        parameters = parameters.get("properties")
    kwargs = value["kwargs"]
    if isinstance(parameters, dict) and parameters:
        # what the framework injected besides the model's arguments (LlamaIndex's ``ctx``) is not in the schema
        kwargs = {k: v for k, v in kwargs.items() if k in parameters}
    if not args:
        return kwargs
    names = [n for n in parameters if n not in kwargs] if isinstance(parameters, dict) else []
    if len(names) < len(args):
        return value
    return {**dict(zip(names, args)), **kwargs}


_REACT_ANSWER = re.compile(r"^\s*Thought:(.*?)\nAnswer:(.*)$", re.DOTALL)
"""A ReAct agent's final response (LlamaIndex ``ReActAgent``'s format): ``Thought: ...`` then ``Answer: ...``."""
_TOOL_OUTPUT_KEYS = frozenset(("blocks", "tool_name", "raw_input", "raw_output", "is_error"))


def _tool_output_content(result: Any) -> Any:
    """A LlamaIndex ``ToolOutput`` (``{"blocks": [{"text"}], "tool_name", "raw_input", "raw_output",
    "is_error"}``) as the text the model was sent back (``ToolOutput.content``)."""
    if not isinstance(result, dict) or not isinstance(result.get("blocks"), list) or not set(result) <= _TOOL_OUTPUT_KEYS:
        return result
    texts = [b["text"] for b in result["blocks"] if isinstance(b, dict) and isinstance(b.get("text"), str)]
    return "\n".join(texts) if texts else result.get("raw_output")


def _turn_agent(record: SpanRecord) -> str | None:
    """The agent a LlamaIndex ``run_agent_step`` span runs a turn of (the last ``current_agent_name``
    of its input event's repr), or None."""
    value = record.attributes.get("input.value")
    found = _CURRENT_AGENT.findall(value) if isinstance(value, str) else None
    return found[-1] if found else None


def _run_span_agent(span_name: str) -> str | None:
    """smolagents names an agent's span ``{agent name}.run``: the agent's name."""
    if span_name.endswith(".run") and len(span_name) > 4:
        return span_name[:-4]
    return None


def _is_schema(value: Any) -> bool:
    return isinstance(value, dict) and ("properties" in value or value.get("type") == "object")


def _io_text(attrs: Any, key: str, issues: list[str]) -> str | None:
    """Plain text of an agent's ``input.value``/``output.value``: a string, or an ADK event's parts."""
    value = attrs.get(key)
    if not present(value):
        return None
    found: list[str] = []
    data = parse_json_value(value, key, found)
    if isinstance(data, str):
        if is_cut_short(data):  # its start is no answer nor task: the steps say more, the run counts the cut
            issues.extend(found)
            return None
        return None if _PYTHON_REPR.match(data) else data  # a repr is no text: the steps say more
    if isinstance(data, dict) and isinstance(data.get("messages"), list):  # LangGraph state
        return langchain_text(data["messages"], "user" if key == "input.value" else "assistant")
    if isinstance(data, dict):
        content = data.get("content") if isinstance(data.get("content"), dict) else data.get("new_message")
        if isinstance(content, dict) and isinstance(content.get("parts"), list):
            texts = [p["text"] for p in content["parts"] if isinstance(p, dict) and isinstance(p.get("text"), str)]
            return "".join(texts) or None
        for field in ("output", "final_output", "input", "task", "text"):
            if isinstance(data.get(field), str):
                return data[field]
    return None  # structured I/O of unknown shape: leave it to the steps


def _flattened(attrs: Any, issues: list[str], side: str) -> list[Message] | None:
    """``llm.{side}_messages.*`` as messages; None when there are none."""
    by_index = indexed_fields(attrs, f"llm.{side}_messages.", ".message.")
    if not by_index:
        return None
    return [_message(fields, f"llm.{side}_messages.{i}", issues) for i, fields in sorted(by_index.items())]


_PLAIN_FIELDS = ("role", "content", "name", "tool_call_id")
"""Message fields that are neither content parts nor tool calls: a message with only these has
none (most of the history), and its fields are not scanned for them."""


def _message(fields: dict[str, Any], prefix: str, issues: list[str]) -> Message:
    role = fields.get("role")
    role = role if type(role) is str and role else str(role or "unknown")
    message = Message(role)
    if len(fields) > sum(1 for field in _PLAIN_FIELDS if field in fields):
        contents = indexed_fields(fields, "contents.", ".message_content.")
        calls = indexed_fields(fields, "tool_calls.", ".tool_call.")
    else:
        contents = calls = {}
    texts = [] if fields.get("content") is None else [text_of(fields["content"]) or ""]
    for index in sorted(contents):
        part = contents[index]
        if part.get("type") == "reasoning" and present(part.get("text")):
            message.reasoning.append(str(part["text"]))
        elif part.get("type") in (None, "text") and present(part.get("text")):
            texts.append(str(part["text"]))
    for index in sorted(calls):
        call = calls[index]
        name = call.get("function.name")
        if not present(name):
            issues.append(f"{prefix}.message.tool_calls.{index}: no function name")
            continue
        arguments = parse_json_value(call.get("function.arguments"), f"{prefix} tool_call arguments", issues)
        message.tool_calls.append(RequestedCall(_unquoted(str(name)), arguments, as_str(call.get("id"))))
    if "function_call_name" in fields:  # legacy OpenAI function calling
        arguments = parse_json_value(fields.get("function_call_arguments_json"), f"{prefix} function_call arguments", issues)
        message.tool_calls.append(RequestedCall(str(fields["function_call_name"]), arguments))
    if role == "tool" or present(fields.get("tool_call_id")):
        if texts:
            message.tool_results.append((as_str(fields.get("tool_call_id")), "\n".join(texts)))
    else:
        message.texts.extend(t for t in texts if t)
        react = _REACT_ANSWER.match(message.texts[0]) if role == "assistant" and len(message.texts) == 1 else None
        if react:  # a ReAct agent's last response: its thought, then the answer
            message.reasoning.append(react.group(1).strip())
            message.texts = [react.group(2).strip()]
    return message


class HandoffLinks(Rule):
    """An agent that names the agent it took over from (``graph.node.parent_id``) is that agent's child.

    OpenAI Agents (OpenInference) records a handoff target as a sibling of the source agent
    under the workflow span; the tree alone would make it a root.
    """

    hint = "parent_node_id"

    def link(self, assembly: Any, scopes: dict[int, Scope]) -> None:
        for scope in scopes.values():
            target = scope.agent.parent_node_id if scope.agent else None
            if not target:
                continue
            start = scope.root.start_time_unix_nano
            sources = [
                other for other in scopes.values()
                if other is not scope and other.agent is not None
                and target in (other.agent.node_id, other.agent.agent_name)
                and other.root.start_time_unix_nano <= start
                and not other.within(scope)
            ]
            if sources:
                source = max(sources, key=lambda o: o.root.start_time_unix_nano)
                if source is not scope.parent:
                    scope.move_under(source)


class AgentTurns(Rule):
    """LlamaIndex agents (``AgentWorkflow``, a lone ``FunctionAgent``/``ReActAgent``): one run of each agent
    from its turns.

    LlamaIndex records no AGENT span: the run is one CHAIN tree under ``{Workflow}.run``, one
    ``run_agent_step`` span per model response (read as an agent turn, named by the event it was
    given) and the tool spans beside them, under ``call_tool``. The turns of an agent are one run; a
    tool belongs to the agent whose turn started last before it; the first agent is the run of the
    root span (its span id, times and metadata), each other agent a child of the agent that was
    running when it took over (a handoff), linked to the call that named it.
    """

    hint = "agent_turn"

    def regroup(self, assembly: Any, scopes: dict[int, Scope]) -> None:
        by_workflow: dict[int | None, list[Scope]] = {}
        for scope in sorted(scopes.values(), key=lambda s: s.root.start_time_unix_nano):
            if scope.agent is not None and scope.agent.agent_turn:
                by_workflow.setdefault(scope.root.parent_span_id, []).append(scope)
        for workflow, turns in by_workflow.items():
            self._one_workflow(assembly, scopes, workflow, turns)

    def _one_workflow(self, assembly: Any, scopes: dict[int, Scope], workflow: int | None, turns: list[Scope]) -> None:
        """The agents of one workflow run (``{Workflow}.run``, the turns' parent span)."""
        # Where the workflow's tool spans were placed: the agent around the workflow, else its local root's scope.
        holder = turns[0].parent
        top = assembly.top(turns[0].key).span_id
        if holder is None:
            holder = scopes.get(top)
            if holder is None:
                holder = scopes[top] = Scope(top, None, assembly.records[top])
        # The first agent is the run of the workflow's root span when nothing else is; else its first turn's.
        run = holder if holder.agent is None and holder.key == top == workflow else turns[0]
        runs: dict[str, Scope] = {}
        order: list[tuple[int, Scope]] = []
        handoffs: list[Scope] = []
        for turn in turns:
            name = turn.agent.agent_name  # type: ignore[union-attr]
            if name not in runs:
                if not runs:
                    if run is not turn:
                        run.agent = turn.agent
                        assembly.absorb(run, [turn], scopes)
                        run.reruns.remove(turn.agent)  # type: ignore[arg-type]
                    runs[name] = run  # type: ignore[index]
                else:
                    runs[name] = turn  # type: ignore[index]
                    turn.move_under(order[-1][1])
                    handoffs.append(turn)
            else:
                assembly.absorb(runs[name], [turn], scopes)
            order.append((turn.root.start_time_unix_nano, runs[name]))  # type: ignore[index]
        starts = [start for start, _ in order]
        for tool in self._tools_of(assembly, workflow, holder):  # each to the agent whose turn started last before it
            owner = order[max(bisect_right(starts, tool.record.start_time_unix_nano) - 1, 0)][1]
            if owner is not holder:
                if tool in holder.tools:
                    holder.tools.remove(tool)
                owner.tools.append(tool)
        for owner in runs.values():
            owner.tools.sort(key=lambda op: (op.record.start_time_unix_nano, op.span_id))
        for target in handoffs:
            self._started_by(assembly, target, target.parent)  # type: ignore[arg-type]

    @staticmethod
    def _tools_of(assembly: Any, workflow: int | None, holder: Scope) -> list[Operation]:
        """The workflow's tool calls: in the scope around it, or, when the workflow runs inside another
        agent's tool call, placed in none (a tool inside a tool); a tool inside one of them is its work."""
        if workflow is None or workflow == holder.key:
            return list(holder.tools)
        found = []
        for op in assembly.ops.values():
            if op.kind == TOOL and workflow in assembly.ancestors(op.span_id):
                outer = assembly.nearest(op.span_id, TOOL)
                if outer is None or workflow not in assembly.ancestors(outer.span_id):
                    found.append(op)
        return sorted(found, key=lambda op: (op.record.start_time_unix_nano, op.span_id))

    @staticmethod
    def _started_by(assembly: Any, target: Scope, source: Scope) -> None:
        """The source's tool call that named the target agent (LlamaIndex's ``handoff(to_agent)``)."""
        start = target.root.start_time_unix_nano
        name = target.agent.agent_name if target.agent else None
        for tool in reversed(source.tools):
            arguments = tool.tool_arguments
            if tool.record.start_time_unix_nano <= start and isinstance(arguments, dict) and name in arguments.values():
                assembly.started_by[target.key] = tool.span_id
                return


RULES = (HandoffLinks(), AgentTurns(), TRANSFER_TOOLS)
