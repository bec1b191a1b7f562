"""The public data model: what assembly produces and what evaluators return.

Pydantic v2 models with a lossless JSON round trip (``model_dump_json`` /
``model_validate_json``), so assembled traces and results can be stored,
replayed and compared. One exception, by choice: a NaN or infinite float inside
a value (a tool argument or result, a detail) is written as ``null``, as standard
JSON has no such numbers and strict readers (``orjson``, ``JSON.parse``) refuse
Python's ``NaN``; scores are always finite (``Evaluator.scored`` clamps them).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Label = Literal["pass", "fail", "skipped", "error"]
LABELS: tuple[str, ...] = ("pass", "fail", "skipped", "error")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TokenUsage(_Model):
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )


class ToolCall(_Model):
    """A tool call requested by an LLM turn and/or executed by a tool span."""

    name: str
    arguments: Any = None
    result: Any = None
    error: str | None = None
    call_id: str | None = None
    span_id: str | None = None
    start_time_unix_nano: int | None = None
    end_time_unix_nano: int | None = None
    requested: bool = True
    """False when a tool span ran that no LLM turn asked for (flagged, kept)."""
    executed: bool = True
    """False when the LLM asked for the call but no tool span was seen."""

    @property
    def failed(self) -> bool:
        return self.error is not None


class AgentStep(_Model):
    """One LLM turn: its text and the tool calls it requested."""

    index: int
    thought: str | None = None
    """Text the model produced alongside tool calls (reasoning, plan)."""
    output: str | None = None
    """Text the model produced when it called no tool."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    model: str | None = None
    usage: TokenUsage = Field(default_factory=TokenUsage)
    span_ids: list[str] = Field(default_factory=list)
    error: str | None = None
    issues: list[str] = Field(default_factory=list)
    """Problems met while reading this step's spans (malformed JSON, ...)."""


class ConversationTurn(_Model):
    """An earlier agent run of the same conversation, as later runs' evaluators see it."""

    trace_id: str
    agent_span_id: str | None = None
    input: str | None = None
    final_output: str | None = None
    start_time_unix_nano: int = 0


LOSS_FIELDS = ("spans_dropped", "attributes_dropped", "events_dropped", "values_cut_short")
"""``AgentTrace``'s counts of what recording lost: spans dropped as the trace was too large, attributes and events
the producer's span limits dropped, JSON values cut short by a value length limit."""


class AgentTrace(_Model):
    """One agent invocation within a trace, split into steps."""

    trace_id: str
    agent_span_id: str | None = None
    agent_name: str = "unknown"
    conversation_id: str | None = None
    input: str | None = None
    final_output: str | None = None
    steps: list[AgentStep] = Field(default_factory=list)
    children: list[AgentTrace] = Field(default_factory=list)
    parent_step_index: int | None = None
    """For a nested agent: the parent's step that delegated to it."""
    status: Literal["ok", "error"] = "ok"
    error: str | None = None
    start_time_unix_nano: int = 0
    end_time_unix_nano: int = 0
    usage: TokenUsage = Field(default_factory=TokenUsage)
    content_captured: bool = True
    """False when the spans carried no message content (capture turned off)."""
    tool_definitions: list[Any] | None = None
    """The tools offered to the model (``gen_ai.tool.definitions``), when recorded."""
    prior_turns: list[ConversationTurn] = Field(default_factory=list)
    """Earlier runs of the same conversation (``gen_ai.conversation.id``), oldest first."""
    partial: bool = False
    """True when ``agent_span_id`` names a span that is not in the trace (dropped, sent to
    another replica by a ring change, still open at max age): the run is what was under it."""
    spans_dropped: int = 0
    """Spans of this trace the buffer dropped as ``trace_too_large`` (over ``max_spans_per_trace``
    or ``max_bytes``): the run is the part that arrived first, its later steps may be missing."""
    attributes_dropped: int = 0
    """Attributes the producers' SDKs dropped from this run's spans at their span limits (OTLP
    ``dropped_attributes_count``; the Python SDK keeps 128 a span, ``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT``,
    and drops the oldest first): flattened message histories lose their start."""
    events_dropped: int = 0
    """Span events dropped the same way (``dropped_events_count``, ``OTEL_SPAN_EVENT_COUNT_LIMIT``)."""
    values_cut_short: int = 0
    """JSON attribute values of this run's spans that were cut short (an attribute value length limit:
    ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``, a Collector's ``truncate_all``), kept raw and not read: what they
    held is missing. Each is an issue of its step (or of the run)."""
    issues: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Where the run came from: resource attributes (``service.name``, ``service.version``,
    ``deployment.environment.name``) plus the agent span's own attributes. For evaluators."""

    @property
    def duration_s(self) -> float:
        return max(0, self.end_time_unix_nano - self.start_time_unix_nano) / 1e9

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [call for step in self.steps for call in step.tool_calls]

    @property
    def cut(self) -> bool:
        """Part of the run is missing: its agent span, spans dropped as too many, or values cut short."""
        return self.partial or self.spans_dropped > 0 or self.values_cut_short > 0

    @property
    def losses(self) -> dict[str, int]:
        """What recording lost of this run, the non-zero counts by field name (``LOSS_FIELDS``, in that order):
        what the evaluation span and the judge's details report."""
        fields = self.__dict__
        return {name: fields[name] for name in LOSS_FIELDS if fields[name]}

    @property
    def has_tool_failure(self) -> bool:
        return any(call.failed for call in self.tool_calls)


# Assembly's tree (``AgentTrace`` -> ``AgentStep`` -> ``ToolCall``, ``TokenUsage``), built without a
# second validation when assembly's values already are what validation would keep.

_USAGE_SET = frozenset(TokenUsage.model_fields)
_EVERY_CALL_FIELD = set(ToolCall.model_fields)
_EVERY_STEP_FIELD = set(AgentStep.model_fields)
_EVERY_USAGE_FIELD = set(_USAGE_SET)
"""The ``model_fields_set`` of every ``ToolCall``, ``AgentStep`` and step ``TokenUsage`` that ``built_step`` makes
(validation sets every field of them): one set per class, shared, where validation makes one per model (~1.3 k
instructions each, 27 per 20-span trace). Pydantic only adds to a model's set (assigning a field), which leaves a
set of every field as it is, and copies it for a copy (``model_copy``, ``copy``, ``deepcopy``). Never mutate them."""
_UNSET_BY_ASSEMBLY = ("children", "parent_step_index", "prior_turns", "spans_dropped")
_ASSEMBLED_SET = frozenset(AgentTrace.model_fields).difference(_UNSET_BY_ASSEMBLY)
"""The fields ``assembled_trace`` states: a validated trace's ``model_fields_set``."""
_OPTIONAL_STR = (str, type(None))
_OPTIONAL_INT = (int, type(None))


class _Unchecked(_Model):
    """Filled with plain stores, then made an ``AgentTrace``, ``AgentStep``, ``ToolCall`` or ``TokenUsage`` by
    ``__class__`` assignment (Python allows it between classes of one base with the same slots): the
    model's own ``__setattr__`` (pydantic's, in Python) is not run, nor validation."""

    __init__ = object.__init__
    __setattr__ = object.__setattr__
    __delattr__ = object.__delattr__  # with ``__setattr__``: plain slot stores


def _built(cls: type[BaseModel], values: dict[str, Any], fields_set: frozenset[str]) -> Any:
    """A model of ``cls`` over ``values`` (its own ``__dict__``: every field, in field order), as validation makes it."""
    model = _Unchecked()
    model.__dict__ = values
    model.__pydantic_fields_set__ = set(fields_set)  # its own: assignment adds to it
    model.__pydantic_extra__ = None
    model.__pydantic_private__ = None
    model.__class__ = cls
    return model


REQUESTED_CALL: dict[str, Any] = {
    "name": None, "arguments": None, "result": None, "error": None, "call_id": None, "span_id": None,
    "start_time_unix_nano": None, "end_time_unix_nano": None, "requested": True, "executed": False,
}
"""A ``ToolCall``'s field dict as requested (not executed, no result yet): every field, in field order
(``model_dump`` writes a model's ``__dict__`` in its order), so that a copy of it becomes the call's own
``__dict__`` as it is. A copy with its values stored keeps that order (``tool_call_fields`` written out, without
a call, where assembly makes one per requested call)."""


def tool_call_fields(name: str, arguments: Any = None, call_id: str | None = None, requested: bool = True) -> dict[str, Any]:
    """A ``ToolCall``'s field dict as requested, for assembly to fill in and ``assembled_trace`` to make the call
    of (``REQUESTED_CALL`` with these values)."""
    return {**REQUESTED_CALL, "name": name, "arguments": arguments, "call_id": call_id, "requested": requested}


def _usage(usage: dict[str, int]) -> TokenUsage:
    return _built(TokenUsage, {"input_tokens": usage["input_tokens"], "output_tokens": usage["output_tokens"]}, _USAGE_SET)


def _str_items(values: Any) -> bool:
    if type(values) is not list:
        return False
    for value in values:
        if type(value) is not str:
            return False
    return True


def _str_keys(mapping: dict[Any, Any]) -> bool:
    for key in mapping:
        if type(key) is not str:
            return False
    return True


def assembled_step(
    index: int, thought: str | None, output: str | None, tool_calls: list[dict[str, Any]], model: str | None,
    input_tokens: int, output_tokens: int, span_ids: list[str], error: str | None, issues: list[str],
) -> AgentStep | dict[str, Any]:
    """One step of ``assembled_trace``: the ``AgentStep`` (its ``ToolCall``s and ``TokenUsage``) built directly
    (``built_step``) when every value already is what validation keeps, as ``assembled_trace`` does it; else the
    step's field dict, for ``assembled_trace`` to validate with its trace (and reject alike). ``tool_calls`` are
    dicts made by ``tool_call_fields``; they, ``span_ids`` and ``issues`` become the models' own."""
    if (
        type(index) is int and type(thought) in _OPTIONAL_STR and type(output) in _OPTIONAL_STR
        and type(model) in _OPTIONAL_STR and type(error) in _OPTIONAL_STR and type(tool_calls) is list
        and type(input_tokens) is int and type(output_tokens) is int and _str_items(span_ids) and _str_items(issues)
    ):
        for call in tool_calls:
            if not (
                type(call["span_id"]) in _OPTIONAL_STR and type(call["requested"]) is bool
                and type(call["executed"]) is bool
            ):
                break
        else:
            step = built_step(index, thought, output, tool_calls, model, input_tokens, output_tokens, span_ids, error,
                              issues)
            if step is not None:
                return step
    return {
        "index": index, "thought": thought, "output": output, "tool_calls": tool_calls, "model": model,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}, "span_ids": span_ids,
        "error": error, "issues": issues,
    }


def built_step(
    index: int, thought: str | None, output: str | None, tool_calls: list[dict[str, Any]], model: str | None,
    input_tokens: int, output_tokens: int, span_ids: list[str], error: str | None, issues: list[str],
) -> AgentStep | None:
    """The ``AgentStep`` of ``assembled_step``, built, or None when a call's name, error, call id or times are not
    of their field's exact type: the caller has checked every other value (``assembled_step`` does; assembly's
    ``StepDraft.to_step`` checks those its drafts do not make exact: the model's name, error and token counts, the
    issues). The one place a step and its calls are built: each model filled by plain stores (see ``_built``)."""
    calls = []
    for call in tool_calls:
        if not (  # each written for its usual value first (an error is usually None, an id or a time set)
            type(call["name"]) is str and (call["error"] is None or type(call["error"]) is str)
            and (type(call["call_id"]) is str or call["call_id"] is None)
            and (type(call["start_time_unix_nano"]) is int or call["start_time_unix_nano"] is None)
            and (type(call["end_time_unix_nano"]) is int or call["end_time_unix_nano"] is None)
        ):
            return None
        built = _Unchecked()
        built.__dict__ = call
        built.__pydantic_fields_set__ = _EVERY_CALL_FIELD
        built.__pydantic_extra__ = None
        built.__pydantic_private__ = None
        built.__class__ = ToolCall
        calls.append(built)
    usage = _Unchecked()
    usage.__dict__ = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    usage.__pydantic_fields_set__ = _EVERY_USAGE_FIELD
    usage.__pydantic_extra__ = None
    usage.__pydantic_private__ = None
    usage.__class__ = TokenUsage
    step = _Unchecked()
    step.__dict__ = {
        "index": index, "thought": thought, "output": output, "tool_calls": calls, "model": model, "usage": usage,
        "span_ids": span_ids, "error": error, "issues": issues,
    }
    step.__pydantic_fields_set__ = _EVERY_STEP_FIELD
    step.__pydantic_extra__ = None
    step.__pydantic_private__ = None
    step.__class__ = AgentStep
    return step  # type: ignore[return-value]


def _built_steps(steps: Any) -> list[AgentStep] | None:
    """``steps`` as ``AgentStep``s (each field dict through ``assembled_step``; a step it made already kept), or
    None when some value is not of its field's exact type."""
    if type(steps) is not list:
        return None
    built = []
    for step in steps:
        if type(step) is not AgentStep:
            usage = step["usage"]
            if type(usage) is not dict:
                return None
            step = assembled_step(
                step["index"], step["thought"], step["output"], step["tool_calls"], step["model"],
                usage["input_tokens"], usage["output_tokens"], step["span_ids"], step["error"], step["issues"],
            )
            if type(step) is not AgentStep:
                return None
        built.append(step)
    return built


def assembled_trace(
    trace_id: str, agent_span_id: str | None, agent_name: str, conversation_id: str | None, input: str | None,
    final_output: str | None, steps: list[Any], status: str, error: str | None, start_time_unix_nano: int,
    end_time_unix_nano: int, usage: dict[str, int], content_captured: bool, tool_definitions: list[Any] | None,
    issues: list[str], partial: bool, metadata: dict[str, Any], attributes_dropped: int, events_dropped: int,
    values_cut_short: int,
) -> AgentTrace:
    """``AgentTrace.model_validate`` of these fields, equal to it (values, ``model_fields_set``, ``__dict__``
    order, dumps), without pydantic's validation when every value already is what validation keeps: exact
    types, a known status, ``str`` metadata keys. Assembly builds one tree per run, and its validation was a
    third of assembly's grouping phase. Anything else is validated as before (and rejected alike).

    ``steps`` are what ``assembled_step`` made (assembly's), or ``AgentStep`` field dicts, their ``usage`` a
    ``TokenUsage`` field dict and their ``tool_calls`` dicts made by ``tool_call_fields``. The call dicts, each
    step's ``span_ids`` and ``issues``, and ``issues`` and ``metadata`` become the models' own: pass values made
    for it.
    """
    if (
        type(trace_id) is str and type(agent_span_id) in _OPTIONAL_STR and type(agent_name) is str
        and type(conversation_id) in _OPTIONAL_STR and type(input) in _OPTIONAL_STR
        and type(final_output) in _OPTIONAL_STR and type(status) is str and (status == "ok" or status == "error")
        and type(error) in _OPTIONAL_STR and type(start_time_unix_nano) is int and type(end_time_unix_nano) is int
        and type(usage) is dict and type(usage["input_tokens"]) is int and type(usage["output_tokens"]) is int
        and type(content_captured) is bool and (tool_definitions is None or type(tool_definitions) is list)
        and _str_items(issues) and type(partial) is bool and type(metadata) is dict and _str_keys(metadata)
        and type(attributes_dropped) is int and type(events_dropped) is int and type(values_cut_short) is int
        and (built := _built_steps(steps)) is not None
    ):
        return _built(AgentTrace, {  # type: ignore[no-any-return]
            "trace_id": trace_id, "agent_span_id": agent_span_id, "agent_name": agent_name,
            "conversation_id": conversation_id, "input": input, "final_output": final_output, "steps": built,
            "children": [], "parent_step_index": None, "status": status, "error": error,
            "start_time_unix_nano": start_time_unix_nano, "end_time_unix_nano": end_time_unix_nano,
            "usage": _usage(usage), "content_captured": content_captured,
            "tool_definitions": None if tool_definitions is None else list(tool_definitions), "prior_turns": [],
            "partial": partial, "spans_dropped": 0, "attributes_dropped": attributes_dropped,
            "events_dropped": events_dropped, "values_cut_short": values_cut_short, "issues": issues,
            "metadata": metadata,
        }, _ASSEMBLED_SET)
    return AgentTrace.model_validate({
        "trace_id": trace_id, "agent_span_id": agent_span_id, "agent_name": agent_name,
        "conversation_id": conversation_id, "input": input, "final_output": final_output, "steps": steps,
        "status": status, "error": error, "start_time_unix_nano": start_time_unix_nano,
        "end_time_unix_nano": end_time_unix_nano, "usage": usage, "content_captured": content_captured,
        "tool_definitions": tool_definitions, "issues": issues, "partial": partial, "metadata": metadata,
        "attributes_dropped": attributes_dropped, "events_dropped": events_dropped, "values_cut_short": values_cut_short,
    })


class EvalResult(_Model):
    """One evaluator's verdict on one agent trace."""

    evaluator: str
    evaluator_version: str = "1"
    score: float | None = Field(default=None, ge=0.0, le=1.0)
    label: Label
    explanation: str = ""
    details: dict[str, Any] = Field(default_factory=dict)
    trace_id: str = ""
    span_id: str | None = None
    """The evaluated span (the agent span, or the local root)."""
    agent_name: str = "unknown"
    result_id: str = ""
    reason: str | None = None
    """Why a result is ``skipped`` or ``error``: a short code from a small fixed set
    (``not_applicable``, ``timeout``, ``judge_unavailable``, ...), a metric label. None
    for pass and fail."""


def result_id(
    trace_id: str, span_id: str | None, evaluator: str, version: str, judge: str = "", partial: bool = False
) -> str:
    """A stable id so that a replay or a re-delivery never double counts.

    Derived from the evaluated trace and span, the evaluator name and version and,
    for judge evaluators, the judge model and prompt version (``judge``). A partial
    run (its agent span missing: the other half of a trace split by a ring change)
    gets an id of its own, so the two halves of one run never share one.
    """
    text = f"{trace_id}\x1f{span_id or ''}\x1f{evaluator}\x1f{version}\x1f{judge}\x1fpartial" if partial else (
        f"{trace_id}\x1f{span_id or ''}\x1f{evaluator}\x1f{version}\x1f{judge}")
    return _sha256(text.encode()).hexdigest()[:32]


_sha256 = hashlib.sha256
_RESULT_FIELDS = frozenset(EvalResult.model_fields)


def new_result(
    evaluator: str, evaluator_version: str, score: float | None, label: Label, explanation: str, details: dict[str, Any],
    trace_id: str, span_id: str | None, agent_name: str, result_id: str, reason: str | None,
) -> EvalResult:
    """``EvalResult`` of every field, equal to the validated one, without pydantic's validation when
    each value already is what validation would keep: exact types, a score within [0, 1] (the
    model's range check), a known label, ``str`` detail keys. Every evaluator builds one result
    per run, and validation was most of a cheap evaluator's cost. Any other value is validated as
    ``EvalResult(...)`` does it (and rejected alike).

    ``details`` becomes the result's own (validation would copy it): pass a dict made for it.
    """
    if (
        type(evaluator) is str and type(evaluator_version) is str and type(label) is str and label in LABELS
        and type(explanation) is str and type(trace_id) is str and type(agent_name) is str and type(result_id) is str
        and (score is None or (type(score) is float and 0.0 <= score <= 1.0))
        and type(span_id) in _OPTIONAL_STR and type(reason) in _OPTIONAL_STR
        and type(details) is dict
    ):
        for key in details:
            if type(key) is not str:
                break
        else:
            return _built(EvalResult, {  # type: ignore[no-any-return]
                "evaluator": evaluator, "evaluator_version": evaluator_version, "score": score, "label": label,
                "explanation": explanation, "details": details, "trace_id": trace_id, "span_id": span_id,
                "agent_name": agent_name, "result_id": result_id, "reason": reason,
            }, _RESULT_FIELDS)
    return EvalResult(
        evaluator=evaluator, evaluator_version=evaluator_version, score=score, label=label, explanation=explanation,
        details=details, trace_id=trace_id, span_id=span_id, agent_name=agent_name, result_id=result_id, reason=reason,
    )


Phase = Literal["deterministic", "judge"]


@dataclass
class EvaluatedTrace:
    """What sinks receive: one agent trace, one phase's results, and how long each evaluator took.

    A run is emitted once per phase: ``deterministic`` as soon as those
    evaluators are done, ``judge`` when the judge evaluators are (if sampled).
    """

    trace: AgentTrace
    results: list[EvalResult]
    durations: dict[str, float]
    started_ns: int
    ended_ns: int
    phase: Phase = "deterministic"
