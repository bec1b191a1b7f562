"""Step drafts: one step per model response, the tool calls placed on it, the results and ids the next
model call echoes for them. What ``core.TraceAssembly`` builds an agent's steps from. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter
from typing import Any

from ..model import (
    REQUESTED_CALL,
    AgentStep,
    AgentTrace,
    assembled_step,
    built_step,
    tool_call_fields,
)
from ..records import span_id_hex
from .dialects.base import (
    Message,
    Operation,
    canonical_json,
    output_text,
    reasoning_text,
)


def start_order(op: Operation) -> tuple[int, int]:
    """Start time, then span id: ties must not depend on the order spans arrived in."""
    return op.record.start_time_unix_nano, op.record.span_id


DRAFT_START = attrgetter("start")
INPUT_TOKENS = attrgetter("input_tokens")
OUTPUT_TOKENS = attrgetter("output_tokens")


def in_start_order(ops: Iterable[Operation]) -> list[Operation]:
    """``sorted(ops, key=start_order)``, by (start, span id) tuples made in a loop and sorted without a key
    function: an ``attrgetter`` of a slotted attribute costs more than the loop's specialised loads, and two sorts
    with one each cost more. Span ids are unique within a trace: the operations themselves are never compared."""
    keyed = [(op.record.start_time_unix_nano, op.span_id, op) for op in ops]
    keyed.sort()
    return [item[2] for item in keyed]


CallDraft = dict[str, Any]
"""A tool call while assembly fills it in: its ``ToolCall`` field dict, made by ``model.tool_call_fields`` with
what the model's request states; ``StepDraft.attach`` sets the rest. The dict becomes the ``ToolCall``'s own
(``model.assembled_trace``): nothing is copied per call."""


class DraftIndex:
    """Look-ups from a tool span to its draft, so that a long run costs no scan of every draft per tool."""

    def __init__(self, drafts: list[StepDraft]) -> None:
        self.drafts = drafts
        self.by_call_id: dict[str, list[tuple[int, CallDraft]]] = {}
        """Requested call id -> (draft position, call), in draft order."""
        self.starts = [d.start for d in drafts]
        """Draft start times, ascending like the drafts."""
        self._by_step: dict[int, StepDraft] | None = None
        self._by_llm: dict[int, StepDraft] | None = None
        by_call_id = self.by_call_id
        for position, draft in enumerate(drafts):
            for call in draft.calls:
                call_id = call["call_id"]
                if call_id is not None:
                    if call_id in by_call_id:
                        by_call_id[call_id].append((position, call))
                    else:
                        by_call_id[call_id] = [(position, call)]

    @property
    def by_step(self) -> dict[int, StepDraft]:
        """Step span id -> the (first) draft of that step (made when a tool span under a step asks)."""
        if self._by_step is None:
            self._by_step = {}
            for draft in self.drafts:
                if draft.step is not None:
                    self._by_step.setdefault(draft.step.span_id, draft)
        return self._by_step

    @property
    def by_llm(self) -> dict[int, StepDraft]:
        """LLM span id -> the (first) draft holding it (made when a tool span under a model call asks)."""
        if self._by_llm is None:
            self._by_llm = {}
            for draft in self.drafts:
                for llm in draft.llms:
                    self._by_llm.setdefault(llm.span_id, draft)
        return self._by_llm

    def first_open(self, call_ids: list[str]) -> tuple[int, CallDraft] | None:
        """The first draft (its position) with a requested call, not yet executed, of one of ``call_ids``, and
        that call (the one a tool span of a single call id fulfils there)."""
        first: tuple[int, CallDraft] | None = None
        for call_id in call_ids:
            for position, call in self.by_call_id.get(call_id, ()):
                if call["requested"] and not call["executed"]:
                    if first is None or position < first[0]:
                        first = position, call
                    break
        return first


class StepDraft:
    """One step while assembly fills it in: its model calls, the calls they requested, the tool spans run."""

    __slots__ = (
        "calls",
        "canonical",
        "calls_in_text",
        "issues",
        "llm",
        "llms",
        "output",
        "input_tokens",
        "output_tokens",
        "reasoning",
        "start",
        "step",
        "text",
        "tool_span_hexes",
    )

    def __init__(self, start: int, llm: Operation | None = None, llms: list[Operation] | None = None,
                 step: Operation | None = None) -> None:
        self.start = start
        self.llm = llm
        """The model call whose text the step reports (the last successful one)."""
        self.llms: list[Operation] = llms if llms is not None else []
        self.step = step
        self.calls: list[CallDraft] = []
        self.tool_span_hexes: list[str] = []
        """The tool spans placed on this step, their span ids as the step reports them (each formatted once)."""
        self.calls_in_text = False
        """The model's response has text and requests no structured tool call: tools run for it were
        asked for in that text (ReAct, code agents)."""
        self.issues: list[str] = []
        """Issues met while assembling; ``to_step`` puts the step's and model calls' own issues first
        (read then: a model call's input is parsed when first needed, and its issues come with it)."""
        self.text: str | None = None
        """``llm``'s output text, read once."""
        self.reasoning: str | None = None
        """``llm``'s reasoning text, read with ``text``."""
        self.output: str | None = None
        self.input_tokens = self.output_tokens = 0
        """The step's output and token counts, as ``to_step`` made the step: what its run sums up and answers."""
        self.canonical: dict[int, tuple[Any, str]] | None = None
        """``id`` of a call -> (its arguments, their ``canonical_json``): see ``canonical_arguments``."""

    @classmethod
    def from_llm(cls, llm: Operation) -> StepDraft:
        """The step of a model call with no step span (the common case): ``from_step(None, [llm])``, written
        out for the one call, its text and reasoning read in the same pass over its messages; ``__init__``
        written out too (calling a class with a Python ``__init__`` is no cheap call in this interpreter), and
        each call's fields made without a call (``tool_call_fields``)."""
        draft = _new_draft(cls)
        draft.start = llm.record.start_time_unix_nano
        draft.llm = llm
        draft.llms = [llm]
        draft.step = draft.text = draft.reasoning = draft.output = draft.canonical = None
        draft.calls = calls = []
        draft.tool_span_hexes = []
        draft.calls_in_text = False
        draft.issues = []
        draft.input_tokens = draft.output_tokens = 0
        messages = llm.output_messages
        if messages:
            texts = []
            reasoning: list[str] = []
            seen: set[str] | None = None
            for message in messages:
                if message.texts:
                    text = "\n".join(message.texts)  # ``output_text``: ``Message.text`` when it has any
                    if text:
                        texts.append(text)
                if message.reasoning:  # ``reasoning_text``
                    reasoning += message.reasoning
                for call in message.tool_calls:  # ``requested_calls()``, without the list
                    call_id = call.call_id
                    if call_id is not None:
                        if seen is None:
                            seen = {call_id}
                        elif call_id in seen:
                            continue
                        else:
                            seen.add(call_id)
                    fields = REQUESTED_CALL.copy()  # a copy and three stores: less than a dict display of ten
                    fields["name"] = call.name
                    fields["arguments"] = call.arguments
                    fields["call_id"] = call_id
                    calls.append(fields)
            if texts:
                draft.text = "\n".join(texts)
                draft.calls_in_text = not calls
            if reasoning:
                draft.reasoning = "\n".join(reasoning)
        return draft

    @classmethod
    def from_step(cls, step: Operation | None, llms: list[Operation]) -> StepDraft:
        """A step from its step span (if any) and the model calls in it, in start order."""
        if len(llms) > 1:
            llms = sorted(llms, key=start_order)
            ok = [llm for llm in llms if llm.error is None]
            llm: Operation | None = (ok or llms)[-1]
        else:
            llms = list(llms)
            llm = llms[0] if llms else None
        start = step.record.start_time_unix_nano if step else llms[0].record.start_time_unix_nano
        draft = cls(start, llm, llms, step)
        calls = draft.calls
        seen: set[str] = set()
        for one in llms:
            for message in one.output_messages or ():  # ``requested_calls()``, without the list
                for call in message.tool_calls:
                    call_id = call.call_id
                    if call_id is not None:
                        if call_id in seen:
                            continue
                        seen.add(call_id)
                    calls.append(tool_call_fields(call.name, call.arguments, call_id))
        if llm is not None:
            draft.text = text = output_text(llm.output_messages)
            draft.calls_in_text = not calls and bool(text)
            draft.reasoning = reasoning_text(llm.output_messages)
        return draft

    def open_call(self, tool: Operation, by: str) -> CallDraft | None:
        """The requested, not yet executed call this tool span fulfils, if any."""
        for call in self.calls:
            if call["executed"] or not call["requested"]:
                continue
            if by == "id" and call["call_id"] is not None and call["call_id"] in tool.tool_call_ids:
                return call
            if by == "args" and call["name"] == tool.tool_name and (
                tool.tool_arguments is None or self.canonical_arguments(call) == tool.canonical_arguments()
            ):
                return call
            if by == "name" and call["name"] == tool.tool_name:
                return call
            if by == "handoff" and tool.handoff_to and mentions(call["name"], tool.handoff_to):
                return call
        if by == "handoff" and tool.handoff_to:  # a renamed handoff tool: the one call still open
            open_calls = [c for c in self.calls if c["requested"] and not c["executed"]]
            if len(open_calls) == 1:
                return open_calls[0]
        return None

    def canonical_arguments(self, call: CallDraft) -> str:
        """``canonical_json`` of a call's arguments, encoded once while they are the same object: each tool
        span without a call id compares its arguments with every open call of its name."""
        cache = self.canonical
        if cache is None:
            cache = self.canonical = {}
        arguments = call["arguments"]
        cached = cache.get(id(call))
        if cached is None or cached[0] is not arguments:
            cached = cache[id(call)] = (arguments, canonical_json(arguments))
        return cached[1]

    def call_for(self, tool: Operation, call: CallDraft | None = None) -> CallDraft:
        """The call a tool span placed on this step fills in (``core.TraceAssembly._build`` fills it): the open
        call it fulfils (``call`` when the caller found it already), else a call of its own, added."""
        call = (
            call
            or (tool.tool_call_ids and self.open_call(tool, "id"))
            or self.open_call(tool, "args")
            or self.open_call(tool, "name")
            or self.open_call(tool, "handoff")
        )
        if call is None:
            # A response that requested no structured call asked for its tools in text or code
            # (ReAct, code agents): the tool spans run under it are its calls, without call ids.
            in_text = self.llm is None or not self.llm.has_content or self.calls_in_text
            call = tool_call_fields(tool.tool_name or tool.record.name, requested=in_text)
            if not in_text:
                self.issues.append(f"tool span {span_id_hex(tool.span_id)} ({call['name']}) was not requested by this turn")
            self.calls.append(call)
        return call

    def to_step(self, index: int) -> AgentStep | dict[str, Any]:
        """The ``AgentStep``, built (``model.built_step``) when the values its draft does not make exact by
        construction are exact (the model's name, error and token counts, the issues: read from spans), else
        ``model.assembled_step`` of its fields (built, or its field dict to be validated with its trace).
        By construction: the index, the texts (joined ``str``s), the span ids (formatted here and in
        ``_build``), the calls' span ids and flags."""
        llm = self.llm
        calls = self.calls
        step = self.step
        llms = self.llms
        if step is None and len(llms) == 1:  # the common case: one model call, no step span
            span_ids = [span_id_hex(llm.span_id), *self.tool_span_hexes]  # type: ignore[union-attr]
            issues = llm.issues + self.issues  # type: ignore[union-attr]
            usage = llm.usage  # type: ignore[union-attr]  # ``total_usage``
            if usage is None:
                input_tokens = output_tokens = 0
            else:
                input_tokens = usage[0]
                output_tokens = usage[1]
        else:
            span_ids = [span_id_hex(step.span_id)] if step else []
            span_ids += [span_id_hex(o.span_id) for o in llms]
            span_ids += self.tool_span_hexes
            issues = self.span_issues() + self.issues
            input_tokens, output_tokens = total_usage(llms)
        if llm is None:
            thought = output = model = error = None
        else:
            # A turn that calls tools thinks (its reasoning, then its text); one that calls none answers.
            text = self.text
            reasoning = self.reasoning
            if not calls:
                thought = reasoning or None
                output = text
            else:
                thought = (f"{reasoning}\n{text}" if text else reasoning) if reasoning else text or None
                output = None
            model = llm.model
            error = llm.error
        self.output, self.input_tokens, self.output_tokens = output, input_tokens, output_tokens
        if (
            (type(model) is str or model is None) and (error is None or type(error) is str)
            and type(input_tokens) is int and type(output_tokens) is int
        ):
            for issue in issues:
                if type(issue) is not str:
                    break
            else:
                built = built_step(index, thought, output, calls, model, input_tokens, output_tokens, span_ids, error,
                                   issues)
                if built is not None:
                    return built
        return assembled_step(index, thought, output, calls, model, input_tokens, output_tokens, span_ids, error, issues)

    def span_issues(self) -> list[str]:
        """The step span's issues, then its model calls' (as read so far)."""
        issues = list(self.step.issues) if self.step else []
        if len(self.llms) > 1:
            issues.append(f"{len(self.llms)} model calls in one step; reported the last successful one")
        for llm in self.llms:
            issues.extend(llm.issues)
        return issues


def total_usage(llms: list[Operation]) -> tuple[int, int]:
    """The model calls' summed (input, output) tokens (``sum`` would make an object per addition)."""
    if len(llms) == 1:
        usage = llms[0].usage
        if usage is not None:
            return usage[0], usage[1]
    input_tokens = output_tokens = 0
    for llm in llms:
        usage = llm.usage
        if usage is not None:
            input_tokens += usage[0]
            output_tokens += usage[1]
    return input_tokens, output_tokens


_new_draft = object.__new__

MERGED_FIELDS = (
    "model", "provider", "input_messages", "output_messages", "usage", "error", "conversation_id",
    "tool_name", "tool_call_ids", "tool_arguments", "tool_result",
)


def merge_stacked(outer: Operation, inner: Operation) -> None:
    """Two stacked instrumentations recorded one call: fill the outer one's gaps from the inner one."""
    for name in MERGED_FIELDS:
        value = getattr(inner, name)  # always read: a lazily parsed input adds its issues before they are copied
        if value not in (None, []) and getattr(outer, name) in (None, []):
            setattr(outer, name, value)
    outer.issues.extend(inner.issues)


MISSING = object()


def echoed_result(call: CallDraft, messages: list[Message] | None, strict: bool) -> Any:
    """The result a model input echoes for ``call`` (by call id), or ``MISSING``.

    When the input also echoes the request with that id, its tool name must match;
    ``strict``: the echoed request must be there (ids are only unique per conversation).
    """
    if not messages:
        return MISSING
    names = {requested.call_id: requested.name for m in messages for requested in m.tool_calls if requested.call_id}
    if call["call_id"] in names:
        if names[call["call_id"]] != call["name"]:
            return MISSING
    elif strict:
        return MISSING
    for message in messages:
        for call_id, echoed in message.tool_results:
            if call_id == call["call_id"] and echoed is not None:
                return echoed
    return MISSING


def refusal(call: CallDraft, after: StepDraft) -> None:
    """A requested call with no tool span that the framework refused to run (``Message.refused``): the
    error it sent the model in its place, as the next model call's input echoes it, is the call's
    result and error."""
    for llm in after.llms:
        for message in llm.input_messages or ():
            if call["call_id"] in message.refused:
                for call_id, echoed in message.tool_results:
                    if call_id == call["call_id"] and echoed is not None:
                        call["result"] = echoed
                        call["error"] = echoed if isinstance(echoed, str) else canonical_json(echoed)
                        return


def fulfil_by_agent(step: AgentStep, child: AgentTrace) -> None:
    """A call the step requested by the name of the agent that ran for it, with no tool span of its
    own (a smolagents managed agent: its AGENT span is the call's execution), is that run."""
    for call in step.tool_calls:
        if call.requested and not call.executed and call.name == child.agent_name:
            call.executed, call.result, call.span_id = True, child.final_output, child.agent_span_id
            call.start_time_unix_nano, call.end_time_unix_nano = child.start_time_unix_nano, child.end_time_unix_nano
            step.span_ids.append(child.agent_span_id)  # type: ignore[arg-type]
            return


def mentions(name: str, agent: str) -> bool:
    """Does a tool name (``transfer_to_booking_agent``) name an agent (``Booking Agent``)?"""

    def norm(text: str) -> str:
        return "".join(ch if ch.isalnum() else "_" for ch in text.lower()).strip("_")

    return bool(norm(agent)) and norm(agent) in norm(name)


def echoed_id(call: CallDraft, messages: list[Message] | None) -> str | None:
    """The id a later model call's input echoes for an id-less executed call: the next model call sees the
    assistant's tool calls and the tool results with their ids; matched on (name, arguments), else on the result."""
    args = canonical_json(call["arguments"])
    for message in messages or ():
        for requested in message.tool_calls:
            if requested.call_id and requested.name == call["name"] and canonical_json(requested.arguments) == args:
                return requested.call_id
    if call["result"] is not None:
        result = canonical_json(call["result"])
        for message in messages or ():
            for call_id, echoed in message.tool_results:
                if call_id and canonical_json(echoed) == result:
                    return call_id
    return None
