"""Acceptance (issue 15): smolagents ``ToolCallingAgent`` and ``CodeAgent`` with OpenInference's
``SmolagentsInstrumentor``, every model call a real chat completions request to the scripted local
server (``tests/frameworks/smolagents_scenarios.py``).

OpenInference tree: ``{agent name}.run`` (AGENT; ``input.value`` the bound ``run`` arguments as JSON,
``{"task": ..., "stream": ..., ...}``) -> ``Step {n}`` (CHAIN, one per model response) ->
``OpenAIModel.generate`` (LLM) and the tools run for it (TOOL, named after the tool's class). A
managed agent's ``{name}.run`` is a child of the manager's step, with no TOOL span for the call the
manager's model made: that run is the call (assembly rule 4). Tool spans record the call envelope ``{"args": [...],
"sanitize_inputs_outputs": ..., "kwargs": {...}}`` and no call id; a tool that raised ends ERROR
with an exception event (and no ``output.value``). A CodeAgent's model writes Python code in its text
(no tool calls): its step is the model response and the tools that code ran.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from prometheus_client import CollectorRegistry

pytest.importorskip("smolagents")
pytest.importorskip("openinference.instrumentation.smolagents")

from openinference.instrumentation.smolagents import SmolagentsInstrumentor

from otel_agent_eval import AgentTrace, install
from tests.conftest import Telemetry, make_telemetry
from tests.frameworks import smolagents_scenarios as sc
from tests.frameworks.fidelity import SMOLAGENTS_CODE, SMOLAGENTS_TOOL_CALLING, fidelity
from tests.frameworks.harness import (
    OWN_SCOPE,
    RecordingSink,
    assemble_with_logs,
    assert_traces,
    call,
    check_processor_evaluated,
    hex_span,
    only,
    step,
    steps_in_order,
    trace,
)
from tests.openai_server import FakeOpenAI, counted_usage, scripted

TOOL_ERROR = "RuntimeError: Chez Test is fully booked"


def usage_of(n: int) -> tuple[int, int]:
    """The usage the server reports for its n-th request (``counted_usage``)."""
    return counted_usage(n, {}, "")


@dataclass
class Run:
    telemetry: Telemetry
    output: str
    server: FakeOpenAI
    recorder: RecordingSink
    registry: CollectorRegistry
    flushed: bool

    @property
    def spans(self) -> list[ReadableSpan]:
        return self.telemetry.spans(exclude_scope=OWN_SCOPE)

    def traces(self) -> list[AgentTrace]:
        return assemble_with_logs(self.spans)

    def llms(self, model: str) -> list[ReadableSpan]:
        """The model's LLM spans, in order."""
        return [s for s in self.spans if s.attributes.get("openinference.span.kind") == "LLM"
                and s.attributes.get("llm.model_name") == model]  # generate or generate_stream

    def tools(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.attributes.get("tool.name") == name]

    def agent(self, name: str) -> ReadableSpan:
        return only(self.spans, lambda s: s.name == f"{name}.run")

    def usage(self, llm: ReadableSpan) -> tuple[int, int]:
        return int(llm.attributes["llm.token_count.prompt"]), int(llm.attributes["llm.token_count.completion"])


def scripted_run(script: dict, scenario: Callable[[FakeOpenAI], str]) -> Iterator[Run]:
    """The scenario traced by OpenInference, with the processor installed on the same provider."""
    telemetry = make_telemetry()
    registry = CollectorRegistry()
    processor = install(telemetry.tracer_provider, telemetry.logger_provider, registry=registry, settle_delay_seconds=0.05)
    recorder = RecordingSink()
    processor.pipeline.sinks.append(recorder)
    instrumentor = SmolagentsInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.tracer_provider)
    try:
        with scripted(script) as server:
            output = scenario(server)
            assert server.errors == []
    finally:
        instrumentor.uninstrument()
    flushed = processor.force_flush(10_000)
    try:
        yield Run(telemetry, output, server, recorder, registry, flushed)
    finally:
        telemetry.shutdown()


@pytest.fixture(scope="module", params=[False, True], ids=["blocking", "streamed"])
def tool_calling(request: pytest.FixtureRequest) -> Iterator[Run]:
    yield from scripted_run(sc.TOOL_CALLING_SCRIPT, lambda server: sc.run_tool_calling(server, stream=request.param))


@pytest.fixture(scope="module")
def code() -> Iterator[Run]:
    yield from scripted_run(sc.CODE_SCRIPT, sc.run_code)


TOOL_CALLING_SCENARIOS = ("parallel tools", "failing tool", "managed agent", "`final_answer`")
"""docs/fidelity.md's scenarios of the ToolCallingAgent run."""

# -- ToolCallingAgent ------------------------------------------------------------------------------


def by_city(spans: Sequence[ReadableSpan], city: str) -> ReadableSpan:
    return only(spans, lambda s: city in str(s.attributes.get("input.value", "")))


def expected_tool_calling(run: Run) -> list[AgentTrace]:
    p, w = run.llms(sc.PLANNER_MODEL), run.llms(sc.WEATHER_MODEL)
    assert (len(p), len(w)) == (4, 2)
    weather, book = run.tools("get_weather"), run.tools("book_table")
    finals = run.tools("final_answer")
    planner, sub = run.agent("planner"), run.agent("weather_agent")
    sub_task = json.loads(sub.attributes["input.value"])["task"]
    weather_trace = trace(sub, "weather_agent", input=sub_task, final_output=sc.WEATHER_ANSWER, steps=[
        step(0, w[0], [call(weather[2], "get_weather", {"city": "Oslo"}, "rainy, 8C", call_id="call_oslo")],
             model=sc.WEATHER_MODEL, usage=usage_of(3)),
        step(1, w[1], [call(finals[0], "final_answer", {"answer": sc.WEATHER_ANSWER}, sc.WEATHER_ANSWER,
                            call_id="call_weather_final")], model=sc.WEATHER_MODEL, usage=usage_of(4)),
    ], parent_step_index=2)
    managed = call(sub, "weather_agent", {"task": sc.WEATHER_TASK}, sc.WEATHER_ANSWER, call_id="call_ask")
    return [trace(planner, "planner", input=sc.QUESTION, final_output=sc.FINAL_ANSWER, steps=[
        # the two parallel calls run on threads and may start either way round: their spans by city
        step(0, p[0], [call(by_city(weather[:2], "Paris"), "get_weather", {"city": "Paris"}, "sunny, 21C", call_id="call_paris"),
                       call(by_city(weather[:2], "Rome"), "get_weather", {"city": "Rome"}, "sunny, 25C", call_id="call_rome")],
             model=sc.PLANNER_MODEL, usage=usage_of(0)),
        step(1, p[1], [call(book[0], "book_table", {"restaurant": "Chez Test", "people": 2}, None,
                            call_id="call_book", error=TOOL_ERROR)], model=sc.PLANNER_MODEL, usage=usage_of(1)),
        step(2, p[2], [managed], model=sc.PLANNER_MODEL, usage=usage_of(2)),
        step(3, p[3], [call(finals[1], "final_answer", {"answer": sc.FINAL_ANSWER}, sc.FINAL_ANSWER,
                            call_id="call_final")], model=sc.PLANNER_MODEL, usage=usage_of(5)),
    ], children=[weather_trace])]


def test_tool_calling_run_ended_with_the_scripted_answer(tool_calling: Run) -> None:
    assert tool_calling.output == sc.FINAL_ANSWER
    streamed = {bool(r.body.get("stream")) for r in tool_calling.server.requests}
    llm_names = {s.name for s in tool_calling.llms(sc.PLANNER_MODEL)}
    assert llm_names == ({"OpenAIModel.generate_stream"} if streamed == {True} else {"OpenAIModel.generate"})
    book = only(tool_calling.spans, lambda s: s.attributes.get("tool.name") == "book_table")
    assert book.status.status_code.name == "ERROR" and [e.name for e in book.events] == ["exception"]
    assert json.loads(book.attributes["input.value"])["sanitize_inputs_outputs"] is True  # the envelope


@fidelity(SMOLAGENTS_TOOL_CALLING, *TOOL_CALLING_SCENARIOS)
def test_tool_calling_one_step_per_model_response(tool_calling: Run) -> None:
    """``Step n`` CHAIN spans are not steps of their own, nor are they tool calls."""
    steps = steps_in_order(tool_calling.traces(), tool_calling.spans)
    llms = sorted(tool_calling.llms(sc.PLANNER_MODEL) + tool_calling.llms(sc.WEATHER_MODEL), key=lambda s: s.start_time)
    assert [s.span_ids[0] for s in steps] == [hex_span(llm) for llm in llms]


@fidelity(SMOLAGENTS_TOOL_CALLING, "parallel tools")
def test_tool_calling_arguments_are_the_requested_ones(tool_calling: Run) -> None:
    """Unwrapped from ``{"args": [], "sanitize_inputs_outputs": true, "kwargs": {...}}``; parallel
    calls in one step, each matched to its call id."""
    steps = steps_in_order(tool_calling.traces(), tool_calling.spans)
    assert [[(c.name, c.arguments, c.call_id) for c in s.tool_calls] for s in steps] == [
        [("get_weather", {"city": "Paris"}, "call_paris"), ("get_weather", {"city": "Rome"}, "call_rome")],
        [("book_table", {"restaurant": "Chez Test", "people": 2}, "call_book")],
        [("weather_agent", {"task": sc.WEATHER_TASK}, "call_ask")],
        [("get_weather", {"city": "Oslo"}, "call_oslo")],
        [("final_answer", {"answer": sc.WEATHER_ANSWER}, "call_weather_final")],
        [("final_answer", {"answer": sc.FINAL_ANSWER}, "call_final")],
    ]


@fidelity(SMOLAGENTS_TOOL_CALLING, "failing tool")
def test_tool_calling_failed_tool_is_an_error(tool_calling: Run) -> None:
    (book,) = [c for s in steps_in_order(tool_calling.traces(), tool_calling.spans) for c in s.tool_calls
               if c.name == "book_table"]
    assert (book.error, book.executed) == (TOOL_ERROR, True)


@fidelity(SMOLAGENTS_TOOL_CALLING, "managed agent")
def test_tool_calling_agents_are_named_with_their_task_and_answer(tool_calling: Run) -> None:
    """``planner.run`` is the agent ``planner``; its input the user's task, not the ``run`` arguments."""
    (planner,) = tool_calling.traces()
    (sub,) = planner.children
    assert (planner.agent_name, planner.input, planner.final_output) == ("planner", sc.QUESTION, sc.FINAL_ANSWER)
    assert (sub.agent_name, sub.final_output, sub.parent_step_index) == ("weather_agent", sc.WEATHER_ANSWER, 2)
    assert sc.WEATHER_TASK in (sub.input or "")  # smolagents wraps the manager's task in its own prompt


@fidelity(SMOLAGENTS_TOOL_CALLING, *TOOL_CALLING_SCENARIOS)
def test_tool_calling_agent_tree(tool_calling: Run) -> None:
    """The managed agent is a child of the step that called it, and its run is that call: the
    requested ``weather_agent`` call has no TOOL span, the sub-agent's AGENT span executes it."""
    assert_traces(tool_calling.traces(), expected_tool_calling(tool_calling))


# -- CodeAgent -------------------------------------------------------------------------------------


def expected_code(run: Run) -> list[AgentTrace]:
    llms = run.llms(sc.CODER_MODEL)
    weather, book, final = run.tools("get_weather"), run.tools("book_table"), run.tools("final_answer")
    texts = [r.content for r in sc.CODE_SCRIPT[sc.CODER_MODEL]]
    return [trace(run.agent("coder"), "coder", input=sc.QUESTION, final_output=sc.FINAL_ANSWER, steps=[
        # The code's tool calls, with the arguments the tool spans record: no call ids in code.
        step(0, llms[0], [call(weather[0], "get_weather", {"city": "Paris"}, "sunny, 21C", call_id=None),
                          call(weather[1], "get_weather", {"city": "Rome"}, "sunny, 25C", call_id=None)],
             model=sc.CODER_MODEL, usage=usage_of(0), thought=texts[0]),
        step(1, llms[1], [call(book[0], "book_table", {"restaurant": "Chez Test", "people": 2}, None, call_id=None,
                               error=TOOL_ERROR)], model=sc.CODER_MODEL, usage=usage_of(1), thought=texts[1]),
        # final_answer("...") called positionally: named after the tool's parameter.
        step(2, llms[2], [call(final[0], "final_answer", {"answer": sc.FINAL_ANSWER}, sc.FINAL_ANSWER, call_id=None)],
             model=sc.CODER_MODEL, usage=usage_of(2), thought=texts[2]),
    ])]


def test_code_run_ended_with_the_scripted_answer(code: Run) -> None:
    assert code.output == sc.FINAL_ANSWER
    final = only(code.spans, lambda s: s.attributes.get("tool.name") == "final_answer")
    assert json.loads(final.attributes["input.value"])["args"] == [sc.FINAL_ANSWER]  # positional, in code


@fidelity(SMOLAGENTS_CODE, "two calls in one code block", "failing tool", "positional `final_answer(...)`")
def test_code_agent_steps(code: Run) -> None:
    """A step per model response; its tool calls are the tool spans its code ran, requested (in code)
    and without the "not requested" issue a function-calling turn would get."""
    assert_traces(code.traces(), expected_code(code))


# -- the processor ---------------------------------------------------------------------------------


def test_processor_evaluated_the_tool_calling_run(tool_calling: Run, metric_samples: Any) -> None:
    check_processor_evaluated(tool_calling, {("planner",): 1.0, ("weather_agent",): 1.0}, metric_samples)


def test_processor_evaluated_the_code_run(code: Run, metric_samples: Any) -> None:
    check_processor_evaluated(code, {("coder",): 1.0}, metric_samples)
