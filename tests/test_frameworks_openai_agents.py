"""Acceptance (issue 3): the OpenAI Agents SDK with the OpenInference instrumentation
(``openinference-instrumentation-openai-agents``), every model call a real chat completions request
to the scripted local server (``tests/frameworks/openai_agents_scenarios.py``).

Covers an agent used as a tool (``weather_expert`` via ``Agent.as_tool``: its own AgentTrace, linked
to the concierge step that called it), a tool error (``book_table`` raises; the SDK's default failure
handler records an ERROR tool span and sends an error text back to the model) and a handoff
(``transfer_to_booking_agent``: OpenInference records a ``handoff to booking_agent`` TOOL span with
``input.value`` = source agent and ``output.value`` = target agent, and the target's AGENT span is a
sibling of the source's under the workflow span, not its child).

OpenInference tree: ``Agent workflow`` (AGENT) -> ``Agent workflow`` (CHAIN) -> ``concierge`` (AGENT)
-> ``turn`` (CHAIN) -> ``generation`` (LLM), ``{tool}`` (TOOL); an agent-as-tool's run nests its own
``Agent workflow`` -> ``weather_expert`` under the tool span.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from prometheus_client import CollectorRegistry

pytest.importorskip("agents")
pytest.importorskip("openinference.instrumentation.openai_agents")

from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

from otel_agent_eval import AgentTrace, install
from tests.conftest import Telemetry, make_telemetry
from tests.frameworks import openai_agents_scenarios as sc
from tests.frameworks.fidelity import OPENAI_AGENTS, fidelity
from tests.frameworks.harness import (
    OWN_SCOPE,
    RecordingSink,
    assemble_with_logs,
    assert_traces,
    call,
    dump,
    only,
    step,
    trace,
)

TOOL_ERROR_STATUS = (
    "Error running tool (non-fatal): {'tool_name': 'book_table', "
    "'error': 'Tool execution failed. Error details are redacted.'}"
)
TOOL_ERROR_TEXT = "An error occurred while running the tool. Please try again."


@dataclass
class Run:
    telemetry: Telemetry
    output: str
    recorder: RecordingSink
    registry: CollectorRegistry
    flushed: bool

    @property
    def spans(self) -> list[ReadableSpan]:
        return self.telemetry.spans(exclude_scope=OWN_SCOPE)


def instrumented_run(instrumentor: Any, **instrument_kwargs: Any) -> Iterator[Run]:
    """Yield the scenario's run traced by ``instrumentor`` (a ``BaseInstrumentor``, instrumented with the
    run's tracer provider and ``instrument_kwargs``, uninstrumented after the run), for a module-scoped
    fixture; shut telemetry down afterwards."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("OPENAI_API_KEY", "test")  # never used: every client points at the local server
        telemetry = make_telemetry()
        tp, lp = telemetry.tracer_provider, telemetry.logger_provider
        registry = CollectorRegistry()
        processor = install(tp, lp, registry=registry, settle_delay_seconds=0.05)
        recorder = RecordingSink()
        processor.pipeline.sinks.append(recorder)
        instrumentor.instrument(tracer_provider=tp, **instrument_kwargs)
        try:
            with sc.scripted_server() as server:
                output = sc.run_concierge(server)
                assert server.errors == []
        finally:
            instrumentor.uninstrument()
        flushed = processor.force_flush(10_000)
        try:
            yield Run(telemetry, output, recorder, registry, flushed)
        finally:
            telemetry.shutdown()


@pytest.fixture(scope="module")
def run() -> Iterator[Run]:
    # exclusive_processor (the default) replaces the SDK's own exporter to the OpenAI backend.
    yield from instrumented_run(OpenAIAgentsInstrumentor())


def expected_traces(run: Run) -> list[AgentTrace]:
    spans = run.spans
    by_id = {s.context.span_id: s for s in spans}

    def agent(name: str) -> ReadableSpan:
        return only(spans, lambda s: s.name == name and s.attributes.get("openinference.span.kind") == "AGENT")

    def turns(agent_span: ReadableSpan) -> list[tuple[ReadableSpan, ReadableSpan]]:
        """(turn span, its generation span) of one agent, in order."""
        out = []
        for t in (s for s in spans if s.name == "turn" and s.parent.span_id == agent_span.context.span_id):
            out.append((t, only(spans, lambda s, t=t: s.name == "generation" and s.parent.span_id == t.context.span_id)))
        return out

    def tool(name: str) -> ReadableSpan:
        return only(spans, lambda s: s.name == name and s.attributes.get("openinference.span.kind") == "TOOL")

    concierge, weather, booking = agent("concierge"), agent("weather_expert"), agent("booking_agent")
    c, w, b = turns(concierge), turns(weather), turns(booking)
    assert (len(c), len(w), len(b)) == (3, 2, 1)
    assert by_id[booking.parent.span_id].name == "Agent workflow"  # a sibling of concierge, not its child

    weather_trace = trace(weather, "weather_expert", input=sc.WEATHER_QUESTION, final_output=sc.WEATHER_ANSWER, steps=[
        step(0, w[0][1], [call(tool("get_weather"), "get_weather", {"city": "Paris"}, "sunny, 21C", call_id="call_weather")],
             model=sc.WEATHER_MODEL, usage=(101, 11), turn=w[0][0]),
        step(1, w[1][1], model=sc.WEATHER_MODEL, usage=(102, 12), output=sc.WEATHER_ANSWER, turn=w[1][0]),
    ], parent_step_index=0)
    # The handoff: booking_agent is its own AgentTrace, linked to the concierge step that handed off.
    booking_trace = trace(booking, "booking_agent", input=sc.QUESTION, final_output=sc.FINAL_ANSWER, steps=[
        step(0, b[0][1], model=sc.BOOKING_MODEL, usage=(105, 15), output=sc.FINAL_ANSWER, turn=b[0][0]),
    ], parent_step_index=2)
    concierge_trace = trace(concierge, "concierge", input=sc.QUESTION, final_output=None, steps=[
        # Agent as tool: the call's result is the nested agent's final output.
        step(0, c[0][1], [call(tool("weather_expert"), "weather_expert", {"input": sc.WEATHER_QUESTION},
                              sc.WEATHER_ANSWER, call_id="call_ask_weather")],
             model=sc.CONCIERGE_MODEL, usage=(100, 10), turn=c[0][0]),
        # The tool raised: ERROR span (the SDK redacts the exception), the model got an error text.
        step(1, c[1][1], [call(tool("book_table"), "book_table", {"restaurant": "Chez Test", "people": 2},
                              TOOL_ERROR_TEXT, call_id="call_book_table", error=TOOL_ERROR_STATUS)],
             model=sc.CONCIERGE_MODEL, usage=(103, 13), turn=c[1][0]),
        # The handoff call the model requested, fulfilled by the handoff span; what the model was sent back.
        step(2, c[2][1], [call(tool("handoff to booking_agent"), "transfer_to_booking_agent", {},
                              {"assistant": "booking_agent"}, call_id="call_handoff")],
             model=sc.CONCIERGE_MODEL, usage=(104, 14), turn=c[2][0]),
    ], children=[weather_trace, booking_trace])
    return [concierge_trace]


def test_the_scripted_run_ended_with_the_handoff_target(run: Run) -> None:
    assert run.output == sc.FINAL_ANSWER
    assert run.flushed is True


def test_openinference_recorded_the_tool_error_and_the_handoff(run: Run) -> None:
    book = only(run.spans, lambda s: s.name == "book_table")
    assert book.status.status_code.name == "ERROR"
    assert book.status.description == TOOL_ERROR_STATUS
    assert book.attributes["output.value"] == TOOL_ERROR_TEXT
    handoff = only(run.spans, lambda s: s.name == "handoff to booking_agent")
    assert (handoff.attributes["input.value"], handoff.attributes["output.value"]) == ("concierge", "booking_agent")


@fidelity(OPENAI_AGENTS, "agent as tool", "failing tool", "handoff")
def test_assembled_steps(run: Run) -> None:
    assert_traces(assemble_with_logs(run.spans, run.telemetry.logs()), expected_traces(run))


@fidelity(OPENAI_AGENTS, "agent as tool", "failing tool", "handoff")
def test_processor_evaluated_the_same_steps(run: Run) -> None:
    """The processor evaluates each AgentTrace on its own (nested ones flattened)."""
    expected = expected_traces(run)

    def flat(traces: list[AgentTrace]) -> list[AgentTrace]:
        return [t for tr in traces for t in [tr.model_copy(update={"children": []}), *flat(tr.children)]]

    got = sorted((e.trace for e in run.recorder.evaluated), key=lambda t: t.start_time_unix_nano)
    want = sorted(flat(expected), key=lambda t: t.start_time_unix_nano)
    assert_traces([t.model_copy(update={"children": []}) for t in got], want)


@fidelity(OPENAI_AGENTS, "agent as tool")
def test_agent_as_tool_is_a_linked_child(run: Run) -> None:
    """The part that already works: weather_expert nested under concierge's step 0, with its steps."""
    (concierge,) = [t for t in assemble_with_logs(run.spans) if t.agent_name == "concierge"]
    (expected,) = expected_traces(run)
    weather = [t for t in concierge.children if t.agent_name == "weather_expert"]
    assert [dump(t) for t in weather] == [dump(expected.children[0])]
    assert [s.model_dump(mode="json") for s in concierge.steps[:1]] == [expected.steps[0].model_dump(mode="json")]


def test_processor_metrics(run: Run, metric_samples: Any) -> None:
    m = metric_samples(run.registry)
    assert m.value("agent_eval_processor_errors_total") == 0.0
    evaluated = m.by_labels("agent_eval_traces_evaluated_total", "agent")
    assert evaluated == {("concierge",): 1.0, ("weather_expert",): 1.0, ("booking_agent",): 1.0}
