"""Acceptance (issue 3): the raw ``openai`` client against a scripted local OpenAI-compatible server,
instrumented with the official ``opentelemetry-instrumentation-openai-v2`` (util-genai 1.1b0), in
span-only and in event-only content mode.

The app (``tests/frameworks/openai_v2_agent.py``) is a hand-rolled agent loop: it opens an
``invoke_agent trip_agent`` span and runs the tools itself under ``execute_tool`` spans (util-genai's
``TelemetryHandler``). Turn 1 requests ``get_weather`` and ``get_time`` in parallel; turn 2 requests
``book_hotel``, which raises (a tool error; the app sends ``"Error: ..."`` back to the model); turn 3
answers in text.

- SPAN_ONLY: messages are ``gen_ai.input.messages`` / ``gen_ai.output.messages`` span attributes and
  tool spans carry ``gen_ai.tool.call.arguments`` / ``.result``.
- EVENT_ONLY: spans carry no content at all; each chat span gets one
  ``gen_ai.client.inference.operation.details`` log record holding the messages (as structured
  AnyValue lists, which the SDK stores as tuples). Tool arguments must come from the requesting turn's
  output messages, tool results from the next turn's input (``tool_call_response`` parts).

Both modes must give the same AgentSteps, through ``install(tp, lp)`` (processor + log processor).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from prometheus_client import CollectorRegistry

pytest.importorskip("opentelemetry.instrumentation.openai_v2")

from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

from otel_agent_eval import AgentTrace, ToolExpectation, install
from tests.conftest import Telemetry, make_telemetry
from tests.frameworks import openai_v2_agent as app
from tests.frameworks.fidelity import OPENAI_V2, fidelity
from tests.frameworks.harness import (
    OWN_SCOPE,
    RecordingSink,
    assemble_with_logs,
    assert_traces,
    call,
    differences,
    hex_span,
    only,
    shape,
    step,
    trace,
)

MODES = ("SPAN_ONLY", "EVENT_ONLY")

HOTEL_ERROR_SENT = f"Error: {app.HOTEL_ERROR}"
"""What the app sends back to the model as book_hotel's tool message."""

EXPECTATIONS = [ToolExpectation(agent=app.AGENT, expected_tools=["get_weather", "get_time", "book_hotel"])]


@dataclass
class Run:
    mode: str
    telemetry: Telemetry
    output: str
    recorder: RecordingSink
    registry: CollectorRegistry
    flushed: bool
    requests: list[Any]

    @property
    def spans(self) -> list[ReadableSpan]:
        return self.telemetry.spans(exclude_scope=OWN_SCOPE)


def _run(mode: str, monkeypatch: pytest.MonkeyPatch) -> Run:
    # util-genai 1.1b0 always uses the latest experimental conventions (is_experimental_mode() is
    # True) and reads the capture mode from the environment on every call; set both anyway, before
    # instrumenting, as an app would.
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", mode)
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT", raising=False)
    telemetry = make_telemetry()
    tp, lp = telemetry.tracer_provider, telemetry.logger_provider
    registry = CollectorRegistry()
    processor = install(tp, lp, registry=registry, settle_delay_seconds=0.05, expectations=EXPECTATIONS)
    recorder = RecordingSink()
    processor.pipeline.sinks.append(recorder)
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tp, logger_provider=lp)
    try:
        with app.scripted_server() as server:
            output = app.run_trip_agent(tp, lp, server)
            requests = list(server.requests)
            assert server.errors == []
    finally:
        instrumentor.uninstrument()
    flushed = processor.force_flush(10_000)
    return Run(mode, telemetry, output, recorder, registry, flushed, requests)


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[str, Run]]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        done: dict[str, Run] = {}
        try:
            for mode in MODES:
                done[mode] = _run(mode, monkeypatch)
            yield done
        finally:
            for run in done.values():
                run.telemetry.shutdown()


def expected_trace(run: Run) -> AgentTrace:
    spans = run.spans
    agent = only(spans, lambda s: s.name == f"invoke_agent {app.AGENT}")
    chats = [s for s in spans if s.name == f"chat {app.MODEL}"]
    assert len(chats) == 3
    tool = {s.attributes["gen_ai.tool.call.id"]: s for s in spans if s.name.startswith("execute_tool ")}
    assert sorted(tool) == ["call_hotel_1", "call_time_1", "call_weather_1"]
    return trace(agent, app.AGENT, input=app.QUESTION, final_output=app.ANSWER, steps=[
        # Two calls requested in one response: ONE step, in request order.
        step(0, chats[0], [
            call(tool["call_weather_1"], "get_weather", {"city": "Paris"}, "sunny, 21C", call_id="call_weather_1"),
            call(tool["call_time_1"], "get_time", {"city": "Paris"}, "10:00", call_id="call_time_1"),
        ], model=app.MODEL, usage=(100, 10)),
        # The tool raised: the span is ERROR with the exception message as status description.
        # The result is what the model was told the tool returned (the next turn's tool message).
        step(1, chats[1], [
            call(tool["call_hotel_1"], "book_hotel", {"city": "Paris", "nights": 2}, HOTEL_ERROR_SENT,
                 call_id="call_hotel_1", error=app.HOTEL_ERROR),
        ], model=app.MODEL, usage=(101, 11), thought="Now the hotel."),
        step(2, chats[2], model=app.MODEL, usage=(102, 12), output=app.ANSWER),
    ])


# --- the run itself --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_the_scripted_conversation_ran(runs: dict[str, Run], mode: str) -> None:
    run = runs[mode]
    assert run.output == app.ANSWER
    assert run.flushed is True
    assert [r.api for r in run.requests] == ["chat"] * 3
    last = run.requests[-1].body["messages"]
    assert last[-1] == {"role": "tool", "tool_call_id": "call_hotel_1", "content": HOTEL_ERROR_SENT}


def test_span_only_spans_carry_the_content(runs: dict[str, Run]) -> None:
    spans = runs["SPAN_ONLY"].spans
    assert [s.name for s in spans] == [
        "invoke_agent trip_agent", "chat gpt-test-trip", "execute_tool get_weather", "execute_tool get_time",
        "chat gpt-test-trip", "execute_tool book_hotel", "chat gpt-test-trip",
    ]
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert all("gen_ai.output.messages" in s.attributes for s in chats)
    weather = only(spans, lambda s: s.name == "execute_tool get_weather")
    assert weather.attributes["gen_ai.tool.call.arguments"] == '{"city":"Paris"}'
    assert weather.attributes["gen_ai.tool.call.result"] == "sunny, 21C"
    assert [r for r in runs["SPAN_ONLY"].telemetry.logs()
            if r.log_record.event_name == "gen_ai.client.inference.operation.details"] == []


def test_event_only_spans_carry_no_content(runs: dict[str, Run]) -> None:
    run = runs["EVENT_ONLY"]
    content_keys = {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments",
                    "gen_ai.tool.call.result"}
    for span in run.spans:
        assert content_keys.isdisjoint(span.attributes), span.name
    details = [r.log_record for r in run.telemetry.logs()
               if r.log_record.event_name == "gen_ai.client.inference.operation.details"]
    chats = [s for s in run.spans if s.name.startswith("chat ")]
    assert [r.span_id for r in details] == [s.context.span_id for s in chats]
    assert all("gen_ai.output.messages" in r.attributes for r in details)


# --- assembly --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@fidelity(OPENAI_V2, "parallel tools", "failing tool")
def test_assembled_steps(runs: dict[str, Run], mode: str) -> None:
    """``assemble`` over the spans joined with their log records (what a backend holds)."""
    run = runs[mode]
    assert_traces(assemble_with_logs(run.spans, run.telemetry.logs()), [expected_trace(run)])


@pytest.mark.parametrize("mode", MODES)
@fidelity(OPENAI_V2, "parallel tools", "failing tool")
def test_processor_evaluated_the_same_steps(runs: dict[str, Run], mode: str) -> None:
    run = runs[mode]
    assert len(run.recorder.evaluated) == 1
    (evaluated,) = run.recorder.evaluated
    assert_traces([evaluated.trace], [expected_trace(run)])


@fidelity(OPENAI_V2, "parallel tools", "failing tool")
def test_both_modes_give_the_same_steps(runs: dict[str, Run]) -> None:
    span_only = [shape(e.trace) for e in runs["SPAN_ONLY"].recorder.evaluated]
    event_only = [shape(e.trace) for e in runs["EVENT_ONLY"].recorder.evaluated]
    assert event_only == span_only, "\n".join(differences(event_only, span_only))


# --- results and metrics ---------------------------------------------------------------------------

EXPECTED_LABELS = {
    "tool_call_accuracy": "pass",
    "tool_failure_recovery": "fail",  # book_hotel failed and was never retried
    "loop_detection": "pass",
    "step_budget": "pass",
}


@pytest.mark.parametrize("mode", MODES)
def test_processor_results(runs: dict[str, Run], mode: str) -> None:
    run = runs[mode]
    (evaluated,) = run.recorder.evaluated
    labels = {r.evaluator: r.label for r in evaluated.results}
    assert {k: labels.get(k) for k in EXPECTED_LABELS} == EXPECTED_LABELS
    agent = only(run.spans, lambda s: s.name == f"invoke_agent {app.AGENT}")
    assert {r.span_id for r in evaluated.results} == {hex_span(agent)}


@pytest.mark.parametrize("mode", MODES)
def test_processor_metrics(runs: dict[str, Run], mode: str, metric_samples: Any) -> None:
    run = runs[mode]
    m = metric_samples(run.registry)
    assert m.by_labels("agent_eval_traces_evaluated_total", "agent") == {(app.AGENT,): 1.0}
    assert m.value("agent_eval_spans_kept_total") == 7.0
    assert m.value("agent_eval_log_records_kept_total") == (3.0 if mode == "EVENT_ONLY" else 0.0)
    assert m.value("agent_eval_processor_errors_total") == 0.0
    assert m.by_labels("agent_eval_results_total", "evaluator", "agent", "outcome") == {
        (evaluator, app.AGENT, label): 1.0 for evaluator, label in EXPECTED_LABELS.items()
    }


# --- the one-pass assembly -------------------------------------------------------------------------


def test_a_span_only_run_without_a_failure_has_every_result(monkeypatch: pytest.MonkeyPatch) -> None:
    """util-genai's spans are plain semconv: with every tool result recorded (book_hotel succeeding),
    every call carries its own span's result. The failing run above has book_hotel's result back-filled
    from the next turn (its span records none)."""
    monkeypatch.setitem(app.TOOLS, "book_hotel", lambda city, nights: f"booked {nights} nights in {city}")
    run = _run("SPAN_ONLY", monkeypatch)
    try:
        assert run.flushed
        (evaluated,) = run.recorder.evaluated
        booking = evaluated.trace.steps[1].tool_calls[0]
        assert (booking.name, booking.result, booking.error) == ("book_hotel", "booked 2 nights in Paris", None)
        assert {r.evaluator: r.label for r in evaluated.results}["tool_failure_recovery"] == "pass"
    finally:
        run.telemetry.shutdown()
