"""Acceptance: the OpenAI Agents SDK scenario of ``test_frameworks_openai_agents.py`` (an agent used as
a tool, a failing tool, a handoff; ``tests/frameworks/openai_agents_scenarios.py``, every model call a
real chat completions request to the scripted local server) traced by OpenLLMetry's (Traceloop's)
``opentelemetry-instrumentation-openai-agents`` 0.62.4 instead of OpenInference, compared with the
OpenInference assembly of the same scenario.

What the real instrumentation emits (a ``TracingProcessor`` registered with the Agents SDK; content on
unless ``TRACELOOP_TRACE_CONTENT=false``), one trace: ``Agent Workflow`` (``traceloop.span.kind=workflow``)
-> every ``{agent}.agent`` (``invoke_agent``, ``gen_ai.agent.name``), *all* siblings under the workflow
span: the agent run as a tool (``weather_expert``) is not under its tool span, the handoff target not
under the agent that handed off. Under each agent: ``openai.response`` (CLIENT, ``chat``,
``gen_ai.request.model``, ``gen_ai.input.messages`` only) and ``{tool}.tool`` (``execute_tool``,
``gen_ai.tool.call.arguments`` / ``result``, no call id; a failed tool: status ERROR, the description
the SDK's error dict, the result the error text sent to the model); the handoff is
``concierge → unknown.handoff`` (``traceloop.span.kind=handoff``, ``gen_ai.handoff.from_agent``), the
target unknown because the SDK names it only when the handoff span ends, and the target agent span
carries no ``gen_ai.agent.handoff_parent`` for the same reason. Assembly links them as OpenInference
nests them (``traceloop.WorkflowSiblings``: the agent that started inside a tool span of its name; the
agent started next after the handoff span).

The model calls record no output and no token usage: 0.62.4 reads them only from the Responses API's
``ResponseSpanData.response``, not from the ``GenerationSpanData`` a Chat Completions model produces.
So no turn records which calls it asked for, nor any text answer; the call ids and the requests come
back only through the next call's input history (assembly rule 5).

Bug this found (fixed in ``assemble.py``, rule 4's time-order fallback): with no turn asking for any
call, the failing ``book_table`` call (the next turn started < 5 ms after the tool) went to that next
turn; it now goes to the latest turn that started before the tool, as rule 4 states.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

pytest.importorskip("agents")
pytest.importorskip("openinference.instrumentation.openai_agents")
pytest.importorskip("opentelemetry.instrumentation.openai_agents")

from agents import set_trace_processors
from agents.tracing import get_trace_provider
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor as OpenInferenceInstrumentor
from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor

from otel_agent_eval import AgentTrace
from otel_agent_eval.evaluators import ToolFailureRecovery
from tests.frameworks import openai_agents_scenarios as sc
from tests.frameworks.fidelity import OPENAI_AGENTS_OPENLLMETRY, fidelity
from tests.frameworks.harness import assemble_with_logs, differences, only, shape
from tests.test_frameworks_openai_agents import TOOL_ERROR_TEXT, Run, instrumented_run


def registered_processors() -> tuple[Any, ...]:
    """The Agents SDK's registered trace processors. No public getter: the default provider's
    ``_multi_processor._processors`` (openai-agents 0.24)."""
    return tuple(get_trace_provider()._multi_processor._processors)  # type: ignore[attr-defined]


class FullyUninstrumentedOpenAIAgentsInstrumentor(OpenAIAgentsInstrumentor):  # type: ignore[misc]
    """Traceloop's instrumentor, whose ``uninstrument`` also unregisters its trace processor.

    0.62.4's ``_instrument`` registers an ``OpenTelemetryTracingProcessor`` with the Agents SDK
    (``add_trace_processor``, or ``set_trace_processors`` with ``replace_existing_processors=True``)
    and its ``_uninstrument`` only unwraps the realtime session: the processor, bound to this run's
    (then shut down) tracer provider, would keep receiving every later run of the test session, and
    with ``replace_existing_processors`` the SDK's own processors would stay replaced. This one puts
    back the processors registered before ``instrument``."""

    def _instrument(self, **kwargs: Any) -> None:
        self._before = registered_processors()
        super()._instrument(**kwargs)

    def _uninstrument(self, **kwargs: Any) -> None:
        super()._uninstrument(**kwargs)
        set_trace_processors(list(self._before))


def openllmetry_run() -> Iterator[Run]:
    """The scenario under Traceloop's instrumentor, content capture switched on explicitly (its default,
    but a developer's environment may say otherwise). ``replace_existing_processors``: the SDK's own
    exporter to the OpenAI backend gets nothing, as with OpenInference's default ``exclusive_processor``."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRACELOOP_TRACE_CONTENT", "true")
        yield from instrumented_run(FullyUninstrumentedOpenAIAgentsInstrumentor(replace_existing_processors=True))


@pytest.fixture(scope="module")
def processors_before() -> tuple[Any, ...]:
    return registered_processors()


@pytest.fixture(scope="module")
def run(processors_before: tuple[Any, ...]) -> Iterator[Run]:
    yield from openllmetry_run()


@pytest.fixture(scope="module")
def openinference_run(run: Run) -> Iterator[Run]:
    yield from instrumented_run(OpenInferenceInstrumentor())


def test_the_scripted_run_ended_with_the_handoff_target(run: Run) -> None:
    assert run.output == sc.FINAL_ANSWER
    assert run.flushed is True


def test_uninstrument_restores_the_agents_sdk_trace_processors(run: Run, processors_before: tuple[Any, ...]) -> None:
    after = registered_processors()
    assert len(after) == len(processors_before) and all(a is b for a, b in zip(after, processors_before))
    assert not any(type(p).__module__.startswith("opentelemetry.instrumentation.openai_agents") for p in after)


def test_openllmetry_span_tree(run: Run) -> None:
    """The shape the assembly must handle (see the module doc), as the real instrumentation emits it."""
    spans = run.spans
    assert {s.instrumentation_scope.name for s in spans} == {"opentelemetry.instrumentation.openai_agents"}
    by_id = {s.context.span_id: s for s in spans}
    root = only(spans, lambda s: s.parent is None)
    assert (root.name, root.attributes["traceloop.span.kind"]) == ("Agent Workflow", "workflow")
    agents = [s for s in spans if s.name.endswith(".agent")]
    assert [s.name for s in agents] == ["concierge.agent", "weather_expert.agent", "booking_agent.agent"]
    for agent in agents:  # all siblings: no nesting under the tool span, no handoff parent
        assert agent.parent.span_id == root.context.span_id
        assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert "gen_ai.agent.handoff_parent" not in agent.attributes
    llms = [s for s in spans if s.name == "openai.response"]
    assert [by_id[s.parent.span_id].name for s in llms] == [
        "concierge.agent", "weather_expert.agent", "weather_expert.agent", "concierge.agent", "concierge.agent",
        "booking_agent.agent"]
    for llm in llms:
        assert llm.kind == SpanKind.CLIENT and llm.attributes["gen_ai.operation.name"] == "chat"
        assert "gen_ai.input.messages" in llm.attributes
        assert not any(k.startswith(("gen_ai.output.", "gen_ai.usage.")) for k in llm.attributes), llm.attributes
    tools = {s.name: s for s in spans if s.name.endswith(".tool")}
    assert {n: by_id[s.parent.span_id].name for n, s in tools.items()} == {
        "weather_expert.tool": "concierge.agent", "get_weather.tool": "weather_expert.agent",
        "book_table.tool": "concierge.agent"}
    assert not any("gen_ai.tool.call.id" in s.attributes for s in tools.values())
    book = tools["book_table.tool"]
    assert book.status.status_code == StatusCode.ERROR
    assert book.attributes["gen_ai.tool.call.result"] == TOOL_ERROR_TEXT
    handoff = only(spans, lambda s: s.name.endswith(".handoff"))
    assert handoff.name == "concierge → unknown.handoff"
    assert by_id[handoff.parent.span_id].name == "concierge.agent"
    assert handoff.attributes["gen_ai.handoff.from_agent"] == "concierge"
    assert "gen_ai.handoff.to_agent" not in handoff.attributes


def flat(traces: list[AgentTrace]) -> dict[str, dict[str, Any]]:
    """Every AgentTrace by agent name (nested ones lifted out), as ``shape``s without children."""
    out: dict[str, dict[str, Any]] = {}
    for t in traces:
        out[t.agent_name] = shape(t.model_copy(update={"children": [], "parent_step_index": None}))
        out.update(flat(t.children))
    return out


def what_both_record(agent: dict[str, Any]) -> dict[str, Any]:
    """An AgentTrace shape reduced to what both instrumentations record of this scenario.

    Left out, because OpenLLMetry 0.62.4 does not record it for a Chat Completions model (see the
    module doc): token usage, the model's text (step output, final output) and which calls each turn
    requested (so ``requested`` and the "not requested" issues); the handoff call, which only the
    model's output or OpenInference's ``handoff to`` TOOL span shows. Normalised: a failed tool's
    ``error`` (the same SDK error, formatted differently: OpenInference's status description is
    ``"Error running tool (non-fatal): {...}"``, OpenLLMetry's ``str()`` of the error dict)."""
    steps = []
    for s in agent["steps"]:
        calls = [{**{k: c[k] for k in ("name", "arguments", "result", "call_id", "executed")},
                  "failed": c["error"] is not None}
                 for c in s["tool_calls"] if not c["name"].startswith("transfer_to_")]
        steps.append({"index": s["index"], "model": s["model"], "tool_calls": calls, "error": s["error"]})
    return {"agent_name": agent["agent_name"], "input": agent["input"], "status": agent["status"],
            "error": agent["error"], "steps": steps}


@fidelity(OPENAI_AGENTS_OPENLLMETRY, "agent as tool", "failing tool", "handoff")
def test_each_agent_assembles_as_under_openinference(run: Run, openinference_run: Run) -> None:
    """Per agent (nesting aside: ``test_agents_are_linked_as_under_openinference``), the same steps, calls, arguments, results and
    call ids as under OpenInference, minus what OpenLLMetry does not record (``what_both_record``)."""
    ol = {n: what_both_record(t) for n, t in flat(assemble_with_logs(run.spans, run.telemetry.logs())).items()}
    oi = {n: what_both_record(t) for n, t in flat(
        assemble_with_logs(openinference_run.spans, openinference_run.telemetry.logs())).items()}
    assert ol == oi, "\n".join(differences(ol, oi))
    assert [(s["index"], [c["name"] for c in s["tool_calls"]]) for s in ol["concierge"]["steps"]] == [
        (0, ["weather_expert"]), (1, ["book_table"]), (2, [])]
    assert [c["call_id"] for s in ol["concierge"]["steps"] for c in s["tool_calls"]] == [
        "call_ask_weather", "call_book_table"]  # from the next model call's input (rule 5)


def links(traces: list[AgentTrace]) -> list[tuple[str, int | None, list[Any]]]:
    return [(t.agent_name, t.parent_step_index, links(t.children)) for t in traces]


@fidelity(OPENAI_AGENTS_OPENLLMETRY, "agent as tool", "handoff")
def test_agents_are_linked_as_under_openinference(run: Run, openinference_run: Run) -> None:
    """The sibling agent spans linked as OpenInference nests them (``traceloop.WorkflowSiblings``): the
    agent run as a tool under the step of its tool call, the handoff target under the turn that handed off."""
    assert links(assemble_with_logs(run.spans)) == links(assemble_with_logs(openinference_run.spans)) == [
        ("concierge", None, [("weather_expert", 0, []), ("booking_agent", 2, [])])]



def labels(run: Run) -> dict[tuple[str, str], str]:
    return {(e.trace.agent_name, r.evaluator): r.label for e in run.recorder.evaluated for r in e.results}


def test_processor_results(run: Run, metric_samples: Any) -> None:
    """The processor evaluated each agent on its own; ``tool_call_accuracy`` is skipped (no expectations)."""
    assert labels(run) == {
        ("concierge", "tool_call_accuracy"): "skipped",
        ("concierge", "tool_failure_recovery"): "fail",
        ("concierge", "loop_detection"): "pass",
        ("concierge", "step_budget"): "pass",
        ("weather_expert", "tool_call_accuracy"): "skipped",
        ("weather_expert", "tool_failure_recovery"): "pass",
        ("weather_expert", "loop_detection"): "pass",
        ("weather_expert", "step_budget"): "pass",
        ("booking_agent", "tool_call_accuracy"): "skipped",
        ("booking_agent", "tool_failure_recovery"): "pass",
        ("booking_agent", "loop_detection"): "pass",
        ("booking_agent", "step_budget"): "pass",
    }
    m = metric_samples(run.registry)
    assert m.value("agent_eval_processor_errors_total") == 0.0
    assert m.by_labels("agent_eval_traces_evaluated_total", "agent") == {
        ("concierge",): 1.0, ("weather_expert",): 1.0, ("booking_agent",): 1.0}


def test_processor_results_as_under_openinference(run: Run, openinference_run: Run) -> None:
    """The same labels. Under OpenInference the turn after the failed ``book_table`` hands off (the
    ``transfer_to_booking_agent`` call, fulfilled by the handoff span); under OpenLLMetry that turn records
    neither its request nor a handoff the assembly reads (see the module doc). By default a handoff is
    neither a retry of ``book_table`` nor a fallback named for it, so concierge's ``tool_failure_recovery``
    fails under both; with the handoff named as its fallback, the difference shows."""
    assert labels(run) == labels(openinference_run)
    recovery = ToolFailureRecovery(fallback_tools={"book_table": ["transfer_to_booking_agent"]})

    def with_fallback(r: Run) -> str:
        (concierge,) = [e.trace for e in r.recorder.evaluated if e.trace.agent_name == "concierge"]
        return recovery.evaluate(concierge)[0].label

    assert (with_fallback(run), with_fallback(openinference_run)) == ("fail", "pass")
