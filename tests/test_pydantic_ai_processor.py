"""Acceptance: real pydantic-ai agents, instrumented by pydantic-ai's own OpenTelemetry support,
run with ``AgentEvalProcessor`` on their TracerProvider (issue 2, "Acceptance", second bullet).

Five scripted runs (``FunctionModel``, no network) go through one provider:

- ``weather_agent``: two tool calls in parallel in one turn, then an answer;
- ``booking_agent``: a tool fails (``ModelRetry``), the retry succeeds, then an answer;
- ``payment_agent``: a tool fails and is never retried; the model apologises;
- ``search_agent``: the same call ``search(query="x")`` four turns in a row (a loop; over budget);
- ``fx_agent`` (defined here): thinking and text next to a tool call, a structured tool result.

After ``force_flush()`` the tests assert the exact AgentSteps (``assemble`` over the exported
pydantic-ai spans, and what the processor evaluated), the scores of every evaluator, the evaluation
span, the ``gen_ai.evaluation.result`` log records and the Prometheus samples, and that the
processor never evaluates its own spans.

Literal expectations (names, arguments, results, errors, texts, scores) are written out; only span
ids, timestamps and pydantic-ai's token estimates are read from the exported spans, each found by
a literal key (tool call id, span name).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind
from prometheus_client import CollectorRegistry

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ThinkingPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from otel_agent_eval import (
    AgentEvalProcessor,
    AgentStep,
    AgentTrace,
    ExpectedCall,
    TokenUsage,
    ToolCall,
    ToolExpectation,
    assemble,
)
from otel_agent_eval.evaluators import BUILTIN_EVALUATORS
from otel_agent_eval.model import (
    EvaluatedTrace,
    result_id,
)
from tests.frameworks import harness
from tests.frameworks.fidelity import PYDANTIC_AI, by_param, fidelity
from tests.frameworks.harness import hex_span, hex_trace
from tests.frameworks.pydantic_ai_scenarios import (
    BOOKING_ANSWER,
    LOOP_ANSWER,
    UNRECOVERED_ANSWER,
    WEATHER_ANSWER,
    _instrumentation,
    _responses,
    run_loop,
    run_weather_with_parallel_tools,
    run_with_failing_tool,
    run_with_unrecovered_failure,
)

OWN_SCOPE = "otel_agent_eval"
FRAMEWORK_SCOPE = "pydantic-ai"
EVALUATORS = ("tool_call_accuracy", "tool_failure_recovery", "loop_detection", "step_budget")
VERSIONS = {name: BUILTIN_EVALUATORS[name].version for name in EVALUATORS}
MAX_STEPS = 4
"""Step budget: the 5-turn loop run exceeds it, every other run stays within it."""
SCORE_BUCKETS = ("0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9", "1.0", "+Inf")

EXPECTATIONS = [
    ToolExpectation(agent="weather_agent", expected_tools=["get_weather", "get_time"]),
    # Exact arguments; the retry counts as an unexpected call: 1 / (1 + 1) = 0.5, a pass at 0.5.
    ToolExpectation(
        agent="booking_agent",
        expected_tools=[ExpectedCall(name="book_flight", arguments={"destination": "Rome"})],
        penalize_unexpected=True,
    ),
    # 1 / (1 + 3 unexpected repeats) = 0.25: a fail.
    ToolExpectation(agent="search_agent", expected_tools=["search"], penalize_unexpected=True),
    ToolExpectation(agent="fx_agent", expected_tools=["convert"], require_order=True, forbidden_tools=["wire_transfer"]),
    # payment_agent: no rule, so tool_call_accuracy is skipped.
]

FX_THINKING = "The user wants 100 EUR in USD."
FX_THOUGHT_TEXT = "Let me convert that."
FX_ANSWER = "100 EUR is 108 USD."


def run_fx_with_thought(tp: Any) -> str:
    """Turn 1: thinking + text + one tool call (structured result). Turn 2: the answer."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if _responses(messages) == 0:
            return ModelResponse(
                parts=[
                    ThinkingPart(FX_THINKING),
                    TextPart(FX_THOUGHT_TEXT),
                    ToolCallPart("convert", {"amount": 100, "to": "USD"}, tool_call_id="call_convert_1"),
                ]
            )
        return ModelResponse(parts=[TextPart(FX_ANSWER)])

    agent = Agent(
        FunctionModel(model, model_name="scripted-fx"),
        name="fx_agent",
        instructions="You convert currencies.",
        capabilities=[_instrumentation(tp)],
    )

    @agent.tool_plain
    def convert(amount: int, to: str) -> dict[str, Any]:
        """Convert EUR to another currency."""
        return {"amount": 108, "currency": to}

    return agent.run_sync("Convert 100 EUR to USD.").output


SCENARIOS: dict[str, Callable[[Any], str]] = {
    "weather_agent": run_weather_with_parallel_tools,
    "booking_agent": run_with_failing_tool,
    "payment_agent": run_with_unrecovered_failure,
    "search_agent": run_loop,
    "fx_agent": run_fx_with_thought,
}
AGENTS = tuple(SCENARIOS)
FIDELITY_SCENARIOS = {"weather_agent": "parallel tools", "booking_agent": "retried failure",
                      "payment_agent": "failed tool", "search_agent": "loop", "fx_agent": "thinking"}
"""docs/fidelity.md's scenario of each agent's run."""
FINAL_OUTPUTS = {
    "weather_agent": WEATHER_ANSWER,
    "booking_agent": BOOKING_ANSWER,
    "payment_agent": UNRECOVERED_ANSWER,
    "search_agent": LOOP_ANSWER,
    "fx_agent": FX_ANSWER,
}
SPANS_PER_RUN = {  # invoke_agent + chat per turn + execute_tool per call
    "weather_agent": 1 + 2 + 2,
    "booking_agent": 1 + 3 + 2,
    "payment_agent": 1 + 2 + 1,
    "search_agent": 1 + 5 + 4,
    "fx_agent": 1 + 2 + 1,
}


# --- the run -------------------------------------------------------------------------------------


class RecordingSink:
    """Records what the pipeline hands its sinks: the evaluated AgentTraces and their results."""

    name = "recording"

    def __init__(self) -> None:
        self.evaluated: list[EvaluatedTrace] = []

    def emit(self, evaluated: EvaluatedTrace) -> None:
        self.evaluated.append(evaluated)


@dataclass
class Run:
    telemetry: Any
    processor: AgentEvalProcessor
    registry: CollectorRegistry
    outputs: dict[str, str]
    recorder: RecordingSink
    flushed: list[bool]
    spans_after_first_flush: int
    logs_after_first_flush: int
    agent_spans: dict[str, ReadableSpan] = field(default_factory=dict)

    def framework_spans(self, agent: str) -> list[ReadableSpan]:
        trace_id = self.agent_spans[agent].context.trace_id
        return [s for s in self.telemetry.spans(FRAMEWORK_SCOPE) if s.context.trace_id == trace_id]

    def own_spans(self, agent: str) -> list[ReadableSpan]:
        trace_id = self.agent_spans[agent].context.trace_id
        return [s for s in self.telemetry.spans(OWN_SCOPE) if s.context.trace_id == trace_id]

    def evaluated(self, agent: str) -> list[EvaluatedTrace]:
        return [e for e in self.recorder.evaluated if e.trace.agent_name == agent]

    def logs(self, agent: str) -> list[Any]:
        span = self.agent_spans[agent]
        return [r for r in self.telemetry.logs() if r.log_record.trace_id == span.context.trace_id]


@pytest.fixture(scope="module")
def run(telemetry_factory: Callable[[], Any]) -> Any:
    telemetry = telemetry_factory()
    tp, lp = telemetry.tracer_provider, telemetry.logger_provider
    registry = CollectorRegistry()
    processor = AgentEvalProcessor(
        tracer_provider=tp,
        logger_provider=lp,
        registry=registry,
        settle_delay_seconds=0.05,
        max_steps=MAX_STEPS,
        expectations=EXPECTATIONS,
    )
    recorder = RecordingSink()
    processor.pipeline.sinks.append(recorder)
    tp.add_span_processor(processor)
    try:
        outputs = {agent: scenario(tp) for agent, scenario in SCENARIOS.items()}
        flushed = [processor.force_flush(10_000)]
        spans_after_first, logs_after_first = len(telemetry.spans()), len(telemetry.logs())
        flushed.append(processor.force_flush(10_000))
        result = Run(telemetry, processor, registry, outputs, recorder, flushed, spans_after_first, logs_after_first)
        for span in telemetry.spans(FRAMEWORK_SCOPE):
            if span.name.startswith("invoke_agent "):
                agent = span.name.removeprefix("invoke_agent ")
                assert agent not in result.agent_spans, f"two runs of {agent}"
                result.agent_spans[agent] = span
        assert sorted(result.agent_spans) == sorted(AGENTS)
        yield result
    finally:
        telemetry.shutdown()  # shuts the processor down too


# --- helpers -------------------------------------------------------------------------------------


class RunSpans:
    """One run's pydantic-ai spans, found by literal keys."""

    def __init__(self, spans: list[ReadableSpan]) -> None:
        self.spans = spans
        self.chats = [s for s in spans if s.name.startswith("chat ")]  # start order
        self.tools = {s.attributes["gen_ai.tool.call.id"]: s for s in spans if s.name.startswith("execute_tool ")}
        (self.agent,) = [s for s in spans if s.name.startswith("invoke_agent ")]

    def call(
        self, call_id: str, name: str, arguments: Any, result: Any, error: str | None = None
    ) -> ToolCall:
        span = self.tools[call_id]
        assert span.name == f"execute_tool {name}"
        return harness.call(span, name, arguments, result, call_id=call_id, error=error)

    def step(
        self, index: int, model: str, calls: list[ToolCall] = (), *, thought: str | None = None, output: str | None = None
    ) -> AgentStep:
        chat = self.chats[index]
        assert chat.name == f"chat {model}"
        usage = (chat.attributes["gen_ai.usage.input_tokens"], chat.attributes["gen_ai.usage.output_tokens"])
        return harness.step(index, chat, calls, model=model, usage=usage, thought=thought, output=output)

    def trace(self, agent_name: str, input: str, final_output: str, steps: list[AgentStep]) -> AgentTrace:
        span = self.agent
        assert len(self.chats) == len(steps), f"{len(self.chats)} chat spans for {len(steps)} expected steps"
        usage = TokenUsage(
            input_tokens=sum(s.usage.input_tokens for s in steps),
            output_tokens=sum(s.usage.output_tokens for s in steps),
        )
        # Cross-check against pydantic-ai's own total on the agent span.
        assert usage.input_tokens == span.attributes["gen_ai.aggregated_usage.input_tokens"]
        assert usage.output_tokens == span.attributes["gen_ai.aggregated_usage.output_tokens"]
        return AgentTrace(
            trace_id=hex_trace(span),
            agent_span_id=hex_span(span),
            agent_name=agent_name,
            conversation_id=span.attributes["gen_ai.conversation.id"],
            input=input,
            final_output=final_output,
            steps=steps,
            children=[],
            parent_step_index=None,
            status="ok",
            error=None,
            start_time_unix_nano=span.start_time,
            end_time_unix_nano=span.end_time,
            usage=usage,
            content_captured=True,
            # The tools pydantic-ai offered the model, as recorded on its chat spans.
            tool_definitions=json.loads(self.chats[0].attributes["gen_ai.tool.definitions"]),
            issues=[],
            # The agent span's attributes but its content (pydantic_ai.all_messages, final_result,
            # gen_ai.system_instructions, logfire.json_schema), and its resource's service name.
            metadata={
                **{key: span.attributes[key] for key in AGENT_SPAN_METADATA},
                "service.name": span.resource.attributes["service.name"],
            },
        )


AGENT_SPAN_METADATA = (
    "model_name", "agent_name", "gen_ai.agent.name", "gen_ai.agent.call.id", "gen_ai.conversation.id",
    "gen_ai.operation.name", "logfire.msg", "gen_ai.aggregated_usage.input_tokens", "gen_ai.aggregated_usage.output_tokens",
)


def expected_trace(run: Run, agent: str) -> AgentTrace:
    s = RunSpans(run.framework_spans(agent))
    if agent == "weather_agent":
        # The two parallel calls of turn 1 in ONE step, in request order.
        return s.trace(agent, "What is the weather and time in Paris?", WEATHER_ANSWER, [
            s.step(0, "scripted-weather", [
                s.call("call_weather_1", "get_weather", {"city": "Paris"}, "sunny, 21C"),
                s.call("call_time_1", "get_time", {"city": "Paris"}, "10:00"),
            ]),
            s.step(1, "scripted-weather", output=WEATHER_ANSWER),
        ])
    if agent == "booking_agent":
        # pydantic-ai 2.x records a ModelRetry as an ERROR tool span with an ``exception`` event
        # (ToolRetryError) and the retry prompt as gen_ai.tool.call.result.
        return s.trace(agent, "Book me a flight to Rome.", BOOKING_ANSWER, [
            s.step(0, "scripted-booking", [
                s.call("call_book_1", "book_flight", {"destination": "Rome"}, "no seats left",
                       error="pydantic_ai.exceptions.ToolRetryError: no seats left"),
            ]),
            s.step(1, "scripted-booking", [
                s.call("call_book_2", "book_flight", {"destination": "Rome"}, "booked BK-42"),
            ]),
            s.step(2, "scripted-booking", output=BOOKING_ANSWER),
        ])
    if agent == "payment_agent":
        return s.trace(agent, "Charge 120 EUR to my card.", UNRECOVERED_ANSWER, [
            s.step(0, "scripted-payment", [
                s.call("call_charge_1", "charge_card", {"amount_eur": 120}, "payment service unavailable",
                       error="pydantic_ai.exceptions.ToolRetryError: payment service unavailable"),
            ]),
            s.step(1, "scripted-payment", output=UNRECOVERED_ANSWER),
        ])
    if agent == "search_agent":
        return s.trace(agent, "Find x.", LOOP_ANSWER, [
            *[
                s.step(i, "scripted-search", [s.call(f"call_search_{i + 1}", "search", {"query": "x"}, "no results")])
                for i in range(4)
            ],
            s.step(4, "scripted-search", output=LOOP_ANSWER),
        ])
    if agent == "fx_agent":
        # Reasoning first, then the text the model wrote next to its tool call; a dict result.
        return s.trace(agent, "Convert 100 EUR to USD.", FX_ANSWER, [
            s.step(0, "scripted-fx", [
                s.call("call_convert_1", "convert", {"amount": 100, "to": "USD"}, {"amount": 108, "currency": "USD"}),
            ], thought=f"{FX_THINKING}\n{FX_THOUGHT_TEXT}"),
            s.step(1, "scripted-fx", output=FX_ANSWER),
        ])
    raise AssertionError(agent)


def dump(trace: AgentTrace) -> dict[str, Any]:
    """A plain dict, for pytest's diff."""
    return trace.model_dump(mode="json")


# (evaluator, label, score, explanation, details), in evaluator order.
EXPECTED_RESULTS: dict[str, list[tuple[str, str, float | None, str, dict[str, Any]]]] = {
    "weather_agent": [
        ("tool_call_accuracy", "pass", 1.0, "2 of 2 expected tool calls made", {
            "actual": ["get_weather", "get_time"], "expected": ["get_weather", "get_time"], "matched": 2,
            "unexpected": 0, "require_order": False, "penalize_unexpected": False, "threshold": 1.0}),
        ("tool_failure_recovery", "pass", 1.0, "no tool call failed", {"failed": 0, "threshold": 1.0}),
        ("loop_detection", "pass", 1.0, "no repeated identical tool call", {"threshold_calls": 3, "threshold": 1.0}),
        ("step_budget", "pass", 1.0, "2 steps (budget 4)", {"steps": 2, "max_steps": 4, "threshold": 1.0}),
    ],
    "booking_agent": [
        # A retry is an unexpected call under penalize_unexpected: the expectation was not met.
        ("tool_call_accuracy", "fail", 0.5, "1 of 1 expected tool calls made, 1 unexpected", {
            "actual": ["book_flight", "book_flight"], "expected": ["book_flight"], "matched": 1,
            "unexpected": 1, "require_order": False, "penalize_unexpected": True, "threshold": 1.0}),
        ("tool_failure_recovery", "pass", 1.0, "all 1 failed tool calls were recovered",
         {"failed": 1, "recovered": 1, "unrecovered_tools": [], "threshold": 1.0}),
        ("loop_detection", "pass", 1.0, "no repeated identical tool call", {"threshold_calls": 3, "threshold": 1.0}),
        ("step_budget", "pass", 1.0, "3 steps (budget 4)", {"steps": 3, "max_steps": 4, "threshold": 1.0}),
    ],
    "payment_agent": [
        ("tool_call_accuracy", "skipped", None, "no tool-call expectation for agent 'payment_agent'", {"reason": "no_expectation"}),
        ("tool_failure_recovery", "fail", 0.0, "1 of 1 failed tool calls never recovered by a retry or a named fallback (charge_card)",
         {"failed": 1, "recovered": 0, "unrecovered_tools": ["charge_card"], "threshold": 1.0}),
        ("loop_detection", "pass", 1.0, "no repeated identical tool call", {"threshold_calls": 3, "threshold": 1.0}),
        ("step_budget", "pass", 1.0, "2 steps (budget 4)", {"steps": 2, "max_steps": 4, "threshold": 1.0}),
    ],
    "search_agent": [
        ("tool_call_accuracy", "fail", 0.25, "1 of 1 expected tool calls made, 3 unexpected", {
            "actual": ["search"] * 4, "expected": ["search"], "matched": 1,
            "unexpected": 3, "require_order": False, "penalize_unexpected": True, "threshold": 1.0}),
        ("tool_failure_recovery", "pass", 1.0, "no tool call failed", {"failed": 0, "threshold": 1.0}),
        ("loop_detection", "fail", 0.0, 'search({"query":"x"}) called 4 times with identical arguments',
         {"repeated_calls": {'search({"query":"x"})': 4}, "threshold_calls": 3, "threshold": 1.0}),
        ("step_budget", "fail", 0.8, "5 steps (budget 4)", {"steps": 5, "max_steps": 4, "threshold": 1.0}),
    ],
    "fx_agent": [
        ("tool_call_accuracy", "pass", 1.0, "1 of 1 expected tool calls made", {
            "actual": ["convert"], "expected": ["convert"], "matched": 1,
            "unexpected": 0, "require_order": True, "penalize_unexpected": False, "threshold": 1.0}),
        ("tool_failure_recovery", "pass", 1.0, "no tool call failed", {"failed": 0, "threshold": 1.0}),
        ("loop_detection", "pass", 1.0, "no repeated identical tool call", {"threshold_calls": 3, "threshold": 1.0}),
        ("step_budget", "pass", 1.0, "2 steps (budget 4)", {"steps": 2, "max_steps": 4, "threshold": 1.0}),
    ],
}
SAMPLING_REASON = {  # failed tool calls are kept by the tail rule whatever the ratio
    "weather_agent": "ratio", "booking_agent": "tool_failure", "payment_agent": "tool_failure",
    "search_agent": "ratio", "fx_agent": "ratio",
}


# --- the runs themselves -------------------------------------------------------------------------


def test_agents_ran_and_flushes_completed(run: Run) -> None:
    assert run.outputs == FINAL_OUTPUTS
    assert run.flushed == [True, True]
    for agent in AGENTS:
        spans = run.framework_spans(agent)
        assert len(spans) == SPANS_PER_RUN[agent], [s.name for s in spans]
    assert len({s.context.trace_id for s in run.agent_spans.values()}) == len(AGENTS)


# --- AgentSteps ----------------------------------------------------------------------------------


@pytest.mark.parametrize("agent", AGENTS)
@fidelity(PYDANTIC_AI, by_param("agent", FIDELITY_SCENARIOS))
def test_assembled_agent_steps(run: Run, agent: str) -> None:
    """``assemble`` over the exported pydantic-ai spans of one run gives exactly the expected AgentTrace.

    Every field, ``issues`` included: plain-text tool results ('10:00', 'no results') are text, not
    malformed JSON.
    """
    traces = assemble(run.framework_spans(agent))
    assert len(traces) == 1, [t.agent_name for t in traces]
    assert dump(traces[0]) == dump(expected_trace(run, agent))


@fidelity(PYDANTIC_AI, "parallel tools", "retried failure", "failed tool")
def test_parallel_calls_share_one_step_and_failures_keep_their_error(run: Run) -> None:
    """The key facts, spelled out, in case the full comparison above is ever loosened."""
    (weather,) = assemble(run.framework_spans("weather_agent"))
    assert [[c.name for c in s.tool_calls] for s in weather.steps] == [["get_weather", "get_time"], []]
    assert [c.call_id for c in weather.steps[0].tool_calls] == ["call_weather_1", "call_time_1"]
    (booking,) = assemble(run.framework_spans("booking_agent"))
    assert [(c.call_id, c.error) for c in booking.tool_calls] == [
        ("call_book_1", "pydantic_ai.exceptions.ToolRetryError: no seats left"),
        ("call_book_2", None),
    ]
    assert booking.has_tool_failure and booking.status == "ok"
    (payment,) = assemble(run.framework_spans("payment_agent"))
    assert [c.failed for c in payment.tool_calls] == [True]


@pytest.mark.parametrize("agent", AGENTS)
@fidelity(PYDANTIC_AI, by_param("agent", FIDELITY_SCENARIOS))
def test_processor_evaluated_exactly_the_assembled_trace(run: Run, agent: str) -> None:
    evaluated = run.evaluated(agent)
    assert len(evaluated) == 1
    (assembled,) = assemble(run.framework_spans(agent))
    assert dump(evaluated[0].trace) == dump(assembled)
    assert dump(evaluated[0].trace) == dump(expected_trace(run, agent))


# --- scores --------------------------------------------------------------------------------------


@pytest.mark.parametrize("agent", AGENTS)
def test_scores_per_evaluator(run: Run, agent: str) -> None:
    (evaluated,) = run.evaluated(agent)
    span = run.agent_spans[agent]
    got = [(r.evaluator, r.label, r.score, r.explanation, r.details) for r in evaluated.results]
    assert got == EXPECTED_RESULTS[agent]
    for r in evaluated.results:
        version = VERSIONS[r.evaluator]
        assert (r.trace_id, r.span_id, r.agent_name, r.evaluator_version) == (hex_trace(span), hex_span(span), agent, version)
        assert r.result_id == result_id(hex_trace(span), hex_span(span), r.evaluator, version)
    assert sorted(evaluated.durations) == sorted(EVALUATORS)


# --- evaluation span -----------------------------------------------------------------------------


SERVICE = "unknown_service:python"
"""The SDK's default resource names the service so: the evaluation span and log records repeat it."""


def expected_span_attributes(agent: str, span_id: str) -> dict[str, Any]:
    results = EXPECTED_RESULTS[agent]
    attributes: dict[str, Any] = {
        "agent_eval.agent.name": agent, "agent_eval.phase": "deterministic", "agent_eval.service.name": SERVICE,
        "agent_eval.evaluated_span_id": span_id,
    }
    for evaluator, label, score, _, _ in results:
        attributes[f"agent_eval.{evaluator}.label"] = label
        if score is not None:
            attributes[f"agent_eval.{evaluator}.score"] = score
    for label in ("pass", "fail", "skipped", "error"):
        attributes[f"agent_eval.results.{label}"] = sum(1 for r in results if r[1] == label)
    return attributes


def test_expected_span_attributes_helper_spelled_out(run: Run) -> None:
    """The helper above, written out once by hand for the run with a skip and a fail."""
    span_id = hex_span(run.agent_spans["payment_agent"])
    assert expected_span_attributes("payment_agent", span_id) == {
        "agent_eval.agent.name": "payment_agent",
        "agent_eval.phase": "deterministic",
        "agent_eval.service.name": "unknown_service:python",
        "agent_eval.evaluated_span_id": span_id,
        "agent_eval.tool_call_accuracy.label": "skipped",
        "agent_eval.tool_failure_recovery.label": "fail",
        "agent_eval.tool_failure_recovery.score": 0.0,
        "agent_eval.loop_detection.label": "pass",
        "agent_eval.loop_detection.score": 1.0,
        "agent_eval.step_budget.label": "pass",
        "agent_eval.step_budget.score": 1.0,
        "agent_eval.results.pass": 2,
        "agent_eval.results.fail": 1,
        "agent_eval.results.skipped": 1,
        "agent_eval.results.error": 0,
    }


@pytest.mark.parametrize("agent", AGENTS)
def test_evaluation_span(run: Run, agent: str) -> None:
    agent_span = run.agent_spans[agent]
    own = run.own_spans(agent)
    assert len(own) == 1, [s.name for s in own]
    (span,) = own
    assert span.name == f"evaluate_agent {agent}"
    assert span.instrumentation_scope.name == OWN_SCOPE
    assert span.kind == SpanKind.INTERNAL
    assert span.context.trace_id == agent_span.context.trace_id
    assert span.parent is not None
    assert span.parent.span_id == agent_span.context.span_id
    assert span.parent.trace_id == agent_span.context.trace_id
    assert dict(span.attributes) == expected_span_attributes(agent, hex_span(agent_span))
    (evaluated,) = run.evaluated(agent)
    assert (span.start_time, span.end_time) == (evaluated.started_ns, evaluated.ended_ns)
    assert agent_span.end_time <= span.start_time <= span.end_time


# --- gen_ai.evaluation.result log records --------------------------------------------------------


@pytest.mark.parametrize("agent", AGENTS)
def test_evaluation_log_records(run: Run, agent: str) -> None:
    agent_span = run.agent_spans[agent]
    (eval_span,) = run.own_spans(agent)
    records = run.logs(agent)
    assert len(records) == len(EVALUATORS)
    got = []
    for readable in records:
        assert readable.instrumentation_scope.name == OWN_SCOPE
        record = readable.log_record
        assert record.event_name == "gen_ai.evaluation.result"
        assert record.trace_id == agent_span.context.trace_id
        assert record.span_id == agent_span.context.span_id
        assert record.severity_number == SeverityNumber.INFO
        assert record.timestamp == eval_span.end_time
        attributes = dict(record.attributes)
        details = attributes.pop("agent_eval.details", None)
        got.append((attributes, None if details is None else json.loads(details)))
    expected = []
    for evaluator, label, score, explanation, details in EXPECTED_RESULTS[agent]:
        attributes = {
            "gen_ai.evaluation.name": evaluator,
            "gen_ai.evaluation.score.label": label,
            "gen_ai.evaluation.explanation": explanation,
            "gen_ai.agent.name": agent,
            "agent_eval.result_id": result_id(hex_trace(agent_span), hex_span(agent_span), evaluator, VERSIONS[evaluator]),
            "agent_eval.evaluator.version": VERSIONS[evaluator],
            "agent_eval.service.name": SERVICE,
        }
        if score is not None:
            attributes["gen_ai.evaluation.score.value"] = score
        expected.append((attributes, details or None))
    assert got == expected


def test_log_records_total(run: Run) -> None:
    assert len(run.telemetry.logs()) == len(AGENTS) * len(EVALUATORS)


# --- Prometheus ----------------------------------------------------------------------------------


def test_prometheus_result_samples(run: Run, metric_samples: Callable[..., Any]) -> None:
    m = metric_samples(run.registry)
    assert m.by_labels("agent_eval_results_total", "evaluator", "agent", "outcome") == {
        (evaluator, agent, label): 1.0 for agent, rows in EXPECTED_RESULTS.items() for evaluator, label, *_ in rows
    }
    scored = {(evaluator, agent): score for agent, rows in EXPECTED_RESULTS.items()
              for evaluator, _, score, *_ in rows if score is not None}
    assert len(scored) == 19  # every result but payment_agent's skipped tool_call_accuracy
    assert m.by_labels("agent_eval_score_count", "evaluator", "agent") == dict.fromkeys(scored, 1.0)
    assert m.by_labels("agent_eval_score_sum", "evaluator", "agent") == scored
    assert m.by_labels("agent_eval_score_bucket", "evaluator", "agent", "le") == {
        (evaluator, agent, le): (1.0 if le == "+Inf" or score <= float(le) else 0.0)
        for (evaluator, agent), score in scored.items()
        for le in SCORE_BUCKETS
    }
    # Spot checks, written out: the 0.25 of search_agent lands in le=0.3, not le=0.2.
    assert m.value("agent_eval_score_bucket", evaluator="tool_call_accuracy", agent="search_agent", service="unknown", le="0.2") == 0.0
    assert m.value("agent_eval_score_bucket", evaluator="tool_call_accuracy", agent="search_agent", service="unknown", le="0.3") == 1.0
    assert m.value("agent_eval_score_bucket", evaluator="tool_call_accuracy", agent="payment_agent", service="unknown", le="+Inf") is None
    assert m.by_labels("agent_eval_evaluation_duration_seconds_count", "evaluator") == dict.fromkeys(
        [(e,) for e in EVALUATORS], float(len(AGENTS))
    )


def test_prometheus_pipeline_samples(run: Run, metric_samples: Callable[..., Any]) -> None:
    m = metric_samples(run.registry)
    framework_spans = sum(SPANS_PER_RUN.values())
    assert framework_spans == 29
    # Every span that ended on the provider: pydantic-ai's and the processor's own evaluation spans.
    assert len(run.telemetry.spans()) == framework_spans + len(AGENTS)
    assert m.value("agent_eval_spans_received_total") == framework_spans + len(AGENTS)
    # Kept: the GenAI spans only, never the evaluation spans.
    assert m.value("agent_eval_spans_kept_total") == framework_spans
    assert m.value("agent_eval_late_spans_total") == 0.0
    assert m.value("agent_eval_processor_errors_total") == 0.0
    assert m.by_labels("agent_eval_spans_dropped_total", "reason") == {("intake_full",): 0.0, ("already_shutdown",): 0.0}
    completed = m.by_labels("agent_eval_traces_completed_total", "reason")
    # Flushed right after the runs: each trace completes by its root (settle delay passed) or by the flush.
    assert set(completed) <= {("root_ended",), ("flush",)}, completed
    assert sum(completed.values()) == len(AGENTS)
    assert m.by_labels("agent_eval_agent_traces_total", "agent") == {(a,): 1.0 for a in AGENTS}
    assert m.by_labels("agent_eval_traces_evaluated_total", "agent") == {(a,): 1.0 for a in AGENTS}
    assert m.by_labels("agent_eval_sampling_decisions_total", "decision", "reason") == {
        ("sampled", "ratio"): 3.0,
        ("sampled", "tool_failure"): 2.0,
    }
    assert sorted(SAMPLING_REASON.values()) == ["ratio"] * 3 + ["tool_failure"] * 2
    assert m.by_labels("agent_eval_dropped_total", "reason") == {}
    assert m.by_labels("agent_eval_evaluator_errors_total", "evaluator", "reason") == {}
    assert m.by_labels("agent_eval_sink_errors_total", "sink") == {}
    assert m.value("agent_eval_queue_depth") == 0.0
    assert m.value("agent_eval_buffered_traces") == 0.0


def test_score_histogram_exemplars_carry_the_trace_id(run: Run, metric_samples: Callable[..., Any]) -> None:
    m = metric_samples(run.registry, openmetrics=True)
    for agent, rows in EXPECTED_RESULTS.items():
        trace_id = hex_trace(run.agent_spans[agent])
        for evaluator, _, score, *_ in rows:
            with_exemplar = [
                s for s in m.samples
                if s.name == "agent_eval_score_bucket" and s.exemplar is not None
                and s.labels["evaluator"] == evaluator and s.labels["agent"] == agent
            ]
            if score is None:
                assert with_exemplar == []
                continue
            assert len(with_exemplar) == 1, (agent, evaluator, with_exemplar)
            (sample,) = with_exemplar
            assert sample.exemplar.labels == {"trace_id": trace_id}
            assert sample.exemplar.value == score
            smallest_le = min(float(le) for le in SCORE_BUCKETS[:-1] if score <= float(le))
            assert float(sample.labels["le"]) == smallest_le


# --- the processor never evaluates its own spans -------------------------------------------------


def test_own_spans_are_never_evaluated(run: Run, metric_samples: Callable[..., Any]) -> None:
    """Evaluation spans end on the same provider (and carry gen_ai.agent.name): they must be ignored,
    however often the processor is flushed."""
    assert len(run.telemetry.spans(OWN_SCOPE)) == len(AGENTS)
    assert run.spans_after_first_flush == len(run.telemetry.spans())  # the 2nd flush emitted nothing
    assert run.logs_after_first_flush == len(run.telemetry.logs())
    assert run.processor.force_flush(10_000) is True  # a third time, for good measure
    own = run.telemetry.spans(OWN_SCOPE)
    assert sorted(s.name for s in own) == sorted(f"evaluate_agent {a}" for a in AGENTS)
    for agent in AGENTS:
        assert len(run.own_spans(agent)) == 1
    assert len(run.recorder.evaluated) == len(AGENTS)
    assert sorted(e.trace.agent_name for e in run.recorder.evaluated) == sorted(AGENTS)
    m = metric_samples(run.registry)
    assert m.value("agent_eval_spans_kept_total") == sum(SPANS_PER_RUN.values())
    assert sum(m.by_labels("agent_eval_traces_completed_total", "reason").values()) == len(AGENTS)
    assert m.by_labels("agent_eval_traces_evaluated_total", "agent") == {(a,): 1.0 for a in AGENTS}


def test_assemble_ignores_own_evaluation_spans(run: Run) -> None:
    everything = run.telemetry.spans()  # pydantic-ai spans + evaluation spans, as a backend would hold them
    assert [dump(t) for t in assemble(everything)] == [
        dump(t) for t in assemble(run.telemetry.spans(exclude_scope=OWN_SCOPE))
    ]


# --- tool_argument_validity on the tool definitions pydantic-ai records -----------------------------


@pytest.mark.parametrize("agent", AGENTS)
def test_tool_argument_validity_reads_the_recorded_definitions(run: Run, agent: str) -> None:
    from otel_agent_eval.evaluators import ToolArgumentValidity

    (evaluated,) = run.evaluated(agent)
    trace = evaluated.trace
    assert trace.tool_definitions, "pydantic-ai records gen_ai.tool.definitions"
    (valid,) = ToolArgumentValidity().evaluate(trace)
    assert (valid.label, valid.score) == ("pass", 1.0), valid.explanation  # pydantic-ai validated them itself
    # The same run with one call's arguments broken: a wrong type fails, naming the argument.
    step = next(s for s in trace.steps if s.tool_calls)
    call = step.tool_calls[0]
    broken = {**call.arguments, next(iter(call.arguments)): [1, 2]} if call.arguments else {"unexpected": [1, 2]}
    steps = [s.model_copy(update={"tool_calls": [call.model_copy(update={"arguments": broken}), *s.tool_calls[1:]]})
             if s is step else s for s in trace.steps]
    (invalid,) = ToolArgumentValidity().evaluate(trace.model_copy(update={"steps": steps}))
    assert invalid.label == "fail" and invalid.score < 1.0 and "arguments" in invalid.explanation
