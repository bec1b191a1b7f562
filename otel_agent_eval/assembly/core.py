"""The spans of a trace -> AgentTraces of per-turn AgentSteps. A pure function; it knows no framework.

Algorithm (see docs/architecture.md, "Assembly"):

1. Read every span through the dialects whose markers it carries into an ``Operation``
   (agent, llm, tool, step, workflow) or nothing, in one pass (``index.TraceIndex``), which
   also notes the hints that trigger framework rules. A model call's input messages (the
   history, repeated on every call) are parsed only when read: for the task text and in step 5.
2. Scopes: every agent span opens a scope; a span belongs to its nearest agent
   ancestor. GenAI spans with no agent ancestor form one implicit scope per local
   root. A nested agent is its own AgentTrace, linked to the parent's step.
   An agent span with no model or tool call of its own that only wraps other
   agents (OpenInference's ``Agent workflow`` root) is a container, not an agent:
   its agents are reported in its place. Framework rules (``rules.Rule``, owned by the
   dialect modules, run only when the index saw their hint) may add or remove agents
   before scopes are made, re-parent scopes once made, and merge them once the calls are
   placed: LangGraph sub-graphs, turn nodes and handoff tools (``dialects/langgraph.py``),
   OpenAI Agents handoff links and LlamaIndex agent turns (``dialects/openinference.py``),
   OpenLLMetry's sibling agents (``dialects/traceloop.py``), AutoGen's handoff relay
   (``dialects/autogen.py``), and general ones several frameworks list (``rules.py``:
   transfer tools, stacked agent spans, an answer recorded only on the agent span).
3. Steps: an explicit step span (Strands cycle, Vercel ``step N``, OpenAI Agents
   ``turn``) is one step, whatever LLM and tool spans it contains (nearest step
   span wins, so nested cycles work). Every other LLM span is one step, in start
   order. An LLM span nested in another LLM span, or a tool span in a tool span
   of the same name (two stacked instrumentations), is merged into the outer one.
4. Each tool span goes to the LLM turn that requested it: by step span, then
   ancestry, then tool call id, then (name, canonical arguments), then time order
   (turns that started before the tool first, then those within the clock-skew allowance).
   It fills in the requested call; a tool span nobody requested is kept, flagged
   ``requested=False``, unless its turn answered with text and no structured call (tool
   use written as text or code: ReAct, code agents), where it is the turn's requested call;
   a requested call with no tool span stays ``executed=False``.
   A handoff span fulfils the requested call that names its target agent; a nested agent
   run for a step with no tool span around it (a smolagents managed agent) fulfils the
   step's open call of its name, its final output the result.
5. A call still without an id takes it from a later model call's input, where the
   call and its result were echoed back with their id; an executed call whose tool
   span recorded no result (event-only content, a failed tool, a handoff) takes the
   result echoed back to the model the same way; a requested call with no tool span
   that the framework refused to run (the next model call's input echoes an error in
   its place: the AI SDK's ``error-text``) takes that error as its result and error.
   Arguments come from the tool span, unless it only holds a bare value where the
   request has an object.
6. One validation of each run into the public model (``AgentTrace.model_validate``).

Every trace takes this one path: there is no shortcut for a common shape.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from .dialects import RULES
from .dialects.base import (
    AGENT,
    LLM,
    STEP,
    TOOL,
    WORKFLOW,
    Message,
    Operation,
    as_str,
    canonical_json,
    last_user_text,
    maybe_json,
    span_error,
)
from ..metadata import run_metadata
from ..model import AgentStep, AgentTrace, step_texts
from ..records import SpanRecord, as_record, span_id_hex, trace_id_hex
from .index import TraceIndex
from .rules import CLOCK_SKEW_NS, Scope

AGENT_NAME_KEY = "gen_ai.agent.name"
"""Names the agent on any span of its run: what a run whose agent span is missing is named by."""


def _start_order(op: Operation) -> tuple[int, int]:
    """Start time, then span id: ties must not depend on the order spans arrived in."""
    return op.record.start_time_unix_nano, op.record.span_id


def assemble(spans: Iterable[Any]) -> list[AgentTrace]:
    """Group spans (SDK ``ReadableSpan``s or ``SpanRecord``s) into AgentTraces.

    Spans of several traces may be mixed; results are ordered by trace, then start.
    A span whose id the trace already has is ignored, the first kept: an exact copy (a batch
    delivered twice) loses nothing; a different span reusing the id (a broken exporter or
    id generator) is counted in the issues of that trace's runs.
    """
    by_trace: dict[int, dict[int, SpanRecord]] = defaultdict(dict)
    duplicates: dict[int, int] = {}
    for span in spans:
        record = as_record(span)
        records = by_trace[record.trace_id]
        first = records.get(record.span_id)
        if first is not None:
            if first != record:
                duplicates[record.trace_id] = duplicates.get(record.trace_id, 0) + 1
            continue
        records[record.span_id] = record
    traces: list[AgentTrace] = []
    for trace_id, records in by_trace.items():
        runs = TraceAssembly(records).run()
        ignored = duplicates.get(trace_id)
        if ignored:
            for run in runs:
                run.issues.append(f"{ignored} span(s) reusing a span id already in the trace ignored; the first kept")
        traces.extend(runs)
    return traces


class TraceAssembly(TraceIndex):
    """One trace's assembly: the index, the scopes, and what framework rules state about them."""

    def __init__(self, records: dict[int, SpanRecord]) -> None:
        super().__init__(records)
        self._drafts: dict[int, list[_StepDraft]] = {}
        self.nested_runs: set[int] = set()
        """Agents that, with no agent above them, are children of the run around them (a rule says so)."""
        self.started_by: dict[int, int] = {}
        """Scope key of an agent started by a tool call -> that tool's span id (a rule says so)."""

    def run(self) -> list[AgentTrace]:
        if not any(op.kind in (AGENT, LLM, TOOL) for op in self.ops.values()):
            return []
        for rule in RULES:
            if rule.hint in self.hints:
                rule.prepare(self)
        rules = [rule for rule in RULES if rule.hint in self.hints]  # a rule may have added hints
        ordered = sorted(self.ops.values(), key=_start_order)
        scopes: dict[int, Scope] = {}
        for op in ordered:
            if op.kind == AGENT:
                scopes[op.span_id] = Scope(op.span_id, op, op.record)
        for scope in list(scopes.values()):  # ``scope_of`` may add an implicit scope
            parent_agent = self.nearest(scope.key, AGENT)
            if parent_agent is not None:
                scope.move_under(scopes[parent_agent.span_id])
            elif scope.key in self.nested_runs and self.top(scope.key).span_id != scope.key:
                scope.move_under(self.scope_of(scope.agent, scopes))  # the run around it
        for rule in rules:
            rule.link(self, scopes)

        for op in ordered:
            if op.kind not in (LLM, TOOL, STEP):
                continue
            scope = self.scope_of(op, scopes)
            if op.kind == STEP:
                scope.steps.append(op)
            elif op.kind == LLM:
                outer = self.nearest(op.span_id, LLM, stop=scope.key)
                if outer is not None:
                    _merge(outer, op)
                    continue
                scope.llms.append(op)
            else:
                outer = self.nearest(op.span_id, TOOL, stop=scope.key)
                if outer is not None:  # a tool inside a tool is part of the outer tool's work
                    if outer.tool_name in (None, op.tool_name):
                        _merge(outer, op)
                    continue
                scope.tools.append(op)
        for rule in rules:
            rule.regroup(self, scopes)
        self._drop_containers(scopes)

        built: dict[int, AgentTrace] = {}
        roots = [s for s in scopes.values() if s.parent is None]
        for scope in sorted(scopes.values(), key=lambda s: s.root.start_time_unix_nano):
            built[scope.key] = self._build(scope)
        for scope in scopes.values():
            if scope.parent is not None:
                child = built[scope.key]
                child.parent_step_index = self._delegating_step(scope, scope.parent)
                built[scope.parent.key].children.append(child)
                if child.parent_step_index is not None:
                    _fulfil_by_agent(built[scope.parent.key].steps[child.parent_step_index], child)
        return [built[s.key] for s in sorted(roots, key=lambda s: s.root.start_time_unix_nano)
                if built[s.key].steps or built[s.key].children or s.agent is not None]

    @staticmethod
    def absorb(scope: Scope, reruns: list[Scope], scopes: dict[int, Scope]) -> None:
        """Merge later runs of the same agent into ``scope``: their calls, steps and nested agents."""
        for rerun in reruns:
            scope.llms += rerun.llms
            scope.tools += rerun.tools
            scope.steps += rerun.steps
            if rerun.agent is not None:
                scope.reruns.append(rerun.agent)
            for child in rerun.children:
                child.parent = scope
                scope.children.append(child)
            del scopes[rerun.key]
        scope.llms.sort(key=_start_order)
        scope.tools.sort(key=_start_order)
        scope.steps.sort(key=_start_order)
        if scope.parent is not None:
            gone = {id(rerun) for rerun in reruns}
            scope.parent.children = [c for c in scope.parent.children if id(c) not in gone]

    def _drop_containers(self, scopes: dict[int, Scope]) -> None:
        """Remove agent scopes that only wrap other agents; their agents take their place."""
        for key, scope in list(scopes.items()):
            if scope.llms or scope.tools or scope.steps or not scope.children:
                continue
            for child in scope.children:
                child.parent = scope.parent
                if scope.parent is not None:
                    scope.parent.children.append(child)
            if scope.parent is not None:
                scope.parent.children.remove(scope)
            del scopes[key]

    def scope_of(self, op: Operation, scopes: dict[int, Scope]) -> Scope:
        """The scope of an operation: its nearest agent's, else its local root's (made when missing)."""
        agent = self.nearest(op.span_id, AGENT)
        if agent is not None:
            return scopes[agent.span_id]
        root = self.top(op.span_id)
        # A parent that is local but missing (dropped, or still open when the trace was
        # cut at max age) is the real scope: every orphan under it shares one scope,
        # keyed (and later evaluated) by that parent's id.
        parent = root.parent_span_id
        missing = parent if parent is not None and not root.parent_is_remote and parent not in self.records else None
        key = missing if missing is not None else root.span_id
        scope = scopes.get(key)
        if scope is None:
            agent = self.ops.get(root.span_id) if missing is None else None
            scope = scopes[key] = Scope(key, agent if agent is not None and agent.kind == AGENT else None, root)
        return scope

    def _delegating_step(self, child: Scope, parent: Scope) -> int | None:
        """The parent step that handed work to a nested agent: via its tool, else by time."""
        handoff = self.started_by.get(child.key)
        tool = self.ops[handoff] if handoff is not None else self.nearest(child.key, TOOL, stop=parent.key)
        steps = self._drafts[parent.key]
        if tool is not None:
            for index, step in enumerate(steps):
                if tool.span_id in step.tool_span_ids:
                    return index
        names = {child.agent.agent_name, child.agent.node_id} - {None} if child.agent else set()
        for index, step in enumerate(steps):  # a handoff to this agent
            if any(self.ops[i].handoff_to in names for i in step.tool_span_ids if i in self.ops):
                return index
        start = child.root.start_time_unix_nano
        candidates = [i for i, step in enumerate(steps) if step.start <= start + CLOCK_SKEW_NS]
        return candidates[-1] if candidates else None

    def _build(self, scope: Scope) -> AgentTrace:
        drafts = self._drafts_of(scope)
        if not drafts and scope.tools:
            drafts = [_StepDraft(start=scope.tools[0].record.start_time_unix_nano)]
            drafts[0].issues.append("tool spans without any LLM span in this agent; grouped into one step")
        index = _DraftIndex.of(drafts)
        for tool in scope.tools:  # in start order, as ``run`` collected them
            self._owner(tool, drafts, index).attach(tool)
        _backfill_call_ids(drafts)
        self._backfill_results(scope, drafts)
        self._drafts[scope.key] = drafts

        agent = scope.agent
        root = scope.root
        # No agent span: the root workflow span (a LangGraph graph, a chain) states the run's I/O.
        workflow = self.ops.get(root.span_id) if agent is None and scope.key == root.span_id else None
        io = agent or (workflow if workflow is not None and workflow.kind == WORKFLOW else None)
        last = scope.reruns[-1] if scope.reruns else io  # a merged agent's answer is its last run's
        first_llm = drafts[0].llm if drafts and drafts[0].llm else None
        # Read before the steps are made: these may parse a model call's input, whose issues the step reports.
        task = _task_input(io, first_llm)
        content_captured = any(op.has_content for op in scope.llms + scope.tools) or bool(agent and agent.has_content)
        steps = [draft.to_step(i) for i, draft in enumerate(drafts)]  # as dicts: validated below, with the trace

        members = [op.record for op in scope.llms + scope.tools + scope.steps + scope.reruns]
        start = min([root.start_time_unix_nano] + [r.start_time_unix_nano for r in members])
        end = max([root.end_time_unix_nano] + [r.end_time_unix_nano for r in members])
        error = next((run.error for run in [agent, *scope.reruns] if run.error), None) if agent else span_error(root)
        issues = list(agent.issues) if agent else []
        usage = {"input_tokens": 0, "output_tokens": 0}
        for step in steps:
            usage["input_tokens"] += step["usage"]["input_tokens"]
            usage["output_tokens"] += step["usage"]["output_tokens"]
        conversation = (agent.conversation_id if agent else None) or next(
            (op.conversation_id for op in scope.llms if op.conversation_id), None
        )
        # One validation of the whole tree: pydantic-core builds the nested models much faster
        # than one ``__init__`` per step and tool call.
        return AgentTrace.model_validate(dict(
            trace_id=trace_id_hex(root.trace_id),
            agent_span_id=span_id_hex(scope.key),
            agent_name=_agent_name(agent, root, scope),
            conversation_id=conversation,
            input=task,
            final_output=_final_output(last, steps),
            steps=steps,
            status="error" if error else "ok",
            error=error,
            start_time_unix_nano=start,
            end_time_unix_nano=end,
            usage=usage,
            content_captured=content_captured,
            tool_definitions=next(
                (op.tool_definitions for op in ([agent] if agent else []) + scope.llms if op.tool_definitions), None
            ),
            issues=issues,
            partial=scope.key not in self.records,
            metadata=run_metadata(root.resource, agent.record.attributes if agent else None),
        ))

    def _backfill_results(self, scope: Scope, drafts: list[_StepDraft]) -> None:
        """An executed call whose tool span recorded no result takes the result echoed to the model.

        The next model call's input holds the tool result with the call id (event-only
        content, a failed tool whose span has no result, a handoff). Later turns of this
        agent first; then any later model call in the trace (a handoff target's first
        call), there only where the echoed request names the same tool.
        """
        own = {op.span_id for op in scope.llms}
        others: list[Operation] | None = None
        for index, draft in enumerate(drafts):
            for call in draft.calls:
                if not call.executed and call.call_id is not None and index + 1 < len(drafts):
                    _refusal(call, drafts[index + 1])
                if call.result is not None or not call.executed or call.call_id is None:
                    continue
                found = _MISSING
                for later in drafts[index + 1 :]:
                    for llm in later.llms:
                        found = _echoed_result(call, llm.input_messages, strict=False)
                        if found is not _MISSING:
                            break
                    if found is not _MISSING:
                        break
                if found is _MISSING:
                    if others is None:  # inputs are parsed below, only for the model calls after the draft
                        others = sorted(
                            (op for op in self.ops.values() if op.kind == LLM and op.span_id not in own),
                            key=lambda o: o.record.start_time_unix_nano,
                        )
                    for llm in others:
                        if llm.record.start_time_unix_nano + CLOCK_SKEW_NS < draft.start:
                            continue
                        found = _echoed_result(call, llm.input_messages, strict=True)
                        if found is not _MISSING:
                            break
                if found is not _MISSING:
                    call.result = maybe_json(found, "echoed tool result", [])

    def _drafts_of(self, scope: Scope) -> list[_StepDraft]:
        """One draft per explicit step span (with the LLM spans under it), one per other LLM span."""
        by_step: dict[int, list[Operation]] = {step.span_id: [] for step in scope.steps}
        loose: list[Operation] = []
        for llm in scope.llms:  # a step span not of this scope: above a merged run (``absorb``)
            step = self.nearest(llm.span_id, STEP, stop=scope.key)
            (by_step[step.span_id] if step is not None and step.span_id in by_step else loose).append(llm)
        for tool in scope.tools:  # a step span counts when a model or tool call ran in it
            step = self.nearest(tool.span_id, STEP, stop=scope.key)
            if step is not None and step.span_id in by_step and not by_step[step.span_id]:
                by_step[step.span_id].append(tool)
        drafts = [_StepDraft.from_llm(llm) for llm in loose]
        drafts += [
            _StepDraft.from_step(step, [op for op in by_step[step.span_id] if op.kind == LLM])
            for step in scope.steps
            if by_step[step.span_id]
        ]
        return sorted(drafts, key=lambda d: d.start)

    def _owner(self, tool: Operation, drafts: list[_StepDraft], index: _DraftIndex) -> _StepDraft:
        step = self.nearest(tool.span_id, STEP)
        if step is not None and step.span_id in index.by_step:
            return index.by_step[step.span_id]
        llm = self.nearest(tool.span_id, LLM)
        if llm is not None and llm.span_id in index.by_llm:
            return index.by_llm[llm.span_id]
        if tool.tool_call_ids:
            first = index.first_open(tool.tool_call_ids)
            if first is not None:
                return drafts[first]
        # Drafts are in start order: the ones that started before the tool are a prefix. The
        # latest of them with a matching open call wins, else the latest of them (no turn asked
        # for it: a model call whose output was not recorded); a turn that started after the
        # tool, within the clock-skew allowance, only when none started before. With fast turns
        # the next turn, maybe asking for the same call, often starts under CLOCK_SKEW_NS after it.
        # Strictly before: with a coarse clock (JS SDKs round start times to the millisecond) the
        # next turn often starts in the same tick as the tool, the turn that asked for it never.
        start = tool.record.start_time_unix_nano
        before = bisect_left(index.starts, start)
        skewed = bisect_right(index.starts, start + CLOCK_SKEW_NS)
        by = "handoff" if tool.handoff_to else "args"
        for draft in chain(reversed(drafts[:before]), drafts[before:skewed]):
            if draft.open_call(tool, by=by) is not None:
                return draft
        return drafts[(before or skewed or 1) - 1]


@dataclass
class _DraftIndex:
    """Look-ups from a tool span to its draft, so that a long run costs no scan of every draft per tool."""

    by_step: dict[int, _StepDraft]
    """Step span id -> the (first) draft of that step."""
    by_llm: dict[int, _StepDraft]
    """LLM span id -> the (first) draft holding it."""
    by_call_id: dict[str, list[tuple[int, _CallDraft]]]
    """Requested call id -> (draft position, call), in draft order."""
    starts: list[int]
    """Draft start times, ascending like the drafts."""

    @classmethod
    def of(cls, drafts: list[_StepDraft]) -> _DraftIndex:
        index = cls({}, {}, defaultdict(list), [d.start for d in drafts])
        for position, draft in enumerate(drafts):
            if draft.step is not None:
                index.by_step.setdefault(draft.step.span_id, draft)
            for llm in draft.llms:
                index.by_llm.setdefault(llm.span_id, draft)
            for call in draft.calls:
                if call.call_id is not None:
                    index.by_call_id[call.call_id].append((position, call))
        return index

    def first_open(self, call_ids: list[str]) -> int | None:
        """Position of the first draft with a requested call, not yet executed, of one of ``call_ids``."""
        first: int | None = None
        for call_id in call_ids:
            for position, call in self.by_call_id.get(call_id, ()):
                if call.requested and not call.executed:
                    if first is None or position < first:
                        first = position
                    break
        return first


@dataclass
class _StepDraft:
    start: int
    llm: Operation | None = None
    """The model call whose text the step reports (the last successful one)."""
    llms: list[Operation] = field(default_factory=list)
    step: Operation | None = None
    calls: list[_CallDraft] = field(default_factory=list)
    tool_span_ids: list[int] = field(default_factory=list)
    tool_span_hexes: list[str] = field(default_factory=list)
    """``tool_span_ids`` as the step reports them (each formatted once)."""
    calls_in_text: bool = False
    """The model's response has text and requests no structured tool call: tools run for it were
    asked for in that text (ReAct, code agents)."""
    issues: list[str] = field(default_factory=list)
    """Issues met while assembling; ``to_step`` puts the step's and model calls' own issues first
    (read then: a model call's input is parsed when first needed, and its issues come with it)."""

    @classmethod
    def from_llm(cls, llm: Operation) -> _StepDraft:
        return cls.from_step(None, [llm])

    @classmethod
    def from_step(cls, step: Operation | None, llms: list[Operation]) -> _StepDraft:
        """A step from its step span (if any) and the model calls in it, in start order."""
        llms = sorted(llms, key=_start_order) if len(llms) > 1 else list(llms)
        start = step.record.start_time_unix_nano if step else llms[0].record.start_time_unix_nano
        draft = cls(start=start, llms=llms, step=step)
        ok = [llm for llm in llms if llm.error is None]
        draft.llm = (ok or llms or [None])[-1]
        calls = draft.calls
        seen: set[str] = set()
        for llm in llms:
            for message in llm.output_messages or ():  # ``requested_calls()``, without the list
                for call in message.tool_calls:
                    call_id = call.call_id
                    if call_id is not None:
                        if call_id in seen:
                            continue
                        seen.add(call_id)
                    calls.append(_CallDraft(call.name, call.arguments, call_id))
        draft.calls_in_text = not calls and draft.llm is not None and bool(draft.llm.output_text())
        return draft

    def open_call(self, tool: Operation, by: str) -> _CallDraft | None:
        """The requested, not yet executed call this tool span fulfils, if any."""
        for call in self.calls:
            if call.executed or not call.requested:
                continue
            if by == "id" and call.call_id is not None and call.call_id in tool.tool_call_ids:
                return call
            if by == "args" and call.name == tool.tool_name and (
                tool.tool_arguments is None or canonical_json(call.arguments) == canonical_json(tool.tool_arguments)
            ):
                return call
            if by == "name" and call.name == tool.tool_name:
                return call
            if by == "handoff" and tool.handoff_to and _mentions(call.name, tool.handoff_to):
                return call
        if by == "handoff" and tool.handoff_to:  # a renamed handoff tool: the one call still open
            open_calls = [c for c in self.calls if c.requested and not c.executed]
            if len(open_calls) == 1:
                return open_calls[0]
        return None

    def attach(self, tool: Operation) -> None:
        call = (
            (tool.tool_call_ids and self.open_call(tool, "id"))
            or self.open_call(tool, "args")
            or self.open_call(tool, "name")
            or self.open_call(tool, "handoff")
        )
        if call is None:
            # A response that requested no structured call asked for its tools in text or code
            # (ReAct, code agents): the tool spans run under it are its calls, without call ids.
            in_text = self.llm is None or not self.llm.has_content or self.calls_in_text
            call = _CallDraft(name=tool.tool_name or tool.record.name, requested=in_text)
            if not in_text:
                self.issues.append(f"tool span {span_id_hex(tool.span_id)} ({call.name}) was not requested by this turn")
            self.calls.append(call)
        call.executed = True
        call.span_id = span_id_hex(tool.span_id)
        self.tool_span_hexes.append(call.span_id)
        call.start_time_unix_nano = tool.record.start_time_unix_nano
        call.end_time_unix_nano = tool.record.end_time_unix_nano
        if tool.tool_arguments is not None and not (
            # a tool span that recorded only the bare value of a single argument (OpenInference
            # LangChain: input.value "x" for {"query": "x"}): the requested arguments say more
            isinstance(call.arguments, dict) and not isinstance(tool.tool_arguments, (dict, list))
        ):
            call.arguments = tool.tool_arguments
        if call.call_id is None and tool.tool_call_ids:
            call.call_id = tool.tool_call_ids[-1]
        call.result = tool.tool_result
        call.error = tool.error
        self.tool_span_ids.append(tool.span_id)
        self.issues.extend(tool.issues)

    def to_step(self, index: int) -> dict[str, Any]:
        """The ``AgentStep`` fields."""
        llm = self.llm
        thought, output = step_texts(
            llm.output_text() if llm else None, llm.reasoning_text() if llm else None, bool(self.calls)
        )
        span_ids = [span_id_hex(self.step.span_id)] if self.step else []
        span_ids += [span_id_hex(o.span_id) for o in self.llms]
        span_ids += self.tool_span_hexes
        return {
            "index": index,
            "thought": thought,
            "output": output,
            "tool_calls": [call.to_call() for call in self.calls],
            "model": llm.model if llm else None,
            "usage": _total(self.llms),
            "span_ids": span_ids,
            "error": llm.error if llm else None,
            "issues": self.span_issues() + self.issues,
        }

    def span_issues(self) -> list[str]:
        """The step span's issues, then its model calls' (as read so far)."""
        issues = list(self.step.issues) if self.step else []
        if len(self.llms) > 1:
            issues.append(f"{len(self.llms)} model calls in one step; reported the last successful one")
        for llm in self.llms:
            issues.extend(llm.issues)
        return issues


@dataclass(slots=True)
class _CallDraft:
    """A tool call while assembly fills it in; ``to_call`` gives the ``ToolCall`` fields."""

    name: str
    arguments: Any = None
    call_id: str | None = None
    requested: bool = True
    executed: bool = False
    result: Any = None
    error: str | None = None
    span_id: str | None = None
    start_time_unix_nano: int | None = None
    end_time_unix_nano: int | None = None

    def to_call(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "arguments": self.arguments,
            "result": self.result,
            "error": self.error,
            "call_id": self.call_id,
            "span_id": self.span_id,
            "start_time_unix_nano": self.start_time_unix_nano,
            "end_time_unix_nano": self.end_time_unix_nano,
            "requested": self.requested,
            "executed": self.executed,
        }


def _total(llms: list[Operation]) -> dict[str, int]:
    """The ``TokenUsage`` fields of the model calls' summed usage (``sum`` would make an object per addition)."""
    input_tokens = output_tokens = 0
    for llm in llms:
        usage = llm.usage
        if usage is not None:
            input_tokens += usage.input_tokens
            output_tokens += usage.output_tokens
    return {"input_tokens": input_tokens, "output_tokens": output_tokens}


_MERGED_FIELDS = (
    "model", "provider", "input_messages", "output_messages", "usage", "error", "conversation_id",
    "tool_name", "tool_call_ids", "tool_arguments", "tool_result",
)


def _merge(outer: Operation, inner: Operation) -> None:
    """Two stacked instrumentations recorded one call: fill the outer one's gaps from the inner one."""
    for name in _MERGED_FIELDS:
        value = getattr(inner, name)  # always read: a lazily parsed input adds its issues before they are copied
        if value not in (None, []) and getattr(outer, name) in (None, []):
            setattr(outer, name, value)
    outer.issues.extend(inner.issues)


def _backfill_call_ids(drafts: list[_StepDraft]) -> None:
    """Give id-less executed calls the id a later model call's input echoes for them.

    The next model call sees the assistant's tool calls and the tool results with
    their ids; match on (name, arguments), else on the result.
    """
    for index, draft in enumerate(drafts):
        for call in draft.calls:
            if call.call_id is not None or not call.executed:
                continue
            for later in drafts[index + 1 :]:
                call.call_id = _echoed_id(call, later.llm.input_messages if later.llm else None)
                if call.call_id is not None:
                    break


_MISSING = object()


def _echoed_result(call: _CallDraft, messages: list[Message] | None, strict: bool) -> Any:
    """The result a model input echoes for ``call`` (by call id), or ``_MISSING``.

    When the input also echoes the request with that id, its tool name must match;
    ``strict``: the echoed request must be there (ids are only unique per conversation).
    """
    if not messages:
        return _MISSING
    names = {requested.call_id: requested.name for m in messages for requested in m.tool_calls if requested.call_id}
    if call.call_id in names:
        if names[call.call_id] != call.name:
            return _MISSING
    elif strict:
        return _MISSING
    for message in messages:
        for call_id, echoed in message.tool_results:
            if call_id == call.call_id and echoed is not None:
                return echoed
    return _MISSING


def _refusal(call: _CallDraft, after: _StepDraft) -> None:
    """A requested call with no tool span that the framework refused to run (``Message.refused``): the
    error it sent the model in its place, as the next model call's input echoes it, is the call's
    result and error."""
    for llm in after.llms:
        for message in llm.input_messages or ():
            if call.call_id in message.refused:
                for call_id, echoed in message.tool_results:
                    if call_id == call.call_id and echoed is not None:
                        call.result = echoed
                        call.error = echoed if isinstance(echoed, str) else canonical_json(echoed)
                        return


def _fulfil_by_agent(step: AgentStep, child: AgentTrace) -> None:
    """A call the step requested by the name of the agent that ran for it, with no tool span of its
    own (a smolagents managed agent: its AGENT span is the call's execution), is that run."""
    for call in step.tool_calls:
        if call.requested and not call.executed and call.name == child.agent_name:
            call.executed, call.result, call.span_id = True, child.final_output, child.agent_span_id
            call.start_time_unix_nano, call.end_time_unix_nano = child.start_time_unix_nano, child.end_time_unix_nano
            step.span_ids.append(child.agent_span_id)
            return


def _mentions(name: str, agent: str) -> bool:
    """Does a tool name (``transfer_to_booking_agent``) name an agent (``Booking Agent``)?"""

    def norm(text: str) -> str:
        return "".join(ch if ch.isalnum() else "_" for ch in text.lower()).strip("_")

    return bool(norm(agent)) and norm(agent) in norm(name)


def _echoed_id(call: _CallDraft, messages: list[Message] | None) -> str | None:
    args = canonical_json(call.arguments)
    for message in messages or ():
        for requested in message.tool_calls:
            if requested.call_id and requested.name == call.name and canonical_json(requested.arguments) == args:
                return requested.call_id
    if call.result is not None:
        result = canonical_json(call.result)
        for message in messages or ():
            for call_id, echoed in message.tool_results:
                if call_id and canonical_json(echoed) == result:
                    return call_id
    return None


def _agent_name(agent: Operation | None, root: SpanRecord, scope: Scope) -> str:
    if agent is not None and agent.agent_name:
        return agent.agent_name
    for op in scope.llms + scope.tools:
        if op.agent_name:
            return op.agent_name
    if agent is not None:
        return agent.record.name
    if scope.key != root.span_id:
        # The agent span is missing (still open at idle timeout or max age, or dropped) and
        # ``root`` is one of its children: the run's spans may name the agent, a child's
        # span name never does.
        for record in [root] + [op.record for op in scope.llms + scope.tools + scope.steps]:
            name = as_str(record.attributes.get(AGENT_NAME_KEY))
            if name:
                return name
        return "unknown"
    return root.name or "unknown"


def _task_input(agent: Operation | None, first_llm: Operation | None) -> str | None:
    if agent is not None:
        text = last_user_text(agent.input_messages)
        if text:
            return text
    if first_llm is not None:
        return last_user_text(first_llm.input_messages)
    return None


def _final_output(agent: Operation | None, steps: list[dict[str, Any]]) -> str | None:
    if agent is not None:
        text = agent.output_text()
        if text and text.strip():
            return text.strip()
    for step in reversed(steps):
        if step["output"]:
            return step["output"].strip()
    return None
