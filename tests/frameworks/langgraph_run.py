"""A LangGraph scenario run under a LangChain instrumentation (OpenInference's unless told), with the processor installed.

What the LangGraph acceptance tests share: one module-scoped run of a scripted scenario
(``langgraph_scenarios``) through a real TracerProvider and LoggerProvider, every
evaluated agent trace recorded, the processor flushed before the tests look.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.trace import ReadableSpan
from prometheus_client import CollectorRegistry

from otel_agent_eval import AgentTrace, ToolExpectation, install
from tests.conftest import Telemetry, make_telemetry
from tests.frameworks import langgraph_scenarios as sc
from tests.frameworks.harness import OWN_SCOPE, RecordingSink, assemble_with_logs, call, only, shape, step, trace


class LangSmithOtel:
    """LangSmith's own OTel export (``Client(tracing_mode="otel")``) on the run's tracer provider, used as an
    instrumentor: LangChain's tracer writes each run as a span of that provider; no LangSmith server is asked."""

    def __init__(self, hide_content: bool = False) -> None:
        self.hide_content = hide_content  # the client's ``hide_inputs`` / ``hide_outputs``

    def instrument(self, tracer_provider: Any) -> None:
        from langsmith import Client, tracing_context

        self.client = Client(tracing_mode="otel", otel_tracer_provider=tracer_provider, api_key="unused",
                             hide_inputs=self.hide_content, hide_outputs=self.hide_content)
        self.context = tracing_context(enabled=True, client=self.client)
        self.context.__enter__()

    def uninstrument(self) -> None:
        self.context.__exit__(None, None, None)
        self.client.flush()


@dataclass
class LangGraphRun:
    telemetry: Telemetry
    output: str
    recorder: RecordingSink
    registry: CollectorRegistry
    flushed: bool

    @property
    def spans(self) -> list[ReadableSpan]:
        return self.telemetry.spans(exclude_scope=OWN_SCOPE)


def instrumented_run(
    scenario: Callable[[], str],
    expectations: Sequence[ToolExpectation],
    instrumentor: Callable[[], Any] = LangChainInstrumentor,
) -> Iterator[LangGraphRun]:
    """Yield the run of ``scenario`` (for a module-scoped fixture); shut telemetry down afterwards.

    ``instrumentor``: makes the ``BaseInstrumentor`` to trace the run with (instrumented with the run's
    tracer provider, uninstrumented after the run)."""
    telemetry = make_telemetry()
    tp, lp = telemetry.tracer_provider, telemetry.logger_provider
    registry = CollectorRegistry()
    processor = install(tp, lp, registry=registry, settle_delay_seconds=0.05, expectations=list(expectations))
    recorder = RecordingSink()
    processor.pipeline.sinks.append(recorder)
    instrumentation = instrumentor()
    instrumentation.instrument(tracer_provider=tp)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # create_react_agent moved to langchain.agents
            output = scenario()
    finally:
        instrumentation.uninstrument()
    flushed = processor.force_flush(10_000)
    try:
        yield LangGraphRun(telemetry, output, recorder, registry, flushed)
    finally:
        telemetry.shutdown()


def worker_traces(
    spans: Sequence[ReadableSpan], research: ReadableSpan, writer: ReadableSpan, worker_llms: Sequence[ReadableSpan]
) -> tuple[AgentTrace, AgentTrace]:
    """The two react sub-agents both team scenarios send work to, as assembly must report them:
    ``research_expert`` (handed work by the parent's step 0) and ``writer`` (step 1)."""
    search = only(spans, lambda s: s.name == "search")
    write = only(spans, lambda s: s.name == "write_file")
    model, usage = sc.MODEL_NAME, (0, 0)  # the fake model reports no token usage
    research_trace = trace(research, "research_expert", input=sc.TEAM_QUESTION, final_output=sc.TEAM_FINDING,
                           parent_step_index=0, steps=[
        step(0, worker_llms[0], [call(search, "search", {"query": "x"}, "no results", call_id="call_team_search")],
             model=model, usage=usage),
        step(1, worker_llms[1], model=model, usage=usage, output=sc.TEAM_FINDING),
    ])
    writer_trace = trace(writer, "writer", input=sc.TEAM_QUESTION, final_output=sc.TEAM_ANSWER,
                         parent_step_index=1, steps=[
        step(0, worker_llms[2], [call(write, "write_file", {"text": sc.TEAM_FINDING}, "written",
                                      call_id="call_team_write")], model=model, usage=usage),
        step(1, worker_llms[3], model=model, usage=usage, output=sc.TEAM_ANSWER),
    ])
    return research_trace, writer_trace


def in_request_order(tools: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    """The researcher's four tool spans in the order the model requested them: start order, except that
    the first turn's two parallel calls (search, fetch_page) run on threads and may start either way round."""
    ordered = sorted(tools, key=lambda s: s.start_time or 0)
    return sorted(ordered[:2], key=lambda s: "fetch_page" in s.name) + ordered[2:]


def researcher_trace(graph: ReadableSpan, llms: Sequence[ReadableSpan], tools: Sequence[ReadableSpan]) -> AgentTrace:
    """The AgentTrace of ``sc.run_researcher`` from its graph span, its four model calls and its four tool
    spans (start order), whichever LangChain instrumentation recorded them."""
    assert len(llms) == 4 and len(tools) == 4
    search_1, fetch_1, search_2, search_3 = tools
    model, usage = sc.MODEL_NAME, (0, 0)  # the fake model reports no token usage
    return trace(graph, "researcher", input=sc.QUESTION, final_output=sc.ANSWER, steps=[
        # Parallel calls: ONE step, in request order; each identical search(query="x") in its own turn.
        # Arguments as requested (a LangChain TOOL span may hold only the bare value "x"); the result
        # is the ToolMessage's content.
        step(0, llms[0], [
            call(search_1, "search", {"query": "x"}, "no results", call_id="call_search_1"),
            call(fetch_1, "fetch_page", {"url": sc.PAGE_URL}, "404 not found", call_id="call_fetch_1"),
        ], model=model, usage=usage),
        step(1, llms[1], [call(search_2, "search", {"query": "x"}, "no results", call_id="call_search_2")],
             model=model, usage=usage),
        step(2, llms[2], [call(search_3, "search", {"query": "x"}, "no results", call_id="call_search_3")],
             model=model, usage=usage, thought="Trying once more."),
        step(3, llms[3], model=model, usage=usage, output=sc.ANSWER),
    ])


RESEARCHER_LABELS = {
    ("researcher", "tool_call_accuracy"): "pass",
    ("researcher", "tool_failure_recovery"): "pass",
    ("researcher", "loop_detection"): "fail",  # search(query="x") 3 times
    ("researcher", "step_budget"): "pass",
}
"""(agent, evaluator) -> label the processor gives ``sc.run_researcher``, whichever instrumentation traced it."""


def assembled_shapes(runner: Any, scenario: Any) -> list[dict[str, Any]]:
    """The AgentTraces ``runner`` (``instrumented_run`` or another tracer's) assembles from ``scenario``, as shapes."""
    runs = runner(scenario, [])
    done = next(runs)
    try:
        return [shape(t) for t in assemble_with_logs(done.spans, done.telemetry.logs())]
    finally:
        runs.close()


def no_empty_arguments(value: Any) -> Any:
    """``arguments: {}`` as ``None``: OpenInference records no arguments for a call made with none."""
    if isinstance(value, dict):
        return {k: None if k == "arguments" and v == {} else no_empty_arguments(v) for k, v in value.items()}
    if isinstance(value, list):
        return [no_empty_arguments(v) for v in value]
    return value


def assert_researcher_results(run: LangGraphRun, metrics: Any) -> None:
    """The researcher scenario's evaluation, whatever traced it: each evaluator's label, the run counted, one trace
    completed, no processor error (``metrics``: the ``metric_samples`` of the run's registry)."""
    labels = {(e.trace.agent_name, r.evaluator): r.label for e in run.recorder.evaluated for r in e.results}
    assert labels == RESEARCHER_LABELS
    assert metrics.by_labels("agent_eval_traces_evaluated_total", "agent") == {("researcher",): 1.0}
    assert metrics.value("agent_eval_processor_errors_total") == 0.0
    assert sum(metrics.by_labels("agent_eval_traces_completed_total", "reason").values()) == 1.0
