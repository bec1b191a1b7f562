"""LangChain / LangGraph, whichever tracer records them (OpenInference, OpenLLMetry): the payload
helpers those dialects share, and LangGraph's structural rules.

Helpers: the text of a LangChain message list (``langchain_text``), the node and checkpoint
namespace a span runs in (``langgraph_task``), a handoff tool's ``Command`` (``parent_command``),
a tool node's output (``langchain_tool_output``).

Rules (``RULES``; see ``assembly/rules.py``), in this order:

* ``SubgraphAgents`` (hint: ``graph_namespace``): a LangGraph graph run as a node of another
  graph (a sub-agent: its inner spans' ``langgraph_checkpoint_ns`` has one more ``|`` level than
  its own) is an agent, whatever its span kind; with no agent above it, it is a child of the run
  of the graph around it (that local root's scope; a container when it has no model or tool call
  of its own). An agent span with nothing under it, beside such a sub-agent and of its name, is
  dropped (OpenLLMetry's wrapper of the sub-graph's ``stream``, ended before the graph ran).
* ``TurnNodes`` (any trace with an agent): an agent-kind span that is only one turn of an
  enclosing run (a graph node: one model call, no tools of its own, its requested calls run
  outside it; LangGraph's ``agent`` node, which OpenInference marks AGENT) is no scope: its model
  call is a step of the run around it.
* ``HandoffTools`` (hint: ``handoff_to``): a sub-agent whose tool hands off (returns
  ``Command(graph=PARENT, goto=node)``: the handoff-tool supervisor) is one agent across its runs
  as that node of that graph run, in order; the agent the tool names, run next in that graph
  run, is its child.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ...records import SpanRecord
from ..rules import CLOCK_SKEW_NS, Rule, Scope
from .base import (
    AGENT,
    LLM,
    TOOL,
    Message,
    Operation,
    RequestedCall,
    as_str,
    parse_json_value,
    present,
    text_of,
    tool_message,
)

DEFAULT_GRAPH_NAME = "LangGraph"
"""The name LangGraph gives a compiled graph (and ``create_react_agent``) when none is passed."""


_LANGCHAIN_ROLES = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant",
                    "AIMessage": "assistant", "HumanMessage": "user", "AIMessageChunk": "assistant",
                    "system": "system", "SystemMessage": "system", "tool": "tool", "ToolMessage": "tool"}


def langchain_text(messages: list[Any], role: str) -> str | None:
    """The text of the last ``role`` message in a LangChain message list (None if it has none).

    Messages come as ``(role, text)`` pairs, ``{"type", "data": {...}}`` (``messages_to_dict``),
    ``dumpd`` constructors (``{"lc": 1, "id": [..., "AIMessage"], "kwargs": {...}}``) or
    OpenAI-style ``{"role", "content"}``.
    """
    for item in messages[::-1]:  # not reversed(): mypyc 2.4 crashes on reversed() of a list[Any]
        if isinstance(item, list) and len(item) == 2 and isinstance(item[0], str):
            kind, content = item
        elif isinstance(item, dict) and isinstance(item.get("data"), dict):
            kind, content = item.get("type"), item["data"].get("content")
        elif isinstance(item, dict) and isinstance(item.get("kwargs"), dict) and isinstance(item.get("id"), list):
            kind, content = (item["id"] or [None])[-1], item["kwargs"].get("content")
        elif isinstance(item, dict) and "role" in item:
            kind, content = item.get("role"), item.get("content")
        else:
            continue
        if _LANGCHAIN_ROLES.get(str(kind)) == role:  # the last one counts, even when it has no text
            return (text_of(content) if content not in (None, "", []) else None) or None
    return None


def langchain_message(item: Any) -> Message | None:
    """A LangChain message as a ``Message`` (its role, text, requested tool calls, a tool's result), else None.

    Given as a ``(role, text)`` pair, or serialized as a ``dumpd`` constructor (``{"lc": 1, "id": [...,
    "AIMessage"], "kwargs": {...}}``), by ``messages_to_dict`` (``{"type", "data": {...}}``) or as the message's own
    fields (``{"type": "ai", "content", "tool_calls"}``: ``model_dump``, what LangSmith's OTel export writes for a
    graph's state).
    """
    if isinstance(item, list) and len(item) == 2 and isinstance(item[0], str):  # a ``(role, text)`` pair
        kind, data = item[0], {"content": item[1]}
    elif not isinstance(item, dict):
        return None
    elif item.get("lc") == 1 and isinstance(item.get("kwargs"), dict) and isinstance(item.get("id"), list):
        kind, data = (item["id"] or [None])[-1], item["kwargs"]
    elif isinstance(item.get("data"), dict) and "type" in item:
        kind, data = item["type"], item["data"]
    elif "type" in item and "content" in item:
        kind, data = item["type"], item
    else:
        return None
    role = _LANGCHAIN_ROLES.get(str(kind))
    if role is None:
        return None
    content = data.get("content")
    if role == "tool":
        return Message("tool", tool_results=[(as_str(data.get("tool_call_id")), content)])
    text = text_of(content) if content not in (None, "", []) else None
    calls = [RequestedCall(str(call["name"]), call.get("args"), as_str(call.get("id")))
             for call in data.get("tool_calls") or () if isinstance(call, dict) and present(call.get("name"))]
    return Message(role, texts=[text] if text else [], tool_calls=calls)


def langchain_messages(data: Any) -> list[Message] | None:
    """The messages of a LangChain payload, else None (unless every item is a LangChain message: no half reading).

    A chat model run's input ``{"messages": [[...]]}`` (a list per prompt of the batch: the first), a graph's
    state ``{"messages": [...]}``, a bare list, or a model's ``LLMResult`` ``{"generations": [[{"text",
    "message"}]]}`` (the first prompt's generations). LangSmith's OTel export records each run's inputs and
    outputs so.
    """
    if isinstance(data, dict):
        generations = data.get("generations")
        if isinstance(generations, list):
            first = generations[0] if generations and isinstance(generations[0], list) else []
            out = [langchain_message(g.get("message")) or (Message("assistant", texts=[str(g["text"])])
                                                           if present(g.get("text")) else None)
                   for g in first if isinstance(g, dict)]
            messages = [m for m in out if m is not None]
            return messages or None
        data = data.get("messages")
    if isinstance(data, list) and data and isinstance(data[0], list) and langchain_message(data[0]) is None:
        data = data[0]  # a batch's first prompt, not a ``(role, text)`` pair
    if not isinstance(data, list) or not data:
        return None
    messages = [langchain_message(item) for item in data]
    return None if None in messages else messages  # type: ignore[return-value]


LANGGRAPH_TASK_KEYS = (
    "traceloop.association.properties.langgraph_node",
    "traceloop.association.properties.langgraph_checkpoint_ns",
)
"""Where OpenLLMetry's LangChain instrumentation puts LangGraph's run metadata (OpenInference:
one ``metadata`` JSON attribute)."""
LANGSMITH_NODE, LANGSMITH_NAMESPACE = "langsmith.metadata.langgraph_node", "langsmith.metadata.langgraph_checkpoint_ns"
"""Where LangSmith's OTel export puts it. Its namespace is the outermost node task's (a metadata key inherited from
the parent run: ``research:<id>`` inside the ``research`` sub-graph's ``agent`` node, where the other tracers
record ``research:<id>|agent:<id>``): a span whose node is not the one its namespace names is given the level."""


def langgraph_task(attrs: Any) -> tuple[str | None, str | None]:
    """The LangGraph node a span runs in and that node task's checkpoint namespace.

    LangChain tracers record LangGraph's run metadata (``langgraph_node``,
    ``langgraph_checkpoint_ns``: a graph run as a node of another graph nests it,
    ``a:<id>|b:<id>``): OpenInference as a ``metadata`` JSON attribute, OpenLLMetry as
    ``traceloop.association.properties.*``. Read for any span, a chain too.
    """
    node_key, namespace_key = LANGGRAPH_TASK_KEYS
    if node_key in attrs:
        node, namespace = attrs.get(node_key), attrs.get(namespace_key)
    elif LANGSMITH_NODE in attrs:
        node, namespace = attrs.get(LANGSMITH_NODE), attrs.get(LANGSMITH_NAMESPACE)
        if present(node) and present(namespace) and str(namespace).rpartition("|")[2].partition(":")[0] != node:
            namespace = f"{namespace}|{node}"  # inside a sub-graph (LangSmith keeps the outer node task's namespace)
    else:
        metadata = attrs.get("metadata")
        if metadata is None or (isinstance(metadata, str) and "langgraph_node" not in metadata):
            return None, None
        metadata = parse_json_value(metadata, "metadata", [])
        if not isinstance(metadata, dict):
            return None, None
        node, namespace = metadata.get("langgraph_node"), metadata.get("langgraph_checkpoint_ns")
    return (str(node) if present(node) else None), (str(namespace) if present(namespace) else None)


PARENT_GRAPH = "__parent__"
"""``Command.PARENT``, as a serialized ``Command`` names the graph it is sent to."""


def parent_command(value: Any) -> tuple[str, Any] | None:
    """A LangGraph handoff tool's result, ``Command(graph=Command.PARENT, goto=node, update=...)``,
    as ``(target node, the ToolMessage it adds)``, else None.

    The tool's work is the move to another node of the parent graph (``langgraph-supervisor``'s
    ``transfer_to_<agent>``); the ToolMessage in ``update.messages`` (last) answers the model's call.
    """
    if not isinstance(value, dict) or value.get("graph") != PARENT_GRAPH:
        return None
    goto = value.get("goto")
    if isinstance(goto, list):  # several targets (or ``Send``s): the first node named
        goto = next((g if isinstance(g, str) else g.get("node") for g in goto if isinstance(g, (str, dict))), None)
    if not isinstance(goto, str) or not goto:
        return None
    update = value.get("update")
    messages = update.get("messages") if isinstance(update, dict) else None
    last = messages[-1] if isinstance(messages, list) and messages else None
    return goto, (last if tool_message(last) is not None else None)


def langchain_tool_output(op: Operation, result: Any, message: tuple[Any, str | None, bool] | None = None) -> Any:
    """A LangChain tool node's output, read into ``op``; returns the tool's result.

    A handoff ``Command`` (``parent_command``) sets ``op.handoff_to``; the ToolMessage the
    node returned gives the call id (tool spans of LangChain tracers have none of their own)
    and the failure (``status: "error"``); the result is the message's content. ``message``:
    ``tool_message(result)``, when the caller has it already.
    """
    handoff = parent_command(result) if isinstance(result, dict) and "graph" in result else None  # else none
    if handoff is not None:
        op.handoff_to, result = handoff
        message = tool_message(result)
    elif message is None:
        message = tool_message(result)
    if message is not None:
        result, call_id, failed = message
        if call_id and not op.tool_call_ids:  # ``fill``, spelled out: every tool span of LangChain tracers
            op.tool_call_ids = [call_id]
        if failed and op.error is None:
            op.error = text_of(result) or "error"
    return result


def graph_namespace(record: SpanRecord) -> str | None:
    """The checkpoint namespace of the LangGraph node task a span runs in (``langgraph_task``)."""
    return langgraph_task(record.attributes)[1]


def name_subgraph_agent(op: Operation) -> Operation:
    """A LangGraph graph run as a node of another graph (a chain span, read again as an agent by every
    dialect it carries: ``TraceIndex.read_as``): its name is the compiled graph's
    (``create_react_agent(name=...)``), else the node it runs as."""
    if op.agent_name is None:
        name = op.record.name
        op.agent_name = name if name and name != DEFAULT_GRAPH_NAME else op.graph_node
    return op


class SubgraphAgents(Rule):
    """Graphs run as a node of another graph are agents (module doc)."""

    hint = "graph_namespace"

    def prepare(self, assembly: Any) -> None:
        """Chain spans where the checkpoint namespace loses a level become agent operations.

        A node task's checkpoint namespace has one ``node:task_id`` segment per graph level
        (``research:<id>|agent:<id>`` inside the ``research`` subgraph). Walking up from a model
        or tool call, the span where the namespace loses a level, while still inside a node of
        an outer graph, is the run of a nested graph. A chain inside a plain node keeps its
        node's namespace, and the top graph's span has none: neither is taken.
        """
        ops = assembly.ops
        namespaces: dict[int, str | None] = {}

        def namespace(span_id: int) -> str | None:
            if span_id not in namespaces:
                op = ops.get(span_id)
                namespaces[span_id] = op.graph_namespace if op is not None else graph_namespace(assembly.records[span_id])
            return namespaces[span_id]

        found: set[int] = set()
        for op in list(ops.values()):
            inner = op.graph_namespace
            if op.kind not in (LLM, TOOL) or inner is None or "|" not in inner:
                continue
            for ancestor in assembly.ancestors(op.span_id):
                outer = namespace(ancestor)
                if outer is None:
                    break
                if outer.count("|") < inner.count("|"):
                    found.add(ancestor)
                inner = outer
        promoted = [span_id for span_id in found if span_id not in ops]
        for span_id in promoted:
            assembly.add(name_subgraph_agent(assembly.read_as(assembly.records[span_id], AGENT)))
        if promoted:
            self._drop_empty_twins(assembly, promoted)
        assembly.nested_runs.update(span_id for span_id in found if ops[span_id].kind == AGENT)

    @staticmethod
    def _drop_empty_twins(assembly: Any, promoted: list[int]) -> None:
        """Remove agent spans with nothing under them that name a promoted sub-graph agent beside them.

        OpenLLMetry wraps a sub-graph's ``stream`` in an ``invoke_agent <graph>`` span that ends
        before the graph runs, a sibling of the graph's chain span: that chain span is the agent.
        """
        ops = assembly.ops
        twins = {(assembly.records[i].parent_span_id, ops[i].agent_name) for i in promoted}
        holders = {ancestor for span_id in ops for ancestor in assembly.ancestors(span_id)}
        assembly.remove([
            span_id for span_id, op in ops.items()
            if op.kind == AGENT and span_id not in holders and span_id not in promoted
            and (op.record.parent_span_id, op.agent_name) in twins
        ])


class TurnNodes(Rule):
    """Agent-kind spans that are one turn of an enclosing run are no scope (module doc)."""

    def prepare(self, assembly: Any) -> None:
        """Remove them; their model call becomes a step of the run around them.

        Graph frameworks run the model in a node that executes once per turn, and the
        tools in another node (LangGraph's ``agent`` / ``tools`` nodes; OpenInference
        marks any chain whose name says "agent" as AGENT). Such a span holds one model
        call at most, no tool span and no nested agent, and either is a graph node (its
        model call runs in that same node), or its model's requested calls ran outside
        it, in the enclosing run; same-named siblings of such a node are turns too.
        A real nested agent (agent-as-tool, handoff target) runs its own tools or
        answers by itself, and keeps its scope; so does a nested graph (a whole run).
        """
        ops = assembly.ops
        # The common case first: every agent is the parent of a tool span, seen as soon as one tool span of each
        # agent is (the index counts the agents); the walk below only when some agent has none.
        pending = assembly.kinds.get(AGENT, 0)
        seen: set[int] = set()
        for op in ops.values():
            if op.kind == TOOL:
                parent = ops.get(op.record.parent_span_id)  # type: ignore[arg-type]
                if parent is not None and parent.kind == AGENT and parent.span_id not in seen:
                    seen.add(parent.span_id)
                    if len(seen) == pending:
                        return
        agents: list[Operation] = []
        with_tools: set[int | None] = set()  # parents of tool spans
        for op in ops.values():
            if op.kind == TOOL:
                with_tools.add(op.record.parent_span_id)
            elif op.kind == AGENT:
                agents.append(op)
        if all(agent.span_id in with_tools for agent in agents):
            return  # the common case: every agent runs a tool of its own
        held: dict[int, dict[str, list[Operation]]] = {a.span_id: {LLM: [], TOOL: [], AGENT: []} for a in agents}
        for op in ops.values():
            if op.kind == TOOL or op.kind == AGENT:
                owner = assembly.nearest(op.span_id, AGENT)
                if owner is not None:
                    held[owner.span_id][op.kind].append(op)
        candidates = [  # a turn its framework names the agent of is for that framework's rule (``agent_turn``)
            a for a in agents
            if not held[a.span_id][TOOL] and not held[a.span_id][AGENT] and a.span_id not in assembly.nested_runs
            and not a.agent_turn
        ]
        if not candidates:  # the common case: every agent runs tools; no need to look at the model calls
            return
        for op in ops.values():
            if op.kind == LLM:
                owner = assembly.nearest(op.span_id, AGENT)
                if owner is not None and assembly.nearest(op.span_id, LLM, stop=owner.span_id) is None:
                    held[owner.span_id][LLM].append(op)
        candidates = [a for a in candidates if len(held[a.span_id][LLM]) <= 1]
        turns: set[int] = set()
        for agent in candidates:
            llms = held[agent.span_id][LLM]
            if (agent.graph_node is not None and all(llm.graph_node in (None, agent.graph_node) for llm in llms)) or (
                    llms and self._ran_outside(assembly, agent, llms[0])):
                turns.add(agent.span_id)
        shapes = {(assembly.records[i].name, assembly.records[i].parent_span_id) for i in turns}
        turns.update(a.span_id for a in candidates if (a.record.name, a.record.parent_span_id) in shapes)
        assembly.remove(sorted(turns))

    @staticmethod
    def _ran_outside(assembly: Any, agent: Operation, llm: Operation) -> bool:
        """Did a call ``llm`` requested run in a tool span outside ``agent``, in the run around it?"""
        requested = llm.requested_calls()
        if not requested:
            return False
        owner = assembly.nearest(agent.span_id, AGENT)
        top = assembly.top(agent.span_id).span_id
        for tool in assembly.ops.values():
            if tool.kind != TOOL or agent.span_id in assembly.ancestors(tool.span_id):
                continue
            if tool.record.start_time_unix_nano + CLOCK_SKEW_NS < llm.record.end_time_unix_nano:
                continue
            tool_owner = assembly.nearest(tool.span_id, AGENT)
            if (tool_owner.span_id if tool_owner else None) != (owner.span_id if owner else None):
                continue
            if owner is None and assembly.top(tool.span_id).span_id != top:
                continue
            for call in requested:
                if (call.call_id and call.call_id in tool.tool_call_ids) or (
                    not tool.tool_call_ids and call.name == tool.tool_name
                ):
                    return True
        return False


class HandoffTools(Rule):
    """LangGraph sub-agents that hand off with a tool (``Command(graph=PARENT, goto=node)``; module doc)."""

    hint = "handoff_to"

    def regroup(self, assembly: Any, scopes: dict[int, Scope]) -> None:
        """Merge a handing-off sub-agent's runs under one graph run; link the agents it hands to.

        The handoff-tool supervisor (``langgraph-supervisor``) is a sub-agent that runs again
        each time a worker hands back: its runs under one graph run are one agent, in order.
        The agent a handoff tool names, started next under the same graph run after the tool,
        is a child of the agent that handed off (linked to that tool's step).
        """
        subgraphs = sorted(
            (s for s in scopes.values() if s.key in assembly.nested_runs and s.agent is not None),
            key=lambda s: s.root.start_time_unix_nano,
        )
        groups: dict[tuple[int, str | None, str | None], list[Scope]] = defaultdict(list)
        for scope in subgraphs:
            groups[id(scope.parent), scope.agent.graph_node, scope.agent.agent_name].append(scope)  # type: ignore[union-attr]
        for runs in groups.values():
            if len(runs) > 1 and any(tool.handoff_to for run in runs for tool in run.tools):
                assembly.absorb(runs[0], runs[1:], scopes)
        subgraphs = [s for s in subgraphs if s.key in scopes]
        for scope in subgraphs:
            for tool in scope.tools:
                if not tool.handoff_to:
                    continue
                start = tool.record.start_time_unix_nano - CLOCK_SKEW_NS
                target = next((
                    other for other in subgraphs
                    if other.parent is scope.parent and other.key not in assembly.started_by
                    and tool.handoff_to in (other.agent.graph_node, other.agent.agent_name)  # type: ignore[union-attr]
                    and other.root.start_time_unix_nano >= start and not scope.within(other)
                ), None)
                if target is None:
                    continue
                target.move_under(scope)
                assembly.started_by[target.key] = tool.span_id


RULES = (SubgraphAgents(), TurnNodes(), HandoffTools())
