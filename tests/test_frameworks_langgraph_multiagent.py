"""LangGraph multi-agent (supervisor) app with the OpenInference LangChain instrumentation: each
``create_react_agent`` graph used as a node of the parent graph is its own AgentTrace, a child of
the parent graph's run (``tests/frameworks/langgraph_scenarios.py::run_team``; no network).

OpenInference tree (one trace): ``team`` (CHAIN, root: the parent graph) -> per node run:
``supervisor`` (CHAIN) -> ``ScriptedToolModel`` (LLM); ``research`` (CHAIN, the node) ->
``research_expert`` (CHAIN, the compiled subgraph: span name = ``create_react_agent(name=...)``) ->
``agent`` (AGENT, one per turn) / ``tools`` (CHAIN) -> LLM / TOOL; the same under ``writer`` ->
``writer``. No span says "sub-agent": the sub-agent's inner spans carry a nested LangGraph
namespace in their ``metadata`` (``langgraph_checkpoint_ns`` = ``research:<id>|agent:<id>``, one
``|`` level more than the subgraph span's ``research:<id>``); a chain inside a plain node
(the supervisor's) keeps its node's namespace.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

pytest.importorskip("langgraph")
pytest.importorskip("openinference.instrumentation.langchain")


from otel_agent_eval import AgentTrace, ToolExpectation
from tests.frameworks import langgraph_scenarios as sc
from tests.frameworks.fidelity import LANGGRAPH, fidelity
from tests.frameworks.harness import (
    assemble_with_logs,
    assert_traces,
    only,
    step,
    trace,
)
from tests.frameworks.langgraph_run import LangGraphRun, instrumented_run, worker_traces

EXPECTATIONS = [
    ToolExpectation(agent="research_expert", expected_tools=["search"]),
    ToolExpectation(agent="writer", expected_tools=["write_file"]),
]


@pytest.fixture(scope="module")
def run() -> Iterator[LangGraphRun]:
    yield from instrumented_run(sc.run_team, EXPECTATIONS)


def metadata(span: ReadableSpan) -> dict[str, Any]:
    return json.loads(span.attributes.get("metadata") or "{}")


def subgraph(spans: list[ReadableSpan], name: str, node: str) -> ReadableSpan:
    """The compiled subgraph's span: named after the graph, the child of its node's span."""
    by_id = {s.context.span_id: s for s in spans}
    return only(spans, lambda s: s.name == name and s.parent is not None and by_id[s.parent.span_id].name == node)


def llms_under(spans: list[ReadableSpan], model: str) -> list[ReadableSpan]:
    return [s for s in spans if s.attributes.get("openinference.span.kind") == "LLM"
            and s.attributes.get("llm.model_name") == model]


def expected_traces(run: LangGraphRun) -> list[AgentTrace]:
    spans = run.spans
    team = only(spans, lambda s: s.name == "team")
    research = subgraph(spans, "research_expert", "research")
    writer = subgraph(spans, "writer", "writer")
    supervisor_llms = llms_under(spans, sc.SUPERVISOR_MODEL)
    worker_llms = llms_under(spans, sc.MODEL_NAME)
    assert len(supervisor_llms) == 3 and len(worker_llms) == 4
    research_trace, writer_trace = worker_traces(spans, research, writer, worker_llms)
    sup, usage = sc.SUPERVISOR_MODEL, (0, 0)  # the fake model reports no token usage
    # The parent graph's run: the supervisor's routing turns, each sub-agent linked to the turn that sent it.
    return [trace(team, "team", input=sc.TEAM_QUESTION, final_output=sc.TEAM_ANSWER, steps=[
        step(0, supervisor_llms[0], model=sup, usage=usage, output="research"),
        step(1, supervisor_llms[1], model=sup, usage=usage, output="writer"),
        step(2, supervisor_llms[2], model=sup, usage=usage, output="FINISH"),
    ], children=[research_trace, writer_trace])]


def test_the_scripted_run_answered(run: LangGraphRun) -> None:
    assert run.output == sc.TEAM_ANSWER
    assert run.flushed is True


def test_openinference_tree_shape(run: LangGraphRun) -> None:
    """What identifies a sub-agent: the nested namespace of the spans inside it, nothing on its own span."""
    spans = run.spans
    for name, node in (("research_expert", "research"), ("writer", "writer")):
        span = subgraph(spans, name, node)
        assert span.attributes["openinference.span.kind"] == "CHAIN"
        namespace = metadata(span)["langgraph_checkpoint_ns"]
        assert namespace.startswith(f"{node}:") and "|" not in namespace
        inner = [s for s in spans if s.parent is not None and s.parent.span_id == span.context.span_id]
        assert {s.name for s in inner} == {"agent", "tools"}
        assert all(metadata(s)["langgraph_checkpoint_ns"].startswith(namespace + "|") for s in inner)
    for llm in llms_under(spans, sc.SUPERVISOR_MODEL):  # a plain node: no nested level
        assert "|" not in metadata(llm)["langgraph_checkpoint_ns"]


@fidelity(LANGGRAPH, "subgraphs as nodes")
def test_assembled_tree(run: LangGraphRun) -> None:
    assert_traces(assemble_with_logs(run.spans, run.telemetry.logs()), expected_traces(run))


@fidelity(LANGGRAPH, "subgraphs as nodes")
def test_processor_evaluated_each_agent_on_its_own(run: LangGraphRun) -> None:
    def flat(traces: list[AgentTrace]) -> list[AgentTrace]:
        return [t for tr in traces for t in [tr.model_copy(update={"children": []}), *flat(tr.children)]]

    got = sorted((e.trace for e in run.recorder.evaluated), key=lambda t: t.start_time_unix_nano)
    assert [t.agent_name for t in got] == ["team", "research_expert", "writer"]
    want = sorted(flat(expected_traces(run)), key=lambda t: t.start_time_unix_nano)
    assert_traces([t.model_copy(update={"children": []}) for t in got], want)


def test_processor_results(run: LangGraphRun, metric_samples: Any) -> None:
    labels = {(e.trace.agent_name, r.evaluator): r.label for e in run.recorder.evaluated for r in e.results}
    evaluators = ("tool_call_accuracy", "tool_failure_recovery", "loop_detection", "step_budget")
    expected = {(agent, evaluator): "pass" for agent in ("team", "research_expert", "writer") for evaluator in evaluators}
    expected["team", "tool_call_accuracy"] = "skipped"  # no expectation for the supervisor's graph
    assert labels == expected  # each sub-agent met its own tool expectation: evaluated as its own run
    m = metric_samples(run.registry)
    assert m.value("agent_eval_processor_errors_total") == 0.0
    assert m.by_labels("agent_eval_traces_evaluated_total", "agent") == {
        ("team",): 1.0, ("research_expert",): 1.0, ("writer",): 1.0,
    }
    assert sum(m.by_labels("agent_eval_traces_completed_total", "reason").values()) == 1.0
