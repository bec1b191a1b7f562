"""Acceptance: Strands Agents (``strands-agents``), which traces itself with OpenTelemetry GenAI spans,
its model Strands' ``OpenAIModel`` streaming chat completions from the scripted local server
(``tests/frameworks/strands_scenarios.py``), in both of Strands' content modes.

Tree (both modes): ``invoke_agent concierge`` -> one ``execute_event_loop_cycle`` per turn ->
``chat`` and that turn's ``execute_tool {tool}`` spans, siblings under the cycle. All spans are
INTERNAL, scope ``strands.telemetry.tracer``; ``gen_ai.system`` (default) or
``gen_ai.provider.name`` (latest) is ``strands-agents``, not the model's provider. Tool spans carry
``gen_ai.tool.name`` and ``gen_ai.tool.call.id`` (the model's call id); a tool that raised ends
ERROR with the exception message as status description.

- default: content only in deprecated message span events with Bedrock content blocks as JSON:
  ``gen_ai.system.message`` / ``gen_ai.user.message`` / ``gen_ai.assistant.message`` /
  ``gen_ai.tool.message`` (``content``), ``gen_ai.choice`` (``message``, ``finish_reason``); on a
  tool span ``gen_ai.tool.message`` holds the arguments and ``gen_ai.choice`` the result blocks
  (both with ``id``).
- ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``: several
  ``gen_ai.client.inference.operation.details`` span events per span (one per key:
  ``gen_ai.system_instructions``, ``gen_ai.input.messages``, ``gen_ai.output.messages``; a cycle has
  two ``gen_ai.input.messages`` events, the history then its tool results); tool spans also get
  ``gen_ai.tool.call.arguments`` and (unless the tool failed) ``gen_ai.tool.call.result`` attributes.
  Tool results stay Bedrock blocks there (``[{"text": ...}]``), which the semconv dialect unwraps
  for Strands as the legacy dialect does for the default mode's ``gen_ai.choice`` events.

Both modes must give the same AgentSteps: one step per cycle (assembly rule 3), the cycle span first
in its span ids.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from prometheus_client import CollectorRegistry

pytest.importorskip("strands")

from otel_agent_eval import AgentTrace, ToolExpectation, install
from tests.conftest import Telemetry, make_telemetry
from tests.frameworks import strands_scenarios as sc
from tests.frameworks.fidelity import STRANDS, fidelity
from tests.frameworks.harness import (
    OWN_SCOPE,
    RecordingSink,
    assemble_with_logs,
    assert_traces,
    call,
    differences,
    hex_span,
    log_data,
    only,
    shape,
    step,
    trace,
)

DEFAULT, LATEST = "default", "gen_ai_latest_experimental"
MODES = (DEFAULT, LATEST)
SCOPE = "strands.telemetry.tracer"
DETAILS = "gen_ai.client.inference.operation.details"

EXPECTATIONS = [ToolExpectation(agent=sc.AGENT, expected_tools=["get_weather", "local_time", "book_table"])]


@dataclass
class Run:
    mode: str
    telemetry: Telemetry
    output: str
    recorder: RecordingSink
    registry: CollectorRegistry
    flushed: bool
    requests: list[Any]

    @property
    def spans(self) -> list[ReadableSpan]:
        return self.telemetry.spans(exclude_scope=OWN_SCOPE)


def _run(mode: str) -> Run:
    with pytest.MonkeyPatch.context() as monkeypatch:
        if mode == LATEST:
            monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", LATEST)
        else:
            monkeypatch.delenv("OTEL_SEMCONV_STABILITY_OPT_IN", raising=False)
        # Strands copies content into span attributes when any of these names a Langfuse endpoint.
        for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "LANGFUSE_BASE_URL"):
            monkeypatch.delenv(name, raising=False)
        telemetry = make_telemetry()
        tp, lp = telemetry.tracer_provider, telemetry.logger_provider
        registry = CollectorRegistry()
        processor = install(tp, lp, registry=registry, settle_delay_seconds=0.05, expectations=EXPECTATIONS)
        recorder = RecordingSink()
        processor.pipeline.sinks.append(recorder)
        with sc.scripted_server() as server, sc.traced_by(tp, monkeypatch):
            output = sc.run_concierge(server)
            requests = list(server.requests)
            assert server.errors == []
        flushed = processor.force_flush(10_000)
    return Run(mode, telemetry, output, recorder, registry, flushed, requests)


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[str, Run]]:
    done: dict[str, Run] = {}
    try:
        for mode in MODES:
            done[mode] = _run(mode)
        yield done
    finally:
        for run in done.values():
            run.telemetry.shutdown()


def _children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def expected_trace(run: Run) -> AgentTrace:
    spans = run.spans
    agent = only(spans, lambda s: s.name == f"invoke_agent {sc.AGENT}")
    cycles = _children(spans, agent)
    assert [c.name for c in cycles] == ["execute_event_loop_cycle"] * 3
    chats = [only(_children(spans, c), lambda s: s.name == "chat") for c in cycles]
    tool = {s.attributes["gen_ai.tool.call.id"]: s for s in spans if s.name.startswith("execute_tool ")}
    assert sorted(tool) == ["call_book", "call_time", "call_weather"]
    return trace(agent, sc.AGENT, input=sc.QUESTION, final_output=sc.FINAL_ANSWER, steps=[
        # Two calls requested at once (Strands runs them concurrently): one step, in request order.
        step(0, chats[0], [
            call(tool["call_weather"], "get_weather", {"city": "Paris"}, "sunny, 21C", call_id="call_weather"),
            call(tool["call_time"], "local_time", {"city": "Paris"}, sc.LOCAL_TIME_SENT, call_id="call_time"),
        ], model=sc.MODEL, usage=(100, 10), thought=sc.THOUGHT, turn=cycles[0]),
        # The tool raised: ERROR span with the exception message; the result is what the model got.
        step(1, chats[1], [
            call(tool["call_book"], "book_table", {"restaurant": "Chez Test", "people": 2}, sc.TABLE_ERROR_SENT,
                 call_id="call_book", error=sc.TABLE_ERROR),
        ], model=sc.MODEL, usage=(101, 11), turn=cycles[1]),
        step(2, chats[2], model=sc.MODEL, usage=(102, 12), output=sc.FINAL_ANSWER, turn=cycles[2]),
    ])


# --- the run itself --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_the_scripted_conversation_ran(runs: dict[str, Run], mode: str) -> None:
    run = runs[mode]
    assert run.output == sc.FINAL_ANSWER + "\n"  # AgentResult's text ends each text block with a newline
    assert run.flushed is True
    assert [r.api for r in run.requests] == ["chat"] * 3
    assert all(r.body["stream"] is True and r.body["stream_options"] == {"include_usage": True} for r in run.requests)
    last = run.requests[-1].body["messages"]
    assert last[-1] == {"role": "tool", "tool_call_id": "call_book", "content": sc.TABLE_ERROR_SENT}


@pytest.mark.parametrize("mode", MODES)
def test_strands_span_tree(runs: dict[str, Run], mode: str) -> None:
    spans = runs[mode].spans
    by_id = {s.context.span_id: s for s in spans}

    def parent(s: ReadableSpan) -> str | None:
        return by_id[s.parent.span_id].name if s.parent is not None else None

    assert [(s.name, parent(s)) for s in spans] == [
        ("invoke_agent concierge", None),
        ("execute_event_loop_cycle", "invoke_agent concierge"),
        ("chat", "execute_event_loop_cycle"),
        ("execute_tool get_weather", "execute_event_loop_cycle"),
        ("execute_tool local_time", "execute_event_loop_cycle"),
        ("execute_event_loop_cycle", "invoke_agent concierge"),
        ("chat", "execute_event_loop_cycle"),
        ("execute_tool book_table", "execute_event_loop_cycle"),
        ("execute_event_loop_cycle", "invoke_agent concierge"),
        ("chat", "execute_event_loop_cycle"),
    ]
    assert {s.instrumentation_scope.name for s in spans} == {SCOPE}
    provider_key = "gen_ai.provider.name" if mode == LATEST else "gen_ai.system"
    assert {s.attributes.get(provider_key) for s in spans} == {"strands-agents"}
    book = only(spans, lambda s: s.name == "execute_tool book_table")
    assert (book.status.status_code.name, book.status.description) == ("ERROR", sc.TABLE_ERROR)


def test_default_mode_content_is_in_message_events(runs: dict[str, Run]) -> None:
    spans = runs[DEFAULT].spans
    chats = [s for s in spans if s.name == "chat"]
    assert [e.name for e in chats[1].events] == [
        "gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message",
        "gen_ai.choice",
    ]
    assert json.loads(chats[1].events[-1].attributes["message"]) == [
        {"toolUse": {"toolUseId": "call_book", "name": "book_table", "input": {"restaurant": "Chez Test", "people": 2}}}
    ]
    weather = only(spans, lambda s: s.name == "execute_tool get_weather")
    assert [(e.name, dict(e.attributes)) for e in weather.events] == [
        ("gen_ai.tool.message", {"role": "tool", "content": '{"city": "Paris"}', "id": "call_weather"}),
        ("gen_ai.choice", {"message": '[{"text": "sunny, 21C"}]', "id": "call_weather"}),
    ]
    assert all(DETAILS not in {e.name for e in s.events} and "gen_ai.input.messages" not in s.attributes for s in spans)


def test_latest_mode_content_is_in_details_events(runs: dict[str, Run]) -> None:
    spans = runs[LATEST].spans
    chats = [s for s in spans if s.name == "chat"]
    assert [(e.name, list(e.attributes)) for e in chats[0].events] == [
        (DETAILS, ["gen_ai.system_instructions"]), (DETAILS, ["gen_ai.input.messages"]),
        (DETAILS, ["gen_ai.output.messages"]),
    ]
    assert json.loads(chats[0].events[-1].attributes["gen_ai.output.messages"]) == [{
        "role": "assistant",
        "parts": [
            {"type": "text", "content": sc.THOUGHT},
            {"type": "tool_call", "name": "get_weather", "id": "call_weather", "arguments": {"city": "Paris"}},
            {"type": "tool_call", "name": "local_time", "id": "call_time", "arguments": {"city": "Paris"}},
        ],
        "finish_reason": "tool_use",
    }]
    weather = only(spans, lambda s: s.name == "execute_tool get_weather")
    assert weather.attributes["gen_ai.tool.call.arguments"] == '{"city": "Paris"}'
    assert weather.attributes["gen_ai.tool.call.result"] == '[{"text": "sunny, 21C"}]'  # Bedrock blocks
    book = only(spans, lambda s: s.name == "execute_tool book_table")
    assert "gen_ai.tool.call.result" not in book.attributes  # failed: only in the details event
    cycle = only(spans, lambda s: s.name == "execute_event_loop_cycle" and s.attributes.get("event_loop.parent_cycle_id")
                 == spans[1].attributes["event_loop.cycle_id"])
    assert [list(e.attributes) for e in cycle.events if e.name == DETAILS] == [["gen_ai.input.messages"]] * 2
    assert all(not any(e.name.startswith("gen_ai.") and e.name.endswith(".message") for e in s.events) for s in spans)


# --- assembly --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@fidelity(STRANDS, "text + parallel tools", "failing tool")
def test_assembled_steps(runs: dict[str, Run], mode: str) -> None:
    """``assemble`` over the spans (Strands writes no log records: its events are span events)."""
    run = runs[mode]
    assert log_data(run.telemetry.logs()) == []  # only our own gen_ai.evaluation.result records
    assert_traces(assemble_with_logs(run.spans), [expected_trace(run)])


@pytest.mark.parametrize("mode", MODES)
@fidelity(STRANDS, "text + parallel tools", "failing tool")
def test_processor_evaluated_the_same_steps(runs: dict[str, Run], mode: str) -> None:
    run = runs[mode]
    assert len(run.recorder.evaluated) == 1
    (evaluated,) = run.recorder.evaluated
    assert_traces([evaluated.trace], [expected_trace(run)])


@fidelity(STRANDS, "text + parallel tools", "failing tool")
def test_both_modes_give_the_same_steps(runs: dict[str, Run]) -> None:
    default = [shape(e.trace) for e in runs[DEFAULT].recorder.evaluated]
    latest = [shape(e.trace) for e in runs[LATEST].recorder.evaluated]
    assert latest == default, "\n".join(differences(latest, default))


# --- results and metrics ---------------------------------------------------------------------------

EXPECTED_LABELS = {
    "tool_call_accuracy": "pass",
    "tool_failure_recovery": "fail",  # book_table failed and was never retried
    "loop_detection": "pass",
    "step_budget": "pass",
}


@pytest.mark.parametrize("mode", MODES)
def test_processor_results(runs: dict[str, Run], mode: str) -> None:
    run = runs[mode]
    (evaluated,) = run.recorder.evaluated
    labels = {r.evaluator: r.label for r in evaluated.results}
    assert labels == EXPECTED_LABELS
    agent = only(run.spans, lambda s: s.name == f"invoke_agent {sc.AGENT}")
    assert {r.span_id for r in evaluated.results} == {hex_span(agent)}


@pytest.mark.parametrize("mode", MODES)
def test_processor_metrics(runs: dict[str, Run], mode: str, metric_samples: Any) -> None:
    m = metric_samples(runs[mode].registry)
    assert m.by_labels("agent_eval_traces_evaluated_total", "agent") == {(sc.AGENT,): 1.0}
    assert m.value("agent_eval_spans_kept_total") == 10.0
    assert m.value("agent_eval_processor_errors_total") == 0.0
    assert m.by_labels("agent_eval_results_total", "evaluator", "agent", "outcome") == {
        (evaluator, sc.AGENT, label): 1.0 for evaluator, label in EXPECTED_LABELS.items()
    }
