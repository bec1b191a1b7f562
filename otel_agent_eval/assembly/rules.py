"""What a framework's structural rule sees and may change: scopes, and the ``Rule`` hooks.

A rule is a small object owned by a framework's dialect module (its ``RULES``), run only when
the index saw its hint (``Rule.hint``: an ``Operation`` field set on some span, or "agent"). The
core calls its hooks at three points and knows nothing of what they do:

* ``prepare(assembly)``: before scopes are made; may add or remove operations (a chain span
  that is an agent, an agent span that is only one turn of the run around it);
* ``link(assembly, scopes)``: scopes made and nested by ancestry; may re-parent them;
* ``regroup(assembly, scopes)``: model and tool calls placed in their scopes; may merge scopes.

``assembly`` is the core's ``TraceAssembly``: ``ops``, ``records``, ``ancestors``, ``nearest``,
``top``, ``scope_of``, ``absorb``, ``nested_runs`` and ``started_by``.

General rules, owned by no one framework, are here too; the dialect modules whose frameworks need
them list them in their ``RULES`` (``TRANSFER_TOOLS``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from ..records import SpanRecord  # at run time: a compiled (mypyc) dataclass resolves its field types
from .dialects.base import AGENT, LLM, TOOL, Message, Operation
from .dialects.cut_json import CUT_SHORT

CLOCK_SKEW_NS = 5_000_000
"""Tolerance when ordering spans of one run by their start times (clocks, and coarse JS timestamps)."""


@dataclass(eq=False)
class Scope:
    """One agent run being assembled: its agent span (or local root) and the calls in it."""

    key: int
    """Span id of the agent span, or of the local root for an implicit scope."""
    agent: Operation | None
    root: SpanRecord
    llms: list[Operation] = field(default_factory=list)
    tools: list[Operation] = field(default_factory=list)
    steps: list[Operation] = field(default_factory=list)
    children: list[Scope] = field(default_factory=list)
    parent: Scope | None = None
    reruns: list[Operation] = field(default_factory=list)
    """Later runs of the same agent merged into this one (``TraceAssembly.absorb``)."""

    def recording_losses(self, read: Operation | None) -> tuple[int, int, int]:
        """What the producer's span limits took from the spans read for this run (its calls, steps and merged runs,
        and ``read``: the agent or workflow span its input and output come from): attributes and events dropped,
        JSON values cut short (counted from the issues reading them left: call once they are read)."""
        attributes = events = cut_short = 0
        for op in chain([read] if read is not None else [], self.llms, self.tools, self.steps, self.reruns):
            attributes += op.record.dropped_attributes_count
            events += op.record.dropped_events_count
            for issue in op.issues:
                if CUT_SHORT in issue:
                    cut_short += 1
        return attributes, events, cut_short

    def within(self, ancestor: Scope) -> bool:
        """Is this scope ``ancestor`` or nested in it?"""
        current: Scope | None = self
        seen: set[int] = set()
        while current is not None and current.key not in seen:
            if current is ancestor:
                return True
            seen.add(current.key)
            current = current.parent
        return False

    def move_under(self, parent: Scope | None) -> None:
        """Make this scope a child of ``parent`` (None: a root)."""
        if self.parent is not None:
            self.parent.children.remove(self)
        self.parent = parent
        if parent is not None:
            parent.children.append(self)


class Rule:
    """A framework's structural rule; every hook does nothing unless overridden."""

    hint: str = "agent"
    """What triggers the rule: an ``Operation`` field set on some span, or "agent" (any trace with an agent)."""

    def prepare(self, assembly: Any) -> None:
        """Before scopes: add or remove operations."""

    def link(self, assembly: Any, scopes: dict[int, Scope]) -> None:
        """Scopes made: re-parent them."""

    def regroup(self, assembly: Any, scopes: dict[int, Scope]) -> None:
        """Calls placed: merge or re-link scopes."""


def _start(scope: Scope) -> int:
    return scope.root.start_time_unix_nano


class TransferTools(Rule):
    """A tool that transfers the run to another agent by name makes that agent the caller's child.

    ADK's ``transfer_to_agent`` and a Strands swarm's ``handoff_to_agent`` record the target's agent
    span as a sibling of the caller's (both under the workflow span), and nothing on the target names
    the caller: the tree alone makes it a second root. The dialect marks such a tool with the argument
    that names the target (``Operation.transfer_argument``); the first agent of that name started
    after the tool, a sibling of the caller (or already inside it), is its child, linked to the step
    of that tool call. The name comes from the tool span's arguments, else from the model's request
    of that call (event-only content).

    With no agent span of that name, an agent that ran inside the tool span (CrewAI's ``Delegate work
    to coworker``: the coworker's model and tool spans under the tool span, no AGENT span) is that
    agent's run: its own AgentTrace, keyed by the tool span, not steps of the caller.
    """

    hint = "transfer_argument"

    def regroup(self, assembly: Any, scopes: dict[int, Scope]) -> None:
        queue = sorted(scopes.values(), key=_start)
        while queue:
            source = queue.pop(0)
            for tool in list(source.tools):
                name = _transfer_target(tool, source) if tool.transfer_argument else None
                if name is None:
                    continue
                after = tool.record.start_time_unix_nano - CLOCK_SKEW_NS
                target = min((
                    scope for scope in scopes.values()
                    if scope.agent is not None and scope.agent.agent_name == name
                    and scope.key not in assembly.started_by and _start(scope) >= after
                    and (scope.parent is source.parent or scope.within(source)) and not source.within(scope)
                ), key=_start, default=None)
                if target is None:
                    target = _ran_inside(assembly, tool, source, name, scopes)
                    if target is None:
                        continue
                    queue.append(target)
                if not target.within(source):
                    target.move_under(source)
                assembly.started_by[target.key] = tool.span_id


def _ran_inside(assembly: Any, tool: Operation, source: Scope, name: str, scopes: dict[int, Scope]) -> Scope | None:
    """The run of agent ``name`` inside ``tool``'s span, from the model calls under it; None without any."""
    llms = [llm for llm in source.llms if tool.span_id in assembly.ancestors(llm.span_id)]
    if not llms or tool.span_id in scopes:
        return None
    run = scopes[tool.span_id] = Scope(tool.span_id, Operation(record=tool.record, kind=AGENT, agent_name=name), tool.record)
    run.llms = llms
    source.llms = [llm for llm in source.llms if llm not in llms]
    run.tools = sorted((  # its tool calls: placed in no scope, inside the caller's tool call
        op for op in assembly.ops.values()
        if op.kind == TOOL and op is not tool and assembly.nearest(op.span_id, TOOL) is tool
    ), key=lambda op: (op.record.start_time_unix_nano, op.span_id))
    return run


def _transfer_target(tool: Operation, source: Scope) -> str | None:
    """The agent a transfer tool names: in its span's arguments, else in the request for it."""
    key = tool.transfer_argument
    arguments = tool.tool_arguments
    if not isinstance(arguments, dict):
        arguments = next((
            call.arguments for llm in source.llms for message in llm.output_messages or () for call in message.tool_calls
            if (call.call_id in tool.tool_call_ids if tool.tool_call_ids else call.name == tool.tool_name)
        ), None)
    target = arguments.get(key) if isinstance(arguments, dict) else None
    return target if isinstance(target, str) and target else None


TRANSFER_TOOLS = TransferTools()


class AnswerOnTheAgent(Rule):
    """The last model response of a run, when its span recorded no output, has the answer the agent span
    recorded: a framework that writes a response's text only on the agent span (Semantic Kernel without
    its log records: ``invoke_agent``'s ``gen_ai.output.messages``) still gives that step its text.

    Only a response whose output is unknown (not an empty or tool-calling one), that did not fail, and
    only the answer's text (the agent span states no calls)."""

    def regroup(self, assembly: Any, scopes: dict[int, Scope]) -> None:
        for scope in scopes.values():
            agent = scope.reruns[-1] if scope.reruns else scope.agent
            if agent is None or not agent.output_messages or not scope.llms:
                continue
            last = scope.llms[-1]
            if last.output_messages is None and last.error is None:
                answer = [Message("assistant", texts=list(m.texts)) for m in agent.output_messages
                          if m.role == "assistant" and m.texts]
                last.output_messages = answer or None


ANSWER_ON_THE_AGENT = AnswerOnTheAgent()


class StackedAgents(Rule):
    """An agent span whose only content is an agent span of the same name inside it is that agent, recorded
    twice by two instrumentations (AutoGen's native ``invoke_agent`` around OpenInference's
    ``on_messages_stream`` AGENT span): the outer one is no agent; the inner one, nearer the calls,
    is, with what only the outer one recorded. Without this, a rule that re-parents the inner one (a
    handoff) leaves the outer one an empty agent run."""

    _FIELDS = ("conversation_id", "input_messages", "output_messages", "error", "tool_definitions")

    def prepare(self, assembly: Any) -> None:
        if assembly.kinds.get(AGENT, 0) < 2:
            return  # the common case: one agent span
        pairs = []
        for op in assembly.ops.values():
            if op.kind == AGENT and op.agent_name:
                outer = assembly.nearest(op.span_id, AGENT)
                if outer is not None and outer.agent_name == op.agent_name:
                    pairs.append((outer, op))
        if not pairs:
            return  # the common case: no agent inside one of its name
        owners: dict[int, int] = {}
        for op in assembly.ops.values():
            if op.kind in (LLM, TOOL, AGENT):
                owner = assembly.nearest(op.span_id, AGENT)
                if owner is not None:
                    owners[owner.span_id] = owners.get(owner.span_id, 0) + 1
        stacked = [(outer, inner) for outer, inner in pairs if owners.get(outer.span_id) == 1]
        for outer, inner in stacked:
            for name in self._FIELDS:
                if getattr(inner, name) in (None, []) and getattr(outer, name) not in (None, []):
                    setattr(inner, name, getattr(outer, name))
        assembly.remove(sorted({outer.span_id for outer, _ in stacked}))


STACKED_AGENTS = StackedAgents()
