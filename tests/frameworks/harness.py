"""Shared helpers for the real-framework tests: recording what the processor evaluated, reading
log records back as ``LogRecordData``, and building expected AgentSteps from literal content plus
the ids and times of the spans that carry it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_agent_eval import AgentStep, AgentTrace, TokenUsage, ToolCall, assemble
from otel_agent_eval.intake.logs import log_record_data
from otel_agent_eval.metadata import RESOURCE_KEYS, resource_metadata
from otel_agent_eval.model import EvaluatedTrace
from otel_agent_eval.pipeline.completion import join_log_records
from otel_agent_eval.records import OWN_SCOPE, LogRecordData, SpanRecord, event_name_of, from_readable_span


class RecordingSink:
    """Records what the pipeline hands its sinks: the evaluated AgentTraces and their results."""

    name = "recording"

    def __init__(self) -> None:
        self.evaluated: list[EvaluatedTrace] = []

    def emit(self, evaluated: EvaluatedTrace) -> None:
        self.evaluated.append(evaluated)


def hex_span(span: ReadableSpan) -> str:
    return format(span.context.span_id, "016x")


def hex_trace(span: ReadableSpan) -> str:
    return format(span.context.trace_id, "032x")


def log_data(readable_logs: Iterable[Any]) -> list[LogRecordData]:
    """SDK ``ReadableLogRecord``s (from an InMemoryLogRecordExporter) as the pipeline's LogRecordData,
    as ``AgentEvalLogProcessor.on_emit`` builds them. Our own evaluation records are left out."""
    out = []
    for readable in readable_logs:
        record = readable.log_record
        name = event_name_of(record.event_name, record.attributes)
        if name != "gen_ai.evaluation.result":
            out.append(log_record_data(record, name))
    return out


def assemble_with_logs(spans: Sequence[ReadableSpan], logs: Iterable[Any] = ()) -> list[AgentTrace]:
    """What a backend holding both signals would assemble: spans joined with their log records."""
    spans = [s for s in spans if s.instrumentation_scope is None or s.instrumentation_scope.name != OWN_SCOPE]
    return assemble(join_log_records([from_readable_span(s) for s in spans], log_data(logs)))


def dump(trace: AgentTrace) -> dict[str, Any]:
    return _resource_metadata_only(trace.model_dump(mode="json"))


def _resource_metadata_only(dumped: dict[str, Any]) -> dict[str, Any]:
    """``metadata`` compared by its resource part, here: the agent span's own attributes in it
    change with each framework's version (``tests/test_metadata.py`` holds that part)."""
    dumped["metadata"] = {k: v for k, v in dumped["metadata"].items() if k in RESOURCE_KEYS.values()}
    for child in dumped["children"]:
        _resource_metadata_only(child)
    return dumped


def shape(trace: AgentTrace) -> dict[str, Any]:
    """A trace without span ids and times: what two runs of the same behaviour must share."""

    def strip(d: Any) -> Any:
        if isinstance(d, dict):
            return {k: strip(v) for k, v in d.items() if k not in {
                "trace_id", "agent_span_id", "span_id", "span_ids", "start_time_unix_nano", "end_time_unix_nano"}}
        if isinstance(d, list):
            return [strip(v) for v in d]
        return d

    return strip(dump(trace))


def call(
    span: ReadableSpan,
    name: str,
    arguments: Any,
    result: Any,
    *,
    call_id: str | None,
    error: str | None = None,
) -> ToolCall:
    """An executed, requested call; ids and times from its tool span."""
    return ToolCall(
        name=name,
        arguments=arguments,
        result=result,
        error=error,
        call_id=call_id,
        span_id=hex_span(span),
        start_time_unix_nano=span.start_time,
        end_time_unix_nano=span.end_time,
        requested=True,
        executed=True,
    )


def step(
    index: int,
    llm: ReadableSpan,
    calls: Sequence[ToolCall] = (),
    *,
    model: str | None,
    usage: tuple[int, int],
    thought: str | None = None,
    output: str | None = None,
    turn: ReadableSpan | None = None,
) -> AgentStep:
    """One step; ``turn``: its explicit step span (OpenAI Agents ``turn``), listed first in span_ids."""
    return AgentStep(
        index=index,
        thought=thought,
        output=output,
        tool_calls=list(calls),
        model=model,
        usage=TokenUsage(input_tokens=usage[0], output_tokens=usage[1]),
        # the step's spans: its turn, its model call, then its tool spans in start order (parallel calls
        # run on threads and may start in any order; the calls themselves stay in request order)
        span_ids=[*([hex_span(turn)] if turn is not None else []), hex_span(llm),
                  *(c.span_id for c in sorted(calls, key=lambda c: c.start_time_unix_nano or 0))],
        error=None,
        issues=[],
    )


def trace(
    agent: ReadableSpan,
    agent_name: str,
    *,
    input: str | None,
    final_output: str | None,
    steps: list[AgentStep],
    children: list[AgentTrace] = (),
    parent_step_index: int | None = None,
    start: int | None = None,
    end: int | None = None,
    conversation_id: str | None = None,
) -> AgentTrace:
    return AgentTrace(
        trace_id=hex_trace(agent),
        agent_span_id=hex_span(agent),
        agent_name=agent_name,
        conversation_id=conversation_id,
        input=input,
        final_output=final_output,
        steps=steps,
        children=list(children),
        parent_step_index=parent_step_index,
        status="ok",
        error=None,
        start_time_unix_nano=agent.start_time if start is None else start,
        end_time_unix_nano=agent.end_time if end is None else end,
        usage=sum((s.usage for s in steps), TokenUsage()),
        content_captured=True,
        issues=[],
        metadata=dict(resource_metadata(agent.resource.attributes)),
    )


def only(spans: Iterable[ReadableSpan], predicate: Callable[[ReadableSpan], bool]) -> ReadableSpan:
    found = [s for s in spans if predicate(s)]
    assert len(found) == 1, [s.name for s in found]
    return found[0]


def differences(actual: Any, expected: Any, path: str = "") -> list[str]:
    """Readable leaf differences between two dumps (``path: actual != expected``)."""
    if isinstance(actual, dict) and isinstance(expected, dict):
        out = []
        for key in list(expected) + [k for k in actual if k not in expected]:
            out += differences(actual.get(key, "<missing>"), expected.get(key, "<missing>"), f"{path}.{key}")
        return out
    if isinstance(actual, list) and isinstance(expected, list):
        if len(actual) != len(expected):
            return [f"{path}: {len(actual)} items != {len(expected)} expected: {_short(actual)} != {_short(expected)}"]
        out = []
        for i, (a, e) in enumerate(zip(actual, expected)):
            out += differences(a, e, f"{path}[{i}]")
        return out
    return [] if actual == expected else [f"{path}: {actual!r} != {expected!r}"]


def _short(value: Any, limit: int = 600) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def assert_traces(actual: Sequence[AgentTrace], expected: Sequence[AgentTrace]) -> None:
    """Equal dumps, with a leaf-by-leaf diff as the failure message."""
    got, want = [dump(t) for t in actual], [dump(t) for t in expected]
    assert got == want, "\n".join(differences(got, want))


class RecordSpan:
    """A decoded ``SpanRecord`` (a framework run in its own venv, read back from OTLP) seen as the
    ``ReadableSpan`` fields the builders above read."""

    def __init__(self, record: SpanRecord) -> None:
        self.record = record
        self.name = record.name
        self.attributes = record.attributes
        self.context = _Context(record.trace_id, record.span_id)
        self.parent = None if record.parent_span_id is None else _Context(record.trace_id, record.parent_span_id)
        self.start_time = record.start_time_unix_nano
        self.end_time = record.end_time_unix_nano
        self.resource = _Resource(record.resource)


class _Context:
    def __init__(self, trace_id: int, span_id: int) -> None:
        self.trace_id, self.span_id = trace_id, span_id


class _Resource:
    """A record's resource metadata as resource attributes (its keys are the attributes' own)."""

    def __init__(self, attributes: Any) -> None:
        self.attributes = attributes


def all_traces(traces: Sequence[AgentTrace]) -> list[AgentTrace]:
    """Every AgentTrace of a tree, nested ones included, in start order."""
    out: list[AgentTrace] = []
    stack = list(traces)
    while stack:
        t = stack.pop()
        out.append(t)
        stack.extend(t.children)
    return sorted(out, key=lambda t: t.start_time_unix_nano)


def steps_in_order(traces: Sequence[AgentTrace], spans: Iterable[Any]) -> list[AgentStep]:
    """Every step of every agent in a tree, in the order their first spans started (``spans``: the
    run's spans, ReadableSpan or RecordSpan): what the rules "one step per model response" and "its
    tool calls" are checked on, whichever agent owns the step."""
    start = {hex_span(s): s.start_time for s in spans}
    steps = [s for t in all_traces(traces) for s in t.steps]
    return sorted(steps, key=lambda s: start.get(s.span_ids[0], 0) if s.span_ids else 0)


def flat(traces: Sequence[AgentTrace]) -> list[dict[str, Any]]:
    """Every agent of a forest on its own, without the links between them (children, parent step),
    by agent span id: what assembly got right about each agent whether or not it linked them."""
    out = []
    for t in traces:
        out.append({**dump(t), "children": [], "parent_step_index": None})
        out += flat(t.children)
    return sorted(out, key=lambda d: d["agent_span_id"])


def check_processor_evaluated(run: Any, agents: dict[tuple[str], float], metric_samples: Any) -> None:
    """What the processor evaluated is what ``assemble`` gives, each agent on its own: ``run`` has
    ``flushed``, ``recorder`` (a ``RecordingSink``), ``traces()`` (assembled) and ``registry``."""
    assert run.flushed is True

    def alone(traces: Sequence[AgentTrace]) -> list[AgentTrace]:
        return [t.model_copy(update={"children": []}) for t in traces]

    got = sorted((e.trace for e in run.recorder.evaluated), key=lambda t: t.start_time_unix_nano)
    assert_traces(alone(got), alone(all_traces(run.traces())))
    m = metric_samples(run.registry)
    assert m.value("agent_eval_processor_errors_total") == 0.0
    assert m.by_labels("agent_eval_traces_evaluated_total", "agent") == agents
