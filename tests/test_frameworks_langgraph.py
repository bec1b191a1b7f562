"""Acceptance (issue 3): LangGraph ``create_react_agent`` with the OpenInference LangChain
instrumentation (``openinference-instrumentation-langchain``) and a scripted fake tool-calling chat
model (``tests/frameworks/langgraph_scenarios.py``; no network).

Covers parallel calls (turn 1: ``search`` + ``fetch_page`` in one AIMessage) and a loop
(``search(query="x")`` in turns 1, 2 and 3 with identical arguments).

OpenInference tree (one trace): ``researcher`` (CHAIN, the compiled graph) -> per turn ``agent``
(**AGENT** kind: OpenInference maps the LangGraph node named "agent" to AGENT) -> ``call_model`` /
``RunnableSequence`` -> ``ScriptedToolModel`` (LLM); and ``tools`` (CHAIN, one per tool call, a
sibling of ``agent`` under the graph) -> ``{tool}`` (TOOL). TOOL spans: ``tool.name``,
``input.value`` = the single argument's bare value (``x``), ``output.value`` = the ToolMessage as JSON
(``{"type": "tool", "data": {"content": ..., "tool_call_id": ...}}``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("openinference.instrumentation.langchain")


from otel_agent_eval import AgentTrace, ToolExpectation
from tests.frameworks import langgraph_scenarios as sc
from tests.frameworks.fidelity import LANGGRAPH, fidelity
from tests.frameworks.harness import assemble_with_logs, assert_traces, only
from tests.frameworks.langgraph_run import (
    RESEARCHER_LABELS,
    LangGraphRun,
    in_request_order,
    instrumented_run,
    researcher_trace,
)

EXPECTATIONS = [ToolExpectation(agent="researcher", expected_tools=["search", "fetch_page"])]


@pytest.fixture(scope="module")
def run() -> Iterator[LangGraphRun]:
    yield from instrumented_run(sc.run_researcher, EXPECTATIONS)


def expected_trace(run: LangGraphRun) -> AgentTrace:
    spans = run.spans
    graph = only(spans, lambda s: s.name == "researcher")
    llms = [s for s in spans if s.attributes.get("openinference.span.kind") == "LLM"]
    assert [s.name for s in llms] == ["ScriptedToolModel"] * 4
    tools = in_request_order([s for s in spans if s.attributes.get("openinference.span.kind") == "TOOL"])
    assert [s.name for s in tools] == ["search", "fetch_page", "search", "search"]
    return researcher_trace(graph, llms, tools)


def test_the_scripted_run_answered(run: LangGraphRun) -> None:
    assert run.output == sc.ANSWER
    assert run.flushed is True


def test_openinference_tree_shape(run: LangGraphRun) -> None:
    """The shape the assembly must handle: tools under ``tools`` node chains, LLMs under ``agent`` nodes."""
    spans = run.spans
    by_id = {s.context.span_id: s for s in spans}
    graph = only(spans, lambda s: s.name == "researcher")
    agents = [s for s in spans if s.name == "agent"]
    assert len(agents) == 4
    assert all(s.attributes["openinference.span.kind"] == "AGENT" for s in agents)
    assert all(s.parent.span_id == graph.context.span_id for s in agents)
    for tool in (s for s in spans if s.attributes.get("openinference.span.kind") == "TOOL"):
        node = by_id[tool.parent.span_id]
        assert node.name == "tools" and node.parent.span_id == graph.context.span_id
    first = only(spans, lambda s: s.name == "search" and '"call_search_1"' in s.attributes["output.value"])
    assert first.attributes["input.value"] == "x"


@fidelity(LANGGRAPH, "parallel tools", "loop of identical calls")
def test_assembled_steps(run: LangGraphRun) -> None:
    assert_traces(assemble_with_logs(run.spans, run.telemetry.logs()), [expected_trace(run)])


@fidelity(LANGGRAPH, "parallel tools", "loop of identical calls")
def test_processor_evaluated_the_same_steps(run: LangGraphRun) -> None:
    assert_traces([e.trace for e in run.recorder.evaluated], [expected_trace(run)])


def test_processor_results(run: LangGraphRun, metric_samples: Any) -> None:
    labels = {(e.trace.agent_name, r.evaluator): r.label for e in run.recorder.evaluated for r in e.results}
    assert labels == RESEARCHER_LABELS
    m = metric_samples(run.registry)
    assert m.by_labels("agent_eval_traces_evaluated_total", "agent") == {("researcher",): 1.0}


def test_processor_metrics(run: LangGraphRun, metric_samples: Any) -> None:
    m = metric_samples(run.registry)
    assert m.value("agent_eval_processor_errors_total") == 0.0
    assert sum(m.by_labels("agent_eval_traces_completed_total", "reason").values()) == 1.0
