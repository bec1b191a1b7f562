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
6. Each run into the public model: each step as it is made, once its calls' back-fills are done
   (``StepDraft.to_step``: ``model.built_step``), then the run (``model.assembled_trace``), built
   directly when every value already has its field's exact type (what validation would keep, the same
   fields set), else validated as ``AgentTrace.model_validate`` does it and rejected alike.

Every trace takes this one path: there is no shortcut for a common shape.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable
from itertools import chain
from typing import Any

from ..metadata import run_metadata
from ..model import AgentTrace, assembled_trace
from ..records import SpanRecord, as_record, span_id_hex, trace_id_hex
from .dialects import RULES
from .dialects.base import (
    AGENT,
    LLM,
    STEP,
    TOOL,
    WORKFLOW,
    Operation,
    as_str,
    last_user_text,
    maybe_json,
    span_error,
)
from .index import TraceIndex
from .rules import CLOCK_SKEW_NS, Rule, Scope
from .steps import (
    DRAFT_START,
    INPUT_TOKENS,
    MISSING,
    OUTPUT_TOKENS,
    CallDraft,
    DraftIndex,
    StepDraft,
    echoed_id,
    echoed_result,
    fulfil_by_agent,
    in_start_order,
    merge_stacked,
    refusal,
    start_order,
)

PREPARING = tuple(rule for rule in RULES if type(rule).prepare is not Rule.prepare)
LINKING = tuple(rule for rule in RULES if type(rule).link is not Rule.link)
REGROUPING = tuple(rule for rule in RULES if type(rule).regroup is not Rule.regroup)
"""The rules with a hook of that kind (the others' does nothing), in ``RULES`` order."""

AGENT_NAME_KEY = "gen_ai.agent.name"
"""Names the agent on any span of its run: what a run whose agent span is missing is named by."""


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
        record = span if type(span) is SpanRecord else as_record(span)  # records, usually: no call
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
        self._drafts: dict[int, list[StepDraft]] = {}
        self.nested_runs: set[int] = set()
        """Agents that, with no agent above them, are children of the run around them (a rule says so)."""
        self.started_by: dict[int, int] = {}
        """Scope key of an agent started by a tool call -> that tool's span id (a rule says so)."""
        self._in_turn: dict[int, bool] = {}
        """Tool span placed by ``run`` -> is it under a step or model call span (``above``, looked up once)."""

    def run(self) -> list[AgentTrace]:
        kinds = self.kinds
        if AGENT not in kinds and LLM not in kinds and TOOL not in kinds:
            return []
        for rule in PREPARING:
            if rule.hint in self.hints:
                rule.prepare(self)
        hints = self.hints  # a rule may have added hints
        links = [rule for rule in LINKING if rule.hint in hints]
        regroups = [rule for rule in REGROUPING if rule.hint in hints]
        ordered = in_start_order(self.ops.values())
        scopes: dict[int, Scope] = {}
        agents = kinds.get(AGENT, 0)  # how many: the scan ends at the last (the first op, usually the only one)
        for op in ordered if agents else ():
            if op.kind == AGENT:
                scopes[op.span_id] = Scope(op.span_id, op, op.record)
                if len(scopes) == agents:
                    break
        for scope in list(scopes.values()):  # ``scope_of`` may add an implicit scope
            parent_agent = self.nearest(scope.key, AGENT)
            if parent_agent is not None:
                scope.move_under(scopes[parent_agent.span_id])
            elif scope.key in self.nested_runs and self.top(scope.key).span_id != scope.key:
                scope.move_under(self.scope_of(scope.agent, scopes))  # type: ignore[arg-type]  # the run around it
        for rule in links:
            rule.link(self, scopes)

        # Where each call hangs: its agent, an enclosing call of its kind. The children of one span share
        # one ``Above``: what it says is looked up once per parent, not once per call, and consecutive
        # siblings (in start order, the common case) do not look it up again.
        above_of = self.above
        in_turn = self._in_turn
        last = None
        last_parent = None
        for op in ordered:
            kind = op.kind
            if kind != LLM and kind != TOOL and kind != STEP:
                continue
            parent = op.record.parent_span_id
            if parent is None or parent != last_parent:
                above = above_of(op.span_id)
                # a span of depth 0 (a local root, or in a parent cycle) has a place of its own
                last_parent = parent if above.depth > 0 else None
                if above is not last:
                    last = above
                    above_kinds = above.kinds
                    agent = above_kinds.get(AGENT)
                    scope = scopes[agent[1].span_id] if agent is not None else self.scope_of(op, scopes)
                    into = {LLM: scope.llms, TOOL: scope.tools, STEP: scope.steps}
                    outers = {}
                    for outer_kind in (LLM, TOOL):
                        enclosing = above_kinds.get(outer_kind)
                        if enclosing is not None and not self.stopped(op.span_id, above, enclosing[0], scope.key):
                            outers[outer_kind] = enclosing[1]
                    nested = STEP in above_kinds or LLM in above_kinds
            if outers:  # none, in the common case
                outer = outers.get(kind)
                if outer is not None:
                    # Two instrumentations stacked on one model call; a tool inside a tool is part of the
                    # outer tool's work (merged when it is the same tool).
                    if kind == LLM or outer.tool_name in (None, op.tool_name):
                        merge_stacked(outer, op)
                    continue
            into[kind].append(op)
            if kind == TOOL:
                in_turn[op.span_id] = nested
        for rule in regroups:
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
                    fulfil_by_agent(built[scope.parent.key].steps[child.parent_step_index], child)
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
        scope.llms.sort(key=start_order)
        scope.tools.sort(key=start_order)
        scope.steps.sort(key=start_order)
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
            span_hex = span_id_hex(tool.span_id)
            for index, step in enumerate(steps):
                if span_hex in step.tool_span_hexes:
                    return index
        names = {child.agent.agent_name, child.agent.node_id} - {None} if child.agent else set()
        for index, step in enumerate(steps):  # a handoff to this agent
            if any(self.ops[i].handoff_to in names for i in (int(h, 16) for h in step.tool_span_hexes) if i in self.ops):
                return index
        start = child.root.start_time_unix_nano
        candidates = [i for i, step in enumerate(steps) if step.start <= start + CLOCK_SKEW_NS]
        return candidates[-1] if candidates else None

    def _build(self, scope: Scope) -> AgentTrace:
        drafts = self._drafts_of(scope)
        if not drafts and scope.tools:
            drafts = [StepDraft(start=scope.tools[0].record.start_time_unix_nano)]
            drafts[0].issues.append("tool spans without any LLM span in this agent; grouped into one step")
        index = DraftIndex(drafts)
        by_call_id = index.by_call_id
        in_turn = self._in_turn
        # Each tool span onto its step, filling in the call it fulfils (or one of its own): written out here,
        # once per tool span, rather than a method call each.
        for tool in scope.tools:  # in start order, as ``run`` collected them
            nested = in_turn.get(tool.span_id)
            if nested is None:  # a tool ``run`` did not place (a rule's)
                above = self.above(tool.span_id).kinds
                nested = STEP in above or LLM in above
            call_ids = tool.tool_call_ids
            call = None
            if not nested and len(call_ids) == 1:  # the common case, ``_owner``'s first match inlined
                for position, found in by_call_id.get(call_ids[0], ()):
                    if found["requested"] and not found["executed"]:
                        draft = drafts[position]
                        call = found
                        break
            if call is None:
                draft, call = self._owner(tool, drafts, index, nested)
                call = draft.call_for(tool, call)
            record = tool.record
            call["executed"] = True
            call["span_id"] = span_hex = span_id_hex(tool.span_id)
            draft.tool_span_hexes.append(span_hex)
            call["start_time_unix_nano"] = record.start_time_unix_nano
            call["end_time_unix_nano"] = record.end_time_unix_nano
            arguments = tool.tool_arguments
            if arguments is not None and not (
                # a tool span that recorded only the bare value of a single argument (OpenInference
                # LangChain: input.value "x" for {"query": "x"}): the requested arguments say more
                not isinstance(arguments, (dict, list)) and isinstance(call["arguments"], dict)
            ):
                call["arguments"] = arguments
            if call["call_id"] is None and call_ids:
                call["call_id"] = call_ids[-1]
            call["result"] = tool.tool_result
            call["error"] = tool.error
            if tool.issues:
                draft.issues.extend(tool.issues)
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
        content_captured = any(op.has_content for op in chain(scope.llms, scope.tools)) or bool(agent and agent.has_content)

        # The back-fills and the steps in one pass: a call's back-fills read only later model calls' inputs,
        # so a step is made once every input its model calls' issues may come from has been parsed.
        steps: list[Any] = []
        after = 1
        others: list[Operation] | None = None
        for draft in drafts:
            for call in draft.calls:
                if call["executed"]:
                    if call["call_id"] is None:  # ``backfill_call_ids``
                        for later in drafts[after:]:
                            call["call_id"] = echoed_id(call, later.llm.input_messages if later.llm else None)
                            if call["call_id"] is not None:
                                break
                    if call["result"] is None and call["call_id"] is not None:
                        others = self._backfill_result(scope, drafts, after, call, others)
                elif call["call_id"] is not None and after < len(drafts):
                    refusal(call, drafts[after])
            steps.append(draft.to_step(after - 1))
            after += 1

        start, end = root.start_time_unix_nano, root.end_time_unix_nano
        for member in chain(scope.llms, scope.tools, scope.steps, scope.reruns):  # a loop: no attrgetter per span
            record = member.record
            if record.start_time_unix_nano < start:
                start = record.start_time_unix_nano
            if record.end_time_unix_nano > end:
                end = record.end_time_unix_nano
        error = next((run.error for run in [agent, *scope.reruns] if run.error), None) if agent else span_error(root)
        issues = list(agent.issues) if agent else []
        usage = {"input_tokens": sum(map(INPUT_TOKENS, drafts)), "output_tokens": sum(map(OUTPUT_TOKENS, drafts))}
        lost = scope.recording_losses(io)
        conversation = (agent.conversation_id if agent else None) or next(
            (op.conversation_id for op in scope.llms if op.conversation_id), None
        )
        return assembled_trace(
            trace_id=trace_id_hex(root.trace_id),
            agent_span_id=span_id_hex(scope.key),
            agent_name=_agent_name(agent, root, scope),
            conversation_id=conversation,
            input=task,
            final_output=_final_output(last, drafts),
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
            attributes_dropped=lost[0], events_dropped=lost[1], values_cut_short=lost[2],
        )

    def _backfill_result(
        self, scope: Scope, drafts: list[StepDraft], after: int, call: CallDraft, others: list[Operation] | None
    ) -> list[Operation] | None:
        """An executed call whose tool span recorded no result takes the result echoed to the model.

        The next model call's input holds the tool result with the call id (event-only
        content, a failed tool whose span has no result, a handoff). Later turns of this
        agent (``drafts[after:]``) first; then any later model call in the trace (a handoff
        target's first call), there only where the echoed request names the same tool.
        ``others``: those model calls, once listed (returned, for the next call of the run).
        """
        found = MISSING
        for later in drafts[after:]:
            for llm in later.llms:
                found = echoed_result(call, llm.input_messages, strict=False)
                if found is not MISSING:
                    break
            if found is not MISSING:
                break
        if found is MISSING:
            if others is None:  # inputs are parsed below, only for the model calls after the draft
                own = {op.span_id for op in scope.llms}
                others = sorted(
                    (op for op in self.ops.values() if op.kind == LLM and op.span_id not in own),
                    key=lambda o: o.record.start_time_unix_nano,
                )
            start = drafts[after - 1].start
            for llm in others:
                if llm.record.start_time_unix_nano + CLOCK_SKEW_NS < start:
                    continue
                found = echoed_result(call, llm.input_messages, strict=True)
                if found is not MISSING:
                    break
        if found is not MISSING:
            call["result"] = maybe_json(found, "echoed tool result", [])
        return others

    def _drafts_of(self, scope: Scope) -> list[StepDraft]:
        """One draft per explicit step span (with the LLM spans under it), one per other LLM span."""
        if not scope.steps:
            return sorted([StepDraft.from_llm(llm) for llm in scope.llms], key=DRAFT_START)
        by_step: dict[int, list[Operation]] = {step.span_id: [] for step in scope.steps}
        loose: list[Operation] = []
        for llm in scope.llms:  # a step span not of this scope: above a merged run (``absorb``)
            step = self.nearest(llm.span_id, STEP, stop=scope.key)
            (by_step[step.span_id] if step is not None and step.span_id in by_step else loose).append(llm)
        for tool in scope.tools:  # a step span counts when a model or tool call ran in it
            step = self.nearest(tool.span_id, STEP, stop=scope.key)
            if step is not None and step.span_id in by_step and not by_step[step.span_id]:
                by_step[step.span_id].append(tool)
        drafts = [StepDraft.from_llm(llm) for llm in loose]
        drafts += [
            StepDraft.from_step(step, [op for op in by_step[step.span_id] if op.kind == LLM])
            for step in scope.steps
            if by_step[step.span_id]
        ]
        return sorted(drafts, key=DRAFT_START)

    def _owner(
        self, tool: Operation, drafts: list[StepDraft], index: DraftIndex, nested: bool
    ) -> tuple[StepDraft, CallDraft | None]:
        """The draft a tool span goes to, and the call it fulfils there when that is known already.
        ``nested``: the tool span is under a step or model call span."""
        if nested:
            above = self.above(tool.span_id).kinds  # placed by ``run``
            step = above.get(STEP)
            if step is not None and step[1].span_id in index.by_step:
                return index.by_step[step[1].span_id], None
            llm = above.get(LLM)
            if llm is not None and llm[1].span_id in index.by_llm:
                return index.by_llm[llm[1].span_id], None
        call_ids = tool.tool_call_ids
        if call_ids:
            first = index.first_open(call_ids)
            if first is not None:
                return drafts[first[0]], first[1] if len(call_ids) == 1 else None
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
            call = draft.open_call(tool, by=by)
            if call is not None:
                return draft, call if by == "args" else None  # ``attach`` asks by arguments before a handoff
        return drafts[(before or skewed or 1) - 1], None


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


def _final_output(agent: Operation | None, drafts: list[StepDraft]) -> str | None:
    """The agent span's answer, else the last step's output."""
    if agent is not None:
        text = agent.output_text()
        if text and text.strip():
            return text.strip()
    for draft in reversed(drafts):
        if draft.output:
            return draft.output.strip()
    return None
