"""Acceptance: LangGraph ``create_react_agent`` traced by OpenLLMetry's (Traceloop's) LangChain
instrumentation (``opentelemetry-instrumentation-langchain`` 0.62, ``LangchainInstrumentor``), with the
scripted fake tool-calling chat model of ``tests/frameworks/langgraph_scenarios.py`` (no network), the
real SDK and the processor installed (``tests/frameworks/langgraph_run.py``).

What the real instrumentation emits (0.62.4, ``use_attributes=True``, the default; content on unless
``TRACELOOP_TRACE_CONTENT=false``), all INTERNAL spans but the model calls (CLIENT), one trace:
``invoke_agent researcher`` (Pregel.stream wrapper: ``gen_ai.operation.name=invoke_agent``,
``gen_ai.agent.name``, no ``traceloop.*``) -> ``researcher.workflow`` (the graph's chain:
``traceloop.span.kind=workflow`` *and* ``gen_ai.operation.name=invoke_agent``) -> per turn
``execute_task agent`` (``traceloop.span.kind=task``) -> ``execute_task call_model`` / ``execute_task
RunnableSequence`` -> ``execute_task Prompt``, ``ScriptedToolModel.chat`` (``gen_ai.operation.name=chat``,
content as semconv JSON in ``gen_ai.input.messages`` / ``gen_ai.output.messages``, no indexed
``gen_ai.prompt.N.*``; ``gen_ai.request.model=unknown``, the model named only by the
``traceloop.association.properties.ls_model_name`` metadata); and per tool call ``execute_task tools`` ->
``execute_tool {tool}`` (``traceloop.span.kind=tool``, no ``gen_ai.tool.call.id``;
``gen_ai.tool.call.arguments`` = the callback wrapper ``{"input_str": "{'query': 'x'}", "inputs": {...},
"tags", "metadata"}``, ``gen_ai.tool.call.result`` = ``{"output": <dumpd ToolMessage>, "kwargs"}``, the
ToolMessage holding the call id). A failed tool: status ERROR, ``error.type``, an ``exception`` event,
no result attribute.

Bug this found (fixed in ``dialects/traceloop.py``): without the call id from the ToolMessage, the
three identical ``search(query="x")`` calls went to the wrong turns. Multi-agent graphs (a graph run as a
node of another, handoff tools) are compared with the OpenInference assembly of the same runs.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("opentelemetry.instrumentation.langchain")

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.prebuilt import ToolNode, create_react_agent
from opentelemetry.instrumentation.langchain import LangchainInstrumentor
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from otel_agent_eval import AgentTrace, ToolExpectation
from tests.frameworks import langgraph_scenarios as sc
from tests.frameworks.fidelity import LANGGRAPH_OPENLLMETRY, by_param, fidelity
from tests.frameworks.harness import (
    assemble_with_logs,
    assert_traces,
    call,
    differences,
    only,
    step,
    trace,
)
from tests.frameworks.langgraph_run import (
    LangGraphRun,
    assembled_shapes,
    assert_researcher_results,
    in_request_order,
    instrumented_run,
    no_empty_arguments,
    researcher_trace,
)

EXPECTATIONS = [ToolExpectation(agent="researcher", expected_tools=["search", "fetch_page"])]

LOOKUP_QUESTION = "Look up k1."
LOOKUP_ANSWER = "The lookup failed."
LOOKUP_MODEL = "scripted-lookup"
LOOKUP_ERROR = "no such key: k1"
LOOKUP_RESULT = f"Error: ValueError('{LOOKUP_ERROR}')\n Please fix your mistakes."
"""What LangGraph's ``ToolNode(handle_tool_errors=True)`` tells the model when the tool raised."""
LOOKUP_SCRIPT = [
    AIMessage(content="Looking it up.", tool_calls=[
        {"name": "lookup", "args": {"key": "k1"}, "id": "call_lookup_1", "type": "tool_call"}]),
    AIMessage(content=LOOKUP_ANSWER),
]


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    raise ValueError(f"no such key: {key}")


def run_failing_lookup(callbacks: Sequence[Any] = ()) -> str:
    """A ReAct agent whose only tool call fails; the tool node turns the exception into an error ToolMessage."""
    model = sc.ScriptedToolModel(model_name=LOOKUP_MODEL, messages=iter([m.model_copy() for m in LOOKUP_SCRIPT]))
    agent = create_react_agent(model, ToolNode([lookup], handle_tool_errors=True), name="looker")
    result = agent.invoke({"messages": [("user", LOOKUP_QUESTION)]}, config={"callbacks": list(callbacks)})
    return str(result["messages"][-1].content)


CLASS_WRAPPED = (
    ("langchain_core.callbacks", "BaseCallbackManager", "__init__"),
    ("langgraph.pregel", "Pregel", "stream"),
    ("langgraph.pregel", "Pregel", "astream"),
    ("langgraph.types", "Command", "__init__"),
    *(("langchain.agents.middleware.types", "AgentMiddleware", f"{prefix}{hook}_{when}")
      for prefix in ("", "a") for hook in ("before", "after") for when in ("model", "agent")),
    *(("langchain_community.llms.openai", "BaseOpenAI", m) for m in ("_generate", "_agenerate", "_stream", "_astream")),
    *(("langchain_openai.llms.base", "BaseOpenAI", m) for m in ("_generate", "_agenerate", "_stream", "_astream")),
    *(("langchain_openai.chat_models.base", "BaseChatOpenAI", m) for m in ("_generate", "_agenerate")),
)
"""The class methods ``LangchainInstrumentor`` wraps. Its ``_uninstrument`` (0.62.4) calls
``unwrap("langchain_core.callbacks", "BaseCallbackManager.__init__")``, which ``opentelemetry-instrumentation``'s
``unwrap`` reads as attribute ``"BaseCallbackManager.__init__"`` of module ``langchain_core``: a no-op. Its
callback handler (bound to this run's, then shut down, tracer provider) would stay in every later
callback manager of the test session, and a second ``instrument()`` would add no handler of its own."""


class FullyUninstrumentedLangchainInstrumentor(LangchainInstrumentor):  # type: ignore[misc]
    """Traceloop's instrumentor, whose ``uninstrument`` also removes its wrappers of class methods."""

    def _uninstrument(self, **kwargs: Any) -> None:
        super()._uninstrument(**kwargs)
        for module_name, class_name, method in CLASS_WRAPPED:
            if module_name not in sys.modules:
                continue
            owner = getattr(importlib.import_module(module_name), class_name, None)
            wrapped = (owner.__dict__ if owner is not None else {}).get(method)
            wrapper = getattr(wrapped, "_self_wrapper", None)  # a wrapt FunctionWrapper's wrapper
            if str(getattr(wrapper, "__module__", "")).startswith("opentelemetry.instrumentation.langchain"):
                setattr(owner, method, wrapped.__wrapped__)


def openllmetry_run(scenario: Any, expectations: Sequence[ToolExpectation]) -> Iterator[LangGraphRun]:
    """``instrumented_run`` under Traceloop's instrumentor, with prompt/completion capture switched on
    explicitly (its default, but a developer's environment may say otherwise)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRACELOOP_TRACE_CONTENT", "true")
        yield from instrumented_run(scenario, expectations, FullyUninstrumentedLangchainInstrumentor)


def test_uninstrument_leaves_no_wrapper(run: LangGraphRun, failing_run: LangGraphRun) -> None:
    """After the runs, no method is still wrapped by the instrumentation (other tests share the process)."""
    for module_name, class_name, method in CLASS_WRAPPED:
        if module_name in sys.modules:
            owner = getattr(importlib.import_module(module_name), class_name)
            assert not hasattr(owner.__dict__.get(method), "__wrapped__"), (class_name, method)


@pytest.fixture(scope="module")
def run() -> Iterator[LangGraphRun]:
    yield from openllmetry_run(sc.run_researcher, EXPECTATIONS)


@pytest.fixture(scope="module")
def failing_run() -> Iterator[LangGraphRun]:
    yield from openllmetry_run(run_failing_lookup, [ToolExpectation(agent="looker", expected_tools=["lookup"])])


def model_calls(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name == "ScriptedToolModel.chat"), key=lambda s: s.start_time)


def tool_spans(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name.startswith("execute_tool ")), key=lambda s: s.start_time)


def graph_span(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    """The graph's chain span (``{name}.workflow``): the agent the run is reported as. The
    ``invoke_agent {name}`` span above it wraps nothing else, a container."""
    return only(spans, lambda s: s.name == f"{name}.workflow")


def expected_trace(run: LangGraphRun) -> AgentTrace:
    spans = run.spans
    llms = model_calls(spans)
    assert len(llms) == 4
    tools = in_request_order(tool_spans(spans))
    assert [s.name for s in tools] == ["execute_tool search", "execute_tool fetch_page", "execute_tool search",
                                       "execute_tool search"]
    return researcher_trace(graph_span(spans, "researcher"), llms, tools)


def test_the_scripted_run_answered(run: LangGraphRun) -> None:
    assert run.output == sc.ANSWER
    assert run.flushed is True


def test_openllmetry_tree_shape(run: LangGraphRun) -> None:
    """The shape the assembly must handle (see the module doc), as the real instrumentation emits it."""
    spans = run.spans
    assert {s.instrumentation_scope.name for s in spans} == {"opentelemetry.instrumentation.langchain"}
    by_id = {s.context.span_id: s for s in spans}
    root = only(spans, lambda s: s.parent is None)
    assert root.name == "invoke_agent researcher"
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    graph = graph_span(spans, "researcher")
    assert graph.parent.span_id == root.context.span_id
    assert graph.attributes["traceloop.span.kind"] == "workflow"
    assert graph.attributes["gen_ai.operation.name"] == "invoke_agent"
    for llm in model_calls(spans):
        assert llm.kind == SpanKind.CLIENT
        assert llm.attributes["gen_ai.operation.name"] == "chat"
        assert llm.attributes["gen_ai.request.model"] == "unknown"
        assert llm.attributes["traceloop.association.properties.ls_model_name"] == sc.MODEL_NAME
        assert "gen_ai.output.messages" in llm.attributes
        assert "traceloop.span.kind" not in llm.attributes
        assert not any(key.startswith(("gen_ai.prompt.", "gen_ai.completion.")) for key in llm.attributes)
        assert by_id[by_id[llm.parent.span_id].parent.span_id].name == "execute_task agent"
    for tool_span in tool_spans(spans):
        assert tool_span.attributes["traceloop.span.kind"] == "tool"
        assert "gen_ai.tool.call.id" not in tool_span.attributes
        node = by_id[tool_span.parent.span_id]
        assert node.name == "execute_task tools" and node.parent.span_id == graph.context.span_id
    first = in_request_order(tool_spans(spans))[0]  # the parallel search and fetch_page may start either way round
    assert '"input_str": "{\'query\': \'x\'}"' in first.attributes["gen_ai.tool.call.arguments"]
    assert '"tool_call_id": "call_search_1"' in first.attributes["gen_ai.tool.call.result"]


@fidelity(LANGGRAPH_OPENLLMETRY, "parallel tools", "loop of identical calls")
def test_assembled_steps(run: LangGraphRun) -> None:
    assert_traces(assemble_with_logs(run.spans, run.telemetry.logs()), [expected_trace(run)])


@fidelity(LANGGRAPH_OPENLLMETRY, "parallel tools", "loop of identical calls")
def test_processor_evaluated_the_same_steps(run: LangGraphRun) -> None:
    assert_traces([e.trace for e in run.recorder.evaluated], [expected_trace(run)])


def test_processor_results(run: LangGraphRun, metric_samples: Any) -> None:
    assert_researcher_results(run, metric_samples(run.registry))


def expected_failing_trace(run: LangGraphRun) -> AgentTrace:
    spans = run.spans
    llms = model_calls(spans)
    [failed] = tool_spans(spans)
    assert len(llms) == 2
    usage = (0, 0)
    # The failed tool span records no result: the one the tool node sent the model is read back from
    # the next model call's input (matched by call id); the error is the span's exception message.
    return trace(graph_span(spans, "looker"), "looker", input=LOOKUP_QUESTION, final_output=LOOKUP_ANSWER, steps=[
        step(0, llms[0], [call(failed, "lookup", {"key": "k1"}, LOOKUP_RESULT, call_id="call_lookup_1",
                               error=LOOKUP_ERROR)], model=LOOKUP_MODEL, usage=usage, thought="Looking it up."),
        step(1, llms[1], model=LOOKUP_MODEL, usage=usage, output=LOOKUP_ANSWER),
    ])


def test_failed_tool_span(failing_run: LangGraphRun) -> None:
    assert failing_run.output == LOOKUP_ANSWER
    [failed] = tool_spans(failing_run.spans)
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.attributes["error.type"] == "ValueError"
    assert "gen_ai.tool.call.result" not in failed.attributes
    assert [(e.name, e.attributes["exception.message"]) for e in failed.events] == [("exception", LOOKUP_ERROR)]


@fidelity(LANGGRAPH_OPENLLMETRY, "failing tool")
def test_failed_tool_assembled(failing_run: LangGraphRun) -> None:
    expected = [expected_failing_trace(failing_run)]
    assert_traces(assemble_with_logs(failing_run.spans, failing_run.telemetry.logs()), expected)
    assert_traces([e.trace for e in failing_run.recorder.evaluated], expected)


def test_failed_tool_results(failing_run: LangGraphRun) -> None:
    labels = {(e.trace.agent_name, r.evaluator): r.label for e in failing_run.recorder.evaluated for r in e.results}
    assert labels == {
        ("looker", "tool_call_accuracy"): "pass",
        ("looker", "tool_failure_recovery"): "fail",  # the agent gave up after the failure
        ("looker", "loop_detection"): "pass",
        ("looker", "step_budget"): "pass",
    }


@pytest.mark.parametrize("scenario", [sc.run_team, sc.run_handoff_team], ids=["supervisor", "handoff_tools"])
@fidelity(LANGGRAPH_OPENLLMETRY, by_param("scenario", {sc.run_team: "subgraphs as nodes", sc.run_handoff_team: "handoff tools (`transfer_to_*`)"}))
def test_multi_agent_runs_assemble_as_under_openinference(scenario: Any) -> None:
    """The same LangGraph multi-agent run gives the same AgentTraces (ids and times aside) under both
    LangChain instrumentations; ``test_frameworks_langgraph_multiagent.py`` and ``..._handoff.py`` pin
    the OpenInference ones span by span. Under OpenLLMetry a nested graph's spans sit under its
    ``execute_task <graph>`` chain span, beside an empty ``invoke_agent <graph>`` span (dropped), its
    LangGraph namespace is in ``traceloop.association.properties.*``, and a handoff's
    ``ParentCommand`` ends the spans it passes through ERROR (not a failure)."""
    openllmetry = assembled_shapes(openllmetry_run, scenario)
    openinference = assembled_shapes(instrumented_run, scenario)
    assert no_empty_arguments(openllmetry) == no_empty_arguments(openinference), "\n".join(
        differences(openllmetry, openinference))
    [top] = openllmetry
    shape_of = (top["agent_name"], len(top["steps"]), top["status"],
                [(c["agent_name"], len(c["steps"]), c["parent_step_index"]) for c in top["children"]])
    first = "team" if scenario is sc.run_team else "supervisor"
    assert shape_of == (first, 3, "ok", [("research_expert", 2, 0), ("writer", 2, 1)])
