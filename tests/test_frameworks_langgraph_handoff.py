"""LangGraph handoff-tool supervisor (the ``langgraph-supervisor`` layout) with the OpenInference
LangChain instrumentation: the supervisor's runs are one agent, each worker its child, linked to
the supervisor step whose ``transfer_to_<agent>`` call handed off
(``tests/frameworks/langgraph_scenarios.py::run_handoff_team``; no network).

OpenInference tree (one trace): ``team`` (CHAIN, root) -> per node run, in order: ``supervisor``
(CHAIN, the node) -> ``supervisor`` (CHAIN, the compiled ``create_react_agent`` graph) -> ``agent``
(AGENT) -> LLM, and ``tools`` (CHAIN) -> ``transfer_to_research_expert`` (TOOL); ``research_expert``
(CHAIN, the worker node) -> ``research_expert`` (CHAIN, its graph) -> ``agent`` / ``tools`` -> LLM /
``search``; ``supervisor`` again (-> ``transfer_to_writer``); ``writer``; ``supervisor`` a third time
(the answer). Nothing links the runs but the handoff tool's ``output.value``: the serialized
``Command`` (``{"graph": "__parent__", "goto": "research_expert", "update": {"messages": [...,
<the ToolMessage>]}}``), and the order of the node runs under the one graph run.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan

pytest.importorskip("langgraph")
pytest.importorskip("openinference.instrumentation.langchain")

from openinference.instrumentation.langchain import LangChainInstrumentor

from otel_agent_eval import AgentTrace, ToolExpectation
from tests.conftest import make_telemetry
from tests.frameworks import langgraph_scenarios as sc
from tests.frameworks.fidelity import LANGGRAPH, fidelity
from tests.frameworks.harness import (
    OWN_SCOPE,
    assemble_with_logs,
    assert_traces,
    call,
    only,
    step,
    trace,
)
from tests.frameworks.langgraph_run import LangGraphRun, instrumented_run, worker_traces

EXPECTATIONS = [
    ToolExpectation(agent="supervisor", expected_tools=["transfer_to_research_expert", "transfer_to_writer"]),
    ToolExpectation(agent="research_expert", expected_tools=["search"]),
    ToolExpectation(agent="writer", expected_tools=["write_file"]),
]


@pytest.fixture(scope="module")
def run() -> Iterator[LangGraphRun]:
    yield from instrumented_run(sc.run_handoff_team, EXPECTATIONS)


def graphs(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    """The compiled graph's spans, in start order: named after the graph, the child of its node's span."""
    by_id = {s.context.span_id: s for s in spans}
    found = [s for s in spans if s.name == name and s.parent is not None and by_id[s.parent.span_id].name == name
             and by_id[s.parent.span_id].parent is not None]
    return sorted(found, key=lambda s: s.start_time)


def llms_of(spans: list[ReadableSpan], model: str) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.attributes.get("openinference.span.kind") == "LLM"
                   and s.attributes.get("llm.model_name") == model), key=lambda s: s.start_time)


def expected_traces(run: LangGraphRun) -> list[AgentTrace]:
    spans = run.spans
    supervisor_runs = graphs(spans, "supervisor")
    [research] = graphs(spans, "research_expert")
    [writer] = graphs(spans, "writer")
    assert len(supervisor_runs) == 3
    sup_llms, worker_llms = llms_of(spans, sc.SUPERVISOR_MODEL), llms_of(spans, sc.MODEL_NAME)
    assert len(sup_llms) == 3 and len(worker_llms) == 4
    to_research = only(spans, lambda s: s.name == "transfer_to_research_expert")
    to_writer = only(spans, lambda s: s.name == "transfer_to_writer")
    research_trace, writer_trace = worker_traces(spans, research, writer, worker_llms)
    sup, usage = sc.SUPERVISOR_MODEL, (0, 0)  # the fake model reports no token usage
    # The handoff calls carry no arguments: the model asked with ``{}``, which OpenInference leaves out;
    # their result is the ToolMessage the Command adds.
    return [trace(supervisor_runs[0], "supervisor", input=sc.TEAM_QUESTION, final_output=sc.TEAM_ANSWER,
                  end=supervisor_runs[-1].end_time, steps=[
        step(0, sup_llms[0], [call(to_research, "transfer_to_research_expert", None,
                                   sc.transferred("research_expert"),
                                   call_id=sc.handoff_call_id(0, "research_expert"))],
             model=sup, usage=usage),
        step(1, sup_llms[1], [call(to_writer, "transfer_to_writer", None, sc.transferred("writer"),
                                   call_id=sc.handoff_call_id(1, "writer"))], model=sup, usage=usage),
        step(2, sup_llms[2], model=sup, usage=usage, output=sc.TEAM_ANSWER),
    ], children=[research_trace, writer_trace])]


def test_the_scripted_run_answered(run: LangGraphRun) -> None:
    assert run.output == sc.TEAM_ANSWER
    assert run.flushed is True


def test_openinference_tree_shape(run: LangGraphRun) -> None:
    """What the handoff looks like: a tool whose output is a ``Command`` to the parent graph; then the target's run."""
    spans = run.spans
    team = only(spans, lambda s: s.parent is None)
    nodes = sorted((s for s in spans if s.parent is not None and s.parent.span_id == team.context.span_id),
                   key=lambda s: s.start_time)
    assert [s.name for s in nodes] == ["supervisor", "research_expert", "supervisor", "writer", "supervisor"]
    for name, target in (("transfer_to_research_expert", "research_expert"), ("transfer_to_writer", "writer")):
        handoff = only(spans, lambda s, name=name: s.name == name)
        assert handoff.attributes["openinference.span.kind"] == "TOOL"
        assert "input.value" not in handoff.attributes  # no arguments: the tool only takes injected ones
        command = json.loads(handoff.attributes["output.value"])
        assert (command["graph"], command["goto"]) == ("__parent__", target)
        assert command["update"]["messages"][-1]["data"]["content"] == sc.transferred(target)


@fidelity(LANGGRAPH, "handoff tools (`transfer_to_*`)")
def test_assembled_tree(run: LangGraphRun) -> None:
    assert_traces(assemble_with_logs(run.spans, run.telemetry.logs()), expected_traces(run))


@fidelity(LANGGRAPH, "handoff tools (`transfer_to_*`)")
def test_processor_evaluated_each_agent_on_its_own(run: LangGraphRun) -> None:
    def flat(traces: list[AgentTrace]) -> list[AgentTrace]:
        return [t for tr in traces for t in [tr.model_copy(update={"children": []}), *flat(tr.children)]]

    got = sorted((e.trace for e in run.recorder.evaluated), key=lambda t: t.start_time_unix_nano)
    assert [t.agent_name for t in got] == ["supervisor", "research_expert", "writer"]
    want = sorted(flat(expected_traces(run)), key=lambda t: t.start_time_unix_nano)
    assert_traces([t.model_copy(update={"children": []}) for t in got], want)
    labels = {(e.trace.agent_name, r.evaluator): r.label for e in run.recorder.evaluated for r in e.results}
    assert {agent: labels[agent, "tool_call_accuracy"] for agent in ("supervisor", "research_expert", "writer")} == {
        "supervisor": "pass", "research_expert": "pass", "writer": "pass",
    }


@fidelity(LANGGRAPH, "handoff tools (`transfer_to_*`)")
def test_a_worker_handed_work_twice_is_two_children_linked_to_each_handoff() -> None:
    """Only the agent that hands off is one agent across its runs: a worker run twice is two runs,
    each the child of the supervisor step that sent it."""
    telemetry = make_telemetry()
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.tracer_provider)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            output = sc.run_handoff_team(handoffs=("research_expert", "research_expert"))
        spans = telemetry.spans(exclude_scope=OWN_SCOPE)
    finally:
        instrumentor.uninstrument()
        telemetry.shutdown()
    assert output == sc.TEAM_ANSWER
    researches = graphs(spans, "research_expert")
    handoffs = sorted((s for s in spans if s.name == "transfer_to_research_expert"), key=lambda s: s.start_time)
    (got,) = assemble_with_logs(spans)
    assert got.agent_name == "supervisor"
    assert [[(c.span_id, c.call_id) for c in s.tool_calls] for s in got.steps] == [
        [(format(h.context.span_id, "016x"), sc.handoff_call_id(i, "research_expert"))] for i, h in enumerate(handoffs)
    ] + [[]]
    assert [(c.agent_name, c.agent_span_id, c.parent_step_index, c.final_output) for c in got.children] == [
        ("research_expert", format(r.context.span_id, "016x"), i, sc.TEAM_FINDING) for i, r in enumerate(researches)
    ]
    assert [len(c.steps) for c in got.children] == [2, 2]
