"""Acceptance: LangGraph ``create_react_agent`` runs traced by LangSmith's own OTel export (``langsmith`` 0.15,
``Client(tracing_mode="otel", otel_tracer_provider=...)``: LangChain's tracer writes each run as a span of the app's
provider, no LangSmith server), with the scripted model of ``tests/frameworks/langgraph_scenarios.py`` and the
processor installed (``tests/frameworks/langgraph_run.py``).

What the export writes (0.15.1): a span per LangChain run, ``langsmith.span.kind`` ``chain`` / ``llm`` / ``tool`` /
``prompt``, with ``gen_ai.operation.name`` ``chain`` / ``chat`` / ``execute_tool`` (``chat`` for a prompt template
too); each run's inputs and outputs as JSON in ``gen_ai.prompt`` / ``gen_ai.completion``: a chat model's
``{"messages": [[<dumpd messages>]]}`` and its ``LLMResult`` ``{"generations": [[{"text", "message"}]]}``, a tool's
arguments and ``{"output": <the ToolMessage's fields>}``, a graph's state ``{"messages": [...]}``; LangGraph's
metadata as ``langsmith.metadata.langgraph_node`` / ``langgraph_checkpoint_ns`` (the outermost node task's
namespace, inside a sub-graph too); a handoff's ``ParentCommand`` as an exception event of type ``Exception``.

What this found: the run's task and answer were the raw JSON of the first prompt and of the last ``LLMResult``, a
tool's result its ``{"output": ...}`` wrapper, a prompt template a model call, sub-agents not found and handoffs
errors. Now each scenario assembles as under OpenInference, but for ``{}`` where a call was made with no arguments
(OpenInference records none). Also LangSmith's manual tracing of a hand-written loop (``wrap_openai``, whose model
calls record the OpenAI ChatCompletion, and ``@traceable`` tools), read as raw JSON before.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("langsmith")

from otel_agent_eval import ToolExpectation
from tests.frameworks import langgraph_scenarios as sc
from tests.frameworks.fidelity import LANGGRAPH_LANGSMITH, by_param, fidelity
from tests.frameworks.harness import assemble_with_logs, differences, shape
from tests.frameworks.langgraph_run import (
    LangGraphRun,
    LangSmithOtel,
    assembled_shapes,
    assert_researcher_results,
    instrumented_run,
    no_empty_arguments,
)
from tests.openai_server import FakeOpenAI, text, tool_calls

EXPECTATIONS = [ToolExpectation(agent="researcher", expected_tools=["search", "fetch_page"])]


def langsmith_run(scenario: Any, expectations: list[ToolExpectation]) -> Iterator[LangGraphRun]:
    return instrumented_run(scenario, expectations, instrumentor=LangSmithOtel)


@pytest.fixture(scope="module")
def run() -> Iterator[LangGraphRun]:
    yield from langsmith_run(sc.run_researcher, EXPECTATIONS)


def test_the_export_is_what_the_module_says(run: LangGraphRun) -> None:
    """The shapes read: no OpenInference or OpenLLMetry attribute, LangSmith's kinds, JSON payloads."""
    spans = run.spans
    assert run.output == sc.ANSWER and run.flushed is True
    assert not any(k.startswith(("openinference.", "traceloop.", "llm.")) for s in spans for k in s.attributes)
    kinds = {s.name: s.attributes["langsmith.span.kind"] for s in spans}
    assert kinds["researcher"] == "chain" and kinds["ScriptedToolModel"] == "llm" and kinds["search"] == "tool"
    [first_search] = [s for s in spans if s.attributes.get("gen_ai.tool.call.id") == "call_search_1"]
    assert first_search.attributes["gen_ai.prompt"] == '{"query":"x"}'
    assert first_search.attributes["gen_ai.completion"].startswith('{"output":{"content":"no results"')
    model = next(s for s in spans if s.name == "ScriptedToolModel")
    assert model.attributes["gen_ai.completion"].startswith('{"generations":[[')


@fidelity(LANGGRAPH_LANGSMITH, "parallel tools", "loop of identical calls")
def test_assembled_and_evaluated_as_under_openinference(run: LangGraphRun) -> None:
    openinference = assembled_shapes(instrumented_run, sc.run_researcher)
    assembled = [shape(t) for t in assemble_with_logs(run.spans, run.telemetry.logs())]
    evaluated = [shape(e.trace) for e in run.recorder.evaluated]
    assert assembled == openinference, "\n".join(differences(assembled, openinference))
    assert evaluated == openinference, "\n".join(differences(evaluated, openinference))
    [researcher] = evaluated
    assert (researcher["input"], researcher["final_output"]) == (sc.QUESTION, sc.ANSWER)


def test_processor_results(run: LangGraphRun, metric_samples: Any) -> None:
    assert_researcher_results(run, metric_samples(run.registry))


@pytest.mark.parametrize("scenario", [sc.run_team, sc.run_handoff_team], ids=["supervisor", "handoff_tools"])
@fidelity(LANGGRAPH_LANGSMITH, by_param("scenario", {sc.run_team: "subgraphs as nodes",
                                                     sc.run_handoff_team: "handoff tools (`transfer_to_*`)"}))
def test_multi_agent_runs_assemble_as_under_openinference(scenario: Any) -> None:
    """A sub-graph's spans carry the outer node task's namespace (``research:<id>``) with their own node
    (``agent``): each sub-agent is still found, a child of the step that sent it work; a handoff's
    ``ParentCommand`` (an ``Exception`` event) is no failure."""
    langsmith = assembled_shapes(langsmith_run, scenario)
    openinference = assembled_shapes(instrumented_run, scenario)
    assert no_empty_arguments(langsmith) == no_empty_arguments(openinference), "\n".join(
        differences(langsmith, openinference))
    [top] = langsmith
    shape_of = (top["agent_name"], len(top["steps"]), top["status"], top["final_output"],
                [(c["agent_name"], len(c["steps"]), c["parent_step_index"]) for c in top["children"]])
    first = "team" if scenario is sc.run_team else "supervisor"
    assert shape_of == (first, 3, "ok", sc.TEAM_ANSWER, [("research_expert", 2, 0), ("writer", 2, 1)])


def test_with_inputs_and_outputs_hidden_the_steps_and_calls_remain() -> None:
    """``hide_inputs`` / ``hide_outputs`` (``LANGSMITH_HIDE_INPUTS`` / ``_OUTPUTS``): every payload is written as
    ``{}``. That is no message, no arguments and no result: task, texts, arguments and results are unknown (None),
    not the text ``[{}]`` nor ``{}`` arguments a validity check would fail; the turns and each call, by its id,
    remain."""
    runs = instrumented_run(sc.run_researcher, EXPECTATIONS, instrumentor=lambda: LangSmithOtel(hide_content=True))
    done = next(runs)
    try:
        assert {s.attributes.get("gen_ai.completion") for s in done.spans} == {"{}"}  # the setup: all hidden
        [researcher] = [e.trace for e in done.recorder.evaluated]
    finally:
        runs.close()
    assert (researcher.agent_name, researcher.input, researcher.final_output) == ("researcher", None, None)
    # With the requests hidden, a step's calls are in the order their tool spans started: the first turn's two
    # calls run in parallel (LangGraph's ToolNode), so either may start first. Compared by call id within a step.
    assert [sorted((c.call_id, c.name, c.arguments, c.result) for c in s.tool_calls) for s in researcher.steps] == [
        [("call_fetch_1", "fetch_page", None, None), ("call_search_1", "search", None, None)],
        [("call_search_2", "search", None, None)], [("call_search_3", "search", None, None)], []]
    assert all(s.thought is None and s.output is None for s in researcher.steps)


WEATHER_TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def run_openai_tool_loop() -> str:
    """A hand-written tool loop traced with LangSmith alone: the OpenAI client wrapped by ``wrap_openai``, the agent
    and its tool ``@traceable``, against a real HTTP server speaking the OpenAI API (one tool call, then an answer)."""
    import openai
    from langsmith import traceable
    from langsmith.wrappers import wrap_openai

    @traceable(run_type="tool", name="get_weather")
    def get_weather(city: str) -> str:
        return f"sunny in {city}"

    script = [tool_calls(("call_w1", "get_weather", {"city": "Paris"})), text("It is sunny in Paris.")]
    with FakeOpenAI(script=script) as server:
        client = wrap_openai(openai.OpenAI(base_url=server.base_url, api_key="test"))

        @traceable(run_type="chain", name="weather-agent")
        def agent(question: str) -> str:
            messages: list[Any] = [{"role": "user", "content": question}]
            while True:
                message = client.chat.completions.create(model="gpt-test", messages=messages,
                                                         tools=WEATHER_TOOLS).choices[0].message
                if not message.tool_calls:
                    return str(message.content)
                messages.append(message.model_dump(exclude_none=True))
                for call in message.tool_calls:
                    result = get_weather(**json.loads(call.function.arguments))
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})

        return agent("Weather in Paris?")


def test_an_openai_tool_loop_traced_by_wrap_openai_and_traceable() -> None:
    """``wrap_openai`` records a model call's request as ``gen_ai.prompt`` (OpenAI messages) and its ChatCompletion
    as ``gen_ai.completion`` (``{"id", "choices": [{"message"}], ...}``), which was read as raw JSON for the step's
    text and the final response. Now the messages in ``choices`` are read; the ``@traceable`` tool's result is
    unwrapped from ``{"output": ...}``."""
    expectations = [ToolExpectation(agent="weather-agent", expected_tools=["get_weather"])]
    runs = instrumented_run(run_openai_tool_loop, expectations, instrumentor=LangSmithOtel)
    done = next(runs)
    try:
        assert done.output == "It is sunny in Paris."
        [evaluated] = done.recorder.evaluated
    finally:
        runs.close()
    trace = evaluated.trace
    assert (trace.agent_name, trace.input, trace.final_output) == (
        "weather-agent", "Weather in Paris?", "It is sunny in Paris.")
    assert [[(c.name, c.call_id, c.arguments, c.result) for c in s.tool_calls] for s in trace.steps] == [
        [("get_weather", "call_w1", {"city": "Paris"}, "sunny in Paris")], []]
    assert (trace.steps[0].output, trace.steps[1].output) == (None, "It is sunny in Paris.")
    assert {r.evaluator: r.label for r in evaluated.results}["tool_call_accuracy"] == "pass"
