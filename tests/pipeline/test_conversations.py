"""Runs sharing a conversation id see the earlier runs as prior turns: offline, online, in the judge."""

from __future__ import annotations

import json

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_agent_eval import AgentEvalProcessor, AgentTrace, EvalResult, Evaluator, assemble
from otel_agent_eval.cli.scripted_agent import ScriptedAgent, Turn
from otel_agent_eval.pipeline.conversations import ConversationStore, stitch

AGENT = ScriptedAgent("assistant", {})


def run_conversation(provider: TracerProvider, conversation: str, tasks: list[str]) -> None:
    tracer = provider.get_tracer("app")
    for task in tasks:
        AGENT.run(tracer, task, [Turn(f"answer to {task}")], conversation_id=conversation)


class SeesPriorTurns(Evaluator):
    name = "sees_prior_turns"

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str | None, list[str | None]]] = []

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        self.seen.append((trace.input, [t.input for t in trace.prior_turns]))
        return [self.scored(trace, 1.0, "ok")]


def test_stitch_orders_by_start_and_keeps_conversations_apart() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    run_conversation(provider, "c1", ["hi", "my name is Ada"])
    run_conversation(provider, "c2", ["other"])
    run_conversation(provider, "c1", ["what is my name?"])
    traces = stitch(assemble(exporter.get_finished_spans()))
    by_input = {t.input: t for t in traces}
    assert [t.input for t in by_input["what is my name?"].prior_turns] == ["hi", "my name is Ada"]
    assert [t.final_output for t in by_input["what is my name?"].prior_turns] == ["answer to hi", "answer to my name is Ada"]
    assert by_input["other"].prior_turns == [] and by_input["hi"].prior_turns == []
    again = AgentTrace.model_validate_json(by_input["what is my name?"].model_dump_json())
    assert again == by_input["what is my name?"]


def test_online_store_is_bounded() -> None:
    store = ConversationStore(max_conversations=2, max_turns=2)
    base = dict(trace_id="0" * 32, agent_name="a")
    for n, conversation in enumerate(["a", "a", "a", "b", "c"]):
        store.attach(AgentTrace(**base, conversation_id=conversation, input=str(n), start_time_unix_nano=n))
    assert len(store) == 2  # "a" was the least recently used
    later = store.attach(AgentTrace(**base, conversation_id="a", input="5", start_time_unix_nano=5))
    assert later.prior_turns == []  # forgotten with its conversation
    store2 = ConversationStore(max_turns=2)
    for n in range(4):
        last = store2.attach(AgentTrace(**base, conversation_id="x", input=str(n), start_time_unix_nano=n))
    assert [t.input for t in last.prior_turns] == ["1", "2"]


def test_processor_gives_evaluators_the_prior_turns() -> None:
    evaluator = SeesPriorTurns()
    provider = TracerProvider()
    processor = AgentEvalProcessor([evaluator], env={}, registry=CollectorRegistry(), settle_delay_seconds=0,
                                   emit_spans=False, emit_logs=False, max_evaluations_per_second=0)
    provider.add_span_processor(processor)
    run_conversation(provider, "c1", ["first"])
    assert processor.force_flush(10_000)
    run_conversation(provider, "c1", ["second"])
    assert processor.force_flush(10_000)
    provider.shutdown()
    assert evaluator.seen == [("first", []), ("second", ["first"])]


def test_tool_definitions_reach_the_trace() -> None:
    definitions = [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}):
        with tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat", "gen_ai.tool.definitions": json.dumps(definitions)}):
            pass
    (trace,) = assemble(exporter.get_finished_spans())
    assert trace.tool_definitions == definitions
