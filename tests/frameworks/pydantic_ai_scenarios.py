"""Scripted pydantic-ai agent runs, instrumented with pydantic-ai's own OpenTelemetry support.

No network: every model is a ``FunctionModel`` whose function decides the next response from the
messages seen so far. Each public ``run_*`` function takes a ``TracerProvider`` (spans go to whatever
span processors it has) and returns the agent's final output string.

Run ``python -m tests.frameworks.pydantic_ai_scenarios`` (from the repo root) to regenerate the span
dumps in ``tests/data/pydantic_ai/<scenario>.json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent, InstrumentationSettings, ModelRetry
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

__all__ = [
    "SCENARIOS",
    "dump_spans",
    "run_loop",
    "run_weather_with_parallel_tools",
    "run_with_failing_tool",
    "run_with_unrecovered_failure",
]

WEATHER_ANSWER = "It is sunny in Paris and 10:00."
BOOKING_ANSWER = "Your flight to Rome is booked: BK-42."
UNRECOVERED_ANSWER = "I'm sorry, I could not process the payment: the payment service is unavailable."
LOOP_ANSWER = "I could not find anything about x."


def _instrumentation(tp: TracerProvider) -> Instrumentation:
    # pydantic-ai 2.x has no ``Agent(instrument=...)`` argument: instrumentation is a capability
    # (``Agent.instrument_all`` would set a process-wide default instead). Default data-format
    # version (5 in 2.68); content lands on span attributes, no event logger / logger provider.
    return Instrumentation(settings=InstrumentationSettings(tracer_provider=tp, include_content=True))


def _responses(messages: list[ModelMessage]) -> int:
    """How many model responses the conversation already holds (= index of the current turn)."""
    return sum(isinstance(m, ModelResponse) for m in messages)


def _last_request_parts(messages: list[ModelMessage]) -> list[Any]:
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    return list(last.parts)


def _is_retry(part: Any) -> bool:
    if isinstance(part, RetryPromptPart):
        return True
    return isinstance(part, ToolReturnPart) and getattr(part, "outcome", "success") == "retried"


# --- 1. parallel tool calls ---------------------------------------------------------------------


def run_weather_with_parallel_tools(tp: TracerProvider) -> str:
    """Turn 1: get_weather + get_time for Paris in one response. Turn 2: final text."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if _responses(messages) == 0:
            return ModelResponse(
                parts=[
                    ToolCallPart("get_weather", {"city": "Paris"}, tool_call_id="call_weather_1"),
                    ToolCallPart("get_time", {"city": "Paris"}, tool_call_id="call_time_1"),
                ]
            )
        returns = {p.tool_name: p.content for p in _last_request_parts(messages) if isinstance(p, ToolReturnPart)}
        assert returns == {"get_weather": "sunny, 21C", "get_time": "10:00"}, returns
        return ModelResponse(parts=[TextPart(WEATHER_ANSWER)])

    agent = Agent(
        FunctionModel(model, model_name="scripted-weather"),
        name="weather_agent",
        instructions="You answer questions about the weather.",
        capabilities=[_instrumentation(tp)],
    )

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        return "sunny, 21C"

    @agent.tool_plain
    def get_time(city: str) -> str:
        """Local time in a city."""
        return "10:00"

    return agent.run_sync("What is the weather and time in Paris?").output


# --- 2. failed tool call, recovered -------------------------------------------------------------


def run_with_failing_tool(tp: TracerProvider) -> str:
    """book_flight raises ModelRetry on its first call, succeeds on the second, then a final text."""
    calls: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = _responses(messages)
        if turn == 0:
            return ModelResponse(parts=[ToolCallPart("book_flight", {"destination": "Rome"}, tool_call_id="call_book_1")])
        if turn == 1:
            # pydantic-ai 2.x hands a ModelRetry back as the call's own ToolReturnPart with
            # outcome='retried' (older versions: a RetryPromptPart).
            parts = _last_request_parts(messages)
            assert any(_is_retry(p) for p in parts), parts
            return ModelResponse(parts=[ToolCallPart("book_flight", {"destination": "Rome"}, tool_call_id="call_book_2")])
        return ModelResponse(parts=[TextPart(BOOKING_ANSWER)])

    agent = Agent(
        FunctionModel(model, model_name="scripted-booking"),
        name="booking_agent",
        instructions="You book flights.",
        retries=2,
        capabilities=[_instrumentation(tp)],
    )

    @agent.tool_plain
    def book_flight(destination: str) -> str:
        """Book a flight to the destination."""
        calls.append(destination)
        if len(calls) == 1:
            raise ModelRetry("no seats left")
        return "booked BK-42"

    return agent.run_sync("Book me a flight to Rome.").output


# --- 3. failed tool call, not recovered ---------------------------------------------------------


def run_with_unrecovered_failure(tp: TracerProvider) -> str:
    """charge_card always raises ModelRetry; after the retry prompt the model gives up with an apology."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if _responses(messages) == 0:
            return ModelResponse(
                parts=[ToolCallPart("charge_card", {"amount_eur": 120}, tool_call_id="call_charge_1")]
            )
        assert any(_is_retry(p) for p in _last_request_parts(messages)), messages[-1]
        return ModelResponse(parts=[TextPart(UNRECOVERED_ANSWER)])

    agent = Agent(
        FunctionModel(model, model_name="scripted-payment"),
        name="payment_agent",
        instructions="You take payments.",
        retries=2,
        capabilities=[_instrumentation(tp)],
    )

    @agent.tool_plain
    def charge_card(amount_eur: int) -> str:
        """Charge the customer's card."""
        raise ModelRetry("payment service unavailable")

    return agent.run_sync("Charge 120 EUR to my card.").output


# --- 4. loop: identical tool call 4 times -------------------------------------------------------


def run_loop(tp: TracerProvider) -> str:
    """The model calls search(query="x") with identical args in 4 consecutive turns, then answers."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = _responses(messages)
        if turn < 4:
            return ModelResponse(
                parts=[ToolCallPart("search", {"query": "x"}, tool_call_id=f"call_search_{turn + 1}")]
            )
        return ModelResponse(parts=[TextPart(LOOP_ANSWER)])

    agent = Agent(
        FunctionModel(model, model_name="scripted-search"),
        name="search_agent",
        instructions="You search things.",
        capabilities=[_instrumentation(tp)],
    )

    @agent.tool_plain
    def search(query: str) -> str:
        """Search the web."""
        return "no results"

    return agent.run_sync("Find x.").output


SCENARIOS: dict[str, Callable[[TracerProvider], str]] = {
    "weather_with_parallel_tools": run_weather_with_parallel_tools,
    "with_failing_tool": run_with_failing_tool,
    "with_unrecovered_failure": run_with_unrecovered_failure,
    "loop": run_loop,
}


# --- dumps ---------------------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    return value


def _span_dict(span: ReadableSpan) -> dict[str, Any]:
    ctx = span.get_span_context()
    return {
        "name": span.name,
        "span_id": format(ctx.span_id, "016x"),
        "parent_span_id": format(span.parent.span_id, "016x") if span.parent else None,
        "trace_id": format(ctx.trace_id, "032x"),
        "start": span.start_time,
        "end": span.end_time,
        "kind": span.kind.name,
        "status": {"code": span.status.status_code.name, "description": span.status.description},
        "attributes": {k: _jsonable(v) for k, v in (span.attributes or {}).items()},
        "events": [
            {"name": e.name, "attributes": {k: _jsonable(v) for k, v in (e.attributes or {}).items()}}
            for e in span.events
        ],
        "scope": {"name": span.instrumentation_scope.name, "version": span.instrumentation_scope.version}
        if span.instrumentation_scope
        else None,
    }


def run_and_capture(scenario: Callable[[TracerProvider], str]) -> tuple[str, list[ReadableSpan]]:
    """Run a scenario against a fresh TracerProvider with an in-memory exporter."""
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        output = scenario(tp)
    finally:
        tp.shutdown()
    return output, sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)


def dump_spans(directory: Path | None = None) -> dict[str, Path]:
    directory = directory or Path(__file__).resolve().parent.parent / "data" / "pydantic_ai"
    directory.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for name, scenario in SCENARIOS.items():
        _, spans = run_and_capture(scenario)
        path = directory / f"{name}.json"
        path.write_text(json.dumps([_span_dict(s) for s in spans], indent=2, ensure_ascii=False) + "\n")
        written[name] = path
    return written


if __name__ == "__main__":
    for name, path in dump_spans().items():
        print(f"{name}: {path}")
