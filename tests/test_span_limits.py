"""What the producers' span limits dropped is recorded, never lost silently.

OpenTelemetry SDKs keep 128 attributes a span by default and count what they drop (the Python SDK drops the
oldest). OpenInference flattens a model call's whole message history into attributes
(``llm.input_messages.N.message.*``), so a long LangGraph run passes the limit on its later model calls. The
real run below (LangGraph ``create_react_agent``, the real OpenInference LangChain instrumentation, a scripted
model, the SDK's default limits) must come out with the count on the evaluation span, in the judge's prompt
(a real HTTP server speaking the OpenAI API), in the judge result's details and in the metric; with the limit
raised, nothing of that. The count travels through OTLP too (the SDK's own encoder, protobuf and JSON).

Values cut by a value length limit (``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``) carry no count; JSON cut that way is
told from malformed JSON, counted, and not read: not taken for a task or an answer either.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry, generate_latest

from otel_agent_eval import AgentEvalProcessor, assemble
from otel_agent_eval.formats.otlp_json import OTLPDecodeError
from otel_agent_eval.formats.otlp_json import spans as json_spans
from otel_agent_eval.records import OWN_SCOPE, SpanRecord, from_readable_span
from tests.formats.test_otlp import to_otlp_json
from tests.openai_server import FakeOpenAI, answer

pytest.importorskip("langgraph")
pytest.importorskip("openinference.instrumentation.langchain")

TURNS = 24
"""Tool-calling turns: the history of the last model calls holds ~50 messages, ~150 flattened attributes."""


@dataclass
class LimitedRun:
    app_spans: list[ReadableSpan]
    own_spans: list[ReadableSpan]
    logs: list[Any]
    metrics: str
    prompts: list[str]


def evaluated_in_process(limits: SpanLimits, agent: Callable[[TracerProvider], None]) -> LimitedRun:
    """``agent`` run on a TracerProvider with ``limits``, evaluated in process (the deterministic evaluators and
    ``task_completion``, asking a real HTTP server speaking the OpenAI API): what came out."""
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

    exporter, log_exporter = InMemorySpanExporter(), InMemoryLogRecordExporter()
    provider = TracerProvider(span_limits=limits)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
    with FakeOpenAI(answer({"agent_failed": "no"})) as judge:
        env = {"OTEL_AGENT_EVAL_JUDGE_MODEL": "judge-1", "OTEL_AGENT_EVAL_JUDGE_BASE_URL": judge.base_url,
               "OTEL_AGENT_EVAL_JUDGE_API_KEY": "test", "OTEL_AGENT_EVAL_JUDGE_EVALUATORS": "task_completion"}
        registry = CollectorRegistry()
        processor = AgentEvalProcessor(env=env, registry=registry, settle_delay_seconds=0.05,
                                       tracer_provider=provider, logger_provider=logger_provider)
        provider.add_span_processor(processor)
        agent(provider)
        assert processor.force_flush(30_000)
        prompts = [json.dumps(r["body"]) for r in judge.requests]
        metrics = generate_latest(registry).decode()
    spans = exporter.get_finished_spans()
    provider.shutdown()
    logs = list(log_exporter.get_finished_logs())
    logger_provider.shutdown()

    def own(span: ReadableSpan) -> bool:
        return span.instrumentation_scope is not None and span.instrumentation_scope.name == OWN_SCOPE

    return LimitedRun([s for s in spans if not own(s)], [s for s in spans if own(s)], logs, metrics, prompts)


def long_langgraph_run(provider: TracerProvider) -> None:
    """A LangGraph ReAct agent of ``TURNS`` tool calls under the real OpenInference LangChain instrumentation."""
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.prebuilt import create_react_agent
    from openinference.instrumentation.langchain import LangChainInstrumentor

    from tests.frameworks.langgraph_scenarios import ScriptedToolModel

    @tool
    def lookup(query: str) -> str:
        """Look a query up."""
        return f"found {query}"

    script = [AIMessage(content=f"step {k}", tool_calls=[
        {"name": "lookup", "args": {"query": f"q{k}"}, "id": f"call_{k}", "type": "tool_call"}]) for k in range(TURNS)]
    script.append(AIMessage(content="All found."))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # create_react_agent moved to langchain.agents
            agent = create_react_agent(ScriptedToolModel(messages=iter(script)), [lookup], name="researcher")
            agent.invoke({"messages": [("user", "Find every q.")]})
    finally:
        instrumentor.uninstrument()


@pytest.fixture(scope="module")
def default_limits() -> Iterator[LimitedRun]:
    yield evaluated_in_process(SpanLimits(), long_langgraph_run)


@pytest.fixture(scope="module")
def raised_limits() -> Iterator[LimitedRun]:
    yield evaluated_in_process(SpanLimits(max_span_attributes=4096), long_langgraph_run)


def evaluation_span(run: LimitedRun, name: str) -> ReadableSpan:
    [span] = [s for s in run.own_spans if s.name == name]
    return span


def judge_details(run: LimitedRun) -> dict[str, Any]:
    [record] = [r.log_record for r in run.logs
                if (r.log_record.attributes or {}).get("gen_ai.evaluation.name") == "task_completion"]
    return json.loads(record.attributes["agent_eval.details"])


def test_the_default_limits_drop_attributes_of_the_long_run(default_limits: LimitedRun) -> None:
    """The setup this file is about: the SDK really dropped attributes, from the model calls' spans."""
    dropped = {s.name: s.dropped_attributes for s in default_limits.app_spans if s.dropped_attributes}
    assert sum(dropped.values()) > 100
    assert set(dropped) == {"ScriptedToolModel"}


def test_what_was_dropped_is_on_the_evaluation_spans_in_the_prompt_details_and_metric(default_limits: LimitedRun) -> None:
    dropped = sum(s.dropped_attributes for s in default_limits.app_spans)
    for name in ("evaluate_agent researcher", "judge_agent researcher"):
        attributes = evaluation_span(default_limits, name).attributes
        assert attributes["agent_eval.attributes_dropped"] == dropped
        assert "agent_eval.events_dropped" not in attributes
    [prompt] = default_limits.prompts
    assert f"The tracer dropped {dropped} attributes of this run's spans at its span limits" in prompt
    assert judge_details(default_limits)["judged"]["attributes_dropped"] == dropped
    assert f'agent_eval_span_limit_dropped_total{{kind="attributes"}} {float(dropped)}' in default_limits.metrics
    assert 'agent_eval_span_limit_dropped_total{kind="events"} 0.0' in default_limits.metrics


def test_with_the_limit_raised_nothing_is_said(raised_limits: LimitedRun) -> None:
    assert not any(s.dropped_attributes for s in raised_limits.app_spans)
    for name in ("evaluate_agent researcher", "judge_agent researcher"):
        assert "agent_eval.attributes_dropped" not in evaluation_span(raised_limits, name).attributes
    [prompt] = raised_limits.prompts
    assert "The tracer dropped" not in prompt
    assert "attributes_dropped" not in judge_details(raised_limits)["judged"]
    assert 'agent_eval_span_limit_dropped_total{kind="attributes"} 0.0' in raised_limits.metrics


# --- the counts through assembly and OTLP -------------------------------------------------------------------


def sdk_spans(limits: SpanLimits) -> list[ReadableSpan]:
    """An HTTP root, an agent, a model call with five events, a tool: each with six attributes."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=limits)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("app")
    padding = {f"app.field.{i}": i for i in range(4)}
    with tracer.start_as_current_span("GET /ask", attributes={**padding, "http.method": "GET", "http.route": "/ask"}):
        with tracer.start_as_current_span("invoke_agent helper", attributes={
                **padding, "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"}):
            with tracer.start_as_current_span("chat m", attributes={
                    **padding, "gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}) as chat:
                for i in range(5):
                    chat.add_event(f"gen_ai.note.{i}")
            with tracer.start_as_current_span("execute_tool lookup", attributes={
                    **padding, "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}):
                pass
    provider.shutdown()
    return list(exporter.get_finished_spans())


def test_the_run_sums_its_own_spans_drops_not_its_parents() -> None:
    spans = sdk_spans(SpanLimits(max_span_attributes=3, max_events=2))
    by_name = {s.name: s for s in spans}
    assert by_name["GET /ask"].dropped_attributes == 3  # above the agent: not the run's
    assert by_name["chat m"].dropped_events == 3
    [run] = assemble(spans)
    assert run.agent_name == "helper"
    assert run.attributes_dropped == sum(by_name[n].dropped_attributes for n in
                                         ("invoke_agent helper", "chat m", "execute_tool lookup")) == 9
    assert run.events_dropped == 3
    [whole] = assemble(sdk_spans(SpanLimits()))
    assert (whole.attributes_dropped, whole.events_dropped) == (0, 0)


def test_a_run_without_an_agent_span_counts_each_span_once() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=2))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("app").start_as_current_span("chat m", attributes={  # the oldest three dropped
            "a": 1, "b": 2, "c": 3, "gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}):
        pass
    provider.shutdown()
    [span] = exporter.get_finished_spans()
    [run] = assemble([span])
    assert run.attributes_dropped == span.dropped_attributes == 3


def test_the_counts_come_through_otlp_protobuf_and_json() -> None:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from otel_agent_eval.formats.otlp import spans_from_request

    spans = sdk_spans(SpanLimits(max_span_attributes=3, max_events=2))
    request = encode_spans(spans)  # what the SDK's OTLP exporters send
    expected = {s.context.span_id: (s.dropped_attributes, s.dropped_events) for s in spans}
    from_protobuf = spans_from_request(request)
    from_json = json_spans(json.loads(to_otlp_json(request)), "request")  # hex ids, as OTLP/JSON has them
    for records in (from_protobuf, from_json):
        assert {r.span_id: (r.dropped_attributes_count, r.dropped_events_count) for r in records} == expected
    assert [from_readable_span(s) for s in spans] == from_protobuf
    [run] = assemble(from_json)
    assert (run.attributes_dropped, run.events_dropped) == (9, 3)


def otlp_json_span(**fields: Any) -> dict[str, Any]:
    span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "chat", "startTimeUnixNano": "1", "endTimeUnixNano": "2"}
    return {"resourceSpans": [{"scopeSpans": [{"spans": [{**span, **fields}]}]}]}


@pytest.mark.parametrize(("fields", "expected"), [
    ({}, (0, 0)),
    ({"droppedAttributesCount": 7, "droppedEventsCount": 2}, (7, 2)),
    ({"dropped_attributes_count": 7, "dropped_events_count": "2"}, (7, 2)),  # snake case, a decimal string
])
def test_otlp_json_counts(fields: dict[str, Any], expected: tuple[int, int]) -> None:
    [record] = json_spans(otlp_json_span(**fields), "doc")
    assert type(record) is SpanRecord
    assert (record.dropped_attributes_count, record.dropped_events_count) == expected


@pytest.mark.parametrize(("fields", "message"), [
    ({"droppedAttributesCount": -1}, r"\.droppedAttributesCount: -1 is negative"),
    ({"droppedEventsCount": "many"}, r"\.droppedEventsCount: 'many' is not an integer"),
])
def test_otlp_json_bad_counts_name_the_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(OTLPDecodeError, match=message):
        json_spans(otlp_json_span(**fields), "doc")


def test_offline_spill_keeps_the_counts() -> None:
    """``evaluate`` spills records to disk beyond its bound: they come back whole, counts included."""
    from otel_agent_eval.cli.evaluate import _from_spill_row, _spill_row

    for record in (from_readable_span(s) for s in sdk_spans(SpanLimits(max_span_attributes=3, max_events=2))):
        assert _from_spill_row(_spill_row(record), {}) == record


# --- attribute values cut short (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT) -----------------------------------------

MESSAGES = [
    {"role": "user", "parts": [{"type": "text", "content": 'Weather in "Paris" \\ today \u00e9\U0001F600?'}]},
    {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "w", "arguments": {"city": "Paris", "n": 1.5}},
                                    {"type": "text", "content": "It is sunny in Paris today, 21 degrees and clear."}]},
]


def test_json_cut_anywhere_is_told_from_malformed_json() -> None:
    """Every cut of a message list, once something whole precedes it, is JSON cut short; never an error."""
    from otel_agent_eval.assembly.dialects.cut_json import cut_short

    full = json.dumps(MESSAGES)
    flags = [cut_short(full[:cut]) for cut in range(1, len(full))]
    first = len('[{"role": "user"')
    assert all(flags[first - 1:]) and not flags[0]  # "[": nothing whole yet


@pytest.mark.parametrize("text", ["{", "[1 2", "[1, 2]]", '{"a": 1}}', '{"a": ' * 50, '"a string cut', "12"])
def test_malformed_json_is_not_taken_for_json_cut_short(text: str) -> None:
    from otel_agent_eval.assembly.dialects.cut_json import cut_short

    assert not cut_short(text)


def run_with_value_limit(limit: int | None, final: str) -> LimitedRun:
    """The scripted agent (semconv, content in JSON attributes) under the SDK's value length limit, evaluated."""
    from otel_agent_eval.cli.scripted_agent import ScriptedAgent, Turn

    def scripted(provider: TracerProvider) -> None:
        ScriptedAgent("weather", {"w": lambda city: f"sunny in {city}"}).run(
            provider.get_tracer("app"), "What is the weather in Paris today?",
            [Turn(None, [("w", {"city": "Paris"})]), Turn(final)])

    return evaluated_in_process(SpanLimits(max_attribute_length=limit), scripted)


ANSWER = "It is sunny in Paris today: 21 degrees, a light breeze from the west, and clear skies all afternoon. " * 3


def researcher_under(instrumentor_class: Any) -> Callable[[TracerProvider], None]:
    """The LangGraph researcher scenario traced by a LangChain instrumentation on the provider it is given."""
    from tests.frameworks import langgraph_scenarios as sc

    def researcher(provider: TracerProvider) -> None:
        instrumentor = instrumentor_class()
        instrumentor.instrument(tracer_provider=provider)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                sc.run_researcher()
        finally:
            instrumentor.uninstrument()

    return researcher


def cut_state_run(instrumentor_class: Any, graph_span: str, attribute: str) -> tuple[LimitedRun, ReadableSpan]:
    """The LangGraph researcher traced by ``instrumentor_class`` under a 600-character value limit, which cuts its
    graph's state (``attribute`` of the ``graph_span`` span; checked): the run, and its judge evaluation span."""
    run = evaluated_in_process(SpanLimits(max_attribute_length=600), researcher_under(instrumentor_class))
    [graph] = [s for s in run.app_spans if s.name == graph_span]
    assert len(graph.attributes[attribute]) == 600  # the setup: the state was cut
    [evaluation] = [s for s in run.own_spans if s.name == "judge_agent researcher"]
    return run, evaluation


def test_a_langgraph_state_cut_by_the_value_limit_is_not_taken_for_the_answer() -> None:
    """OpenInference records the LangGraph graph's whole state as its ``output.value`` JSON; cut at 600 characters
    it was taken, raw, for the run's final response (a JSON fragment). Now the answer comes from the last model
    call, the cut is counted, and the judge is told."""
    from openinference.instrumentation.langchain import LangChainInstrumentor

    from tests.frameworks import langgraph_scenarios as sc

    run, evaluation = cut_state_run(LangChainInstrumentor, "researcher", "output.value")
    assert evaluation.attributes["agent_eval.values_cut_short"] == 1
    [prompt] = run.prompts
    assert json.dumps(sc.ANSWER)[1:-1] in prompt and "additional_kwargs" not in prompt  # not the state's JSON
    assert "1 recorded values were cut short by the tracer" in prompt
    assert 'agent_eval_span_limit_dropped_total{kind="values_cut_short"} 1.0' in run.metrics
    details = judge_details(run)
    assert details["judged"]["values_cut_short"] == 1


def test_a_final_response_cut_short_is_not_held_against_the_agent() -> None:
    """The answer's message cut at 200 characters (the task's fits): its JSON is not read, so no final response is
    known. task_completion is skipped (``partial_trace``) without asking the judge; before, it asked about a run
    that "answered nothing" and failed the agent for what the recorder dropped."""
    run = run_with_value_limit(200, ANSWER)
    logs, metrics, prompts = run.logs, run.metrics, run.prompts
    assert prompts == []
    [result] = [r.log_record for r in logs if (r.log_record.attributes or {}).get("gen_ai.evaluation.name") == "task_completion"]
    assert result.attributes["gen_ai.evaluation.score.label"] == "skipped"
    assert "cut before its final response" in result.attributes["gen_ai.evaluation.explanation"]
    assert 'outcome="skipped",reason="partial_trace"' in metrics


def test_without_a_value_limit_nothing_is_cut() -> None:
    run = run_with_value_limit(None, ANSWER)
    metrics, prompts = run.metrics, run.prompts
    [evaluation] = [s for s in run.own_spans if s.name == "judge_agent weather"]
    assert "agent_eval.values_cut_short" not in evaluation.attributes
    [prompt] = prompts
    assert "cut short" not in prompt and json.dumps(ANSWER.strip())[1:-1] in prompt
    assert 'agent_eval_span_limit_dropped_total{kind="values_cut_short"} 0.0' in metrics


def test_an_openllmetry_agent_payload_cut_short_is_not_taken_for_the_answer() -> None:
    """OpenLLMetry's agent span records its output as ``traceloop.entity.output`` JSON; cut short, the raw
    fragment was the run's final response. Now the model call's answer is, and the cut is counted."""
    state = json.dumps({"outputs": {"messages": [{"role": "user", "content": "Weather?"},
                                                 {"role": "assistant", "content": "Sunny in Paris."}]}})
    agent = SpanRecord(trace_id=1, span_id=1, parent_span_id=None, name="weather.agent", start_time_unix_nano=0,
                       end_time_unix_nano=10, attributes={
                           "traceloop.span.kind": "agent", "traceloop.entity.name": "weather",
                           "traceloop.entity.output": state[:60]})
    llm = SpanRecord(trace_id=1, span_id=2, parent_span_id=1, name="openai.chat", start_time_unix_nano=1,
                     end_time_unix_nano=9, attributes={
                         "llm.request.type": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "m",
                         "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "Weather?",
                         "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "Sunny in Paris."})
    [run] = assemble([agent, llm])
    assert run.final_output == "Sunny in Paris."
    assert run.values_cut_short == 1 and run.cut
    assert run.issues == [("traceloop.entity.output: JSON cut short at 60 characters (an attribute value length "
                           "limit?); kept raw")]


def test_an_openllmetry_langgraph_state_cut_by_the_value_limit_is_not_taken_for_the_answer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The real OpenLLMetry LangChain instrumentation records the graph's state as ``traceloop.entity.output``;
    cut at 600 characters it was the run's final response (``{"outputs": {"messages": [{"lc": 1, ...``)."""
    pytest.importorskip("opentelemetry.instrumentation.langchain")
    from tests.frameworks import langgraph_scenarios as sc
    from tests.test_frameworks_openllmetry import FullyUninstrumentedLangchainInstrumentor

    monkeypatch.setenv("TRACELOOP_TRACE_CONTENT", "true")
    run, evaluation = cut_state_run(FullyUninstrumentedLangchainInstrumentor, "researcher.workflow",
                                    "traceloop.entity.output")
    assert evaluation.attributes["agent_eval.values_cut_short"] >= 1
    [prompt] = run.prompts
    assert json.dumps(sc.ANSWER)[1:-1] in prompt and '"lc": 1' not in prompt and "constructor" not in prompt


def test_a_langgraph_state_cut_in_langsmiths_export_is_not_taken_for_the_answer() -> None:
    """LangSmith's OTel export records the graph's whole state as ``gen_ai.completion`` JSON; cut at 600 characters,
    it is counted and not read, and the record the judge gets holds the task, every tool call with its result, and
    the answer from the last model call (before this dialect was read, the task and answer were raw JSON)."""
    from tests.frameworks import langgraph_scenarios as sc
    from tests.frameworks.langgraph_run import LangSmithOtel

    run, evaluation = cut_state_run(LangSmithOtel, "researcher", "gen_ai.completion")
    assert evaluation.attributes["agent_eval.values_cut_short"] == 1
    [prompt] = run.prompts
    record = json.loads(prompt)["messages"][-1]["content"]
    assert f"TASK (user input): {json.dumps(sc.QUESTION)}" in record
    assert f"FINAL RESPONSE: {json.dumps(sc.ANSWER)}" in record
    assert record.count('result: "no results"') == 3 and 'result: "404 not found"' in record
    assert "1 recorded values were cut short by the tracer" in record
    assert 'agent_eval_span_limit_dropped_total{kind="values_cut_short"} 1.0' in run.metrics
