"""Runs know where they came from: resource attributes and the agent span's own attributes reach
``AgentTrace.metadata`` from every source of records, and the metrics keep services apart."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as ResourceProto
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client import CollectorRegistry

from otel_agent_eval import AgentEvalProcessor, AgentTrace, EvalResult, Evaluator, assemble
from otel_agent_eval.cli.scripted_agent import ScriptedAgent, Turn
from otel_agent_eval.config import Settings
from otel_agent_eval.formats.langfuse import load_langfuse_export
from otel_agent_eval.formats.otlp import decode_traces_protobuf
from otel_agent_eval.metadata import MAX_VALUE_CHARS, run_metadata, service_of
from otel_agent_eval.records import from_readable_span
from tests.conftest import parse_registry

GOOD = [Turn("adding", [("add", {"a": 1, "b": 2})]), Turn("3")]


class Capture(Evaluator):
    """Keeps every run it is given; passes it."""

    name = "capture"

    def __init__(self) -> None:
        super().__init__()
        self.traces: list[AgentTrace] = []
        self.lock = threading.Lock()

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        with self.lock:
            self.traces.append(trace)
        return [self.scored(trace, 1.0, "seen")]


class Skipping(Evaluator):
    name = "skipping"

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        return [self.skipped(trace, "nothing to check", reason="not_applicable")]


def processor_for(provider: TracerProvider, *evaluators: Evaluator, **settings: Any) -> AgentEvalProcessor:
    settings.setdefault("settle_delay_seconds", 0.0)
    processor = AgentEvalProcessor(
        list(evaluators), registry=CollectorRegistry(), env={}, emit_spans=False, emit_logs=False,
        max_evaluations_per_second=0, max_traces_per_second=0, **settings,
    )
    provider.add_span_processor(processor)
    return processor


# --------------------------------------------------------------------------- SDK spans


def test_sdk_resource_and_agent_attributes_reach_metadata_through_the_processor() -> None:
    resource = Resource.create({"service.name": "shop", "service.version": "1.2.3", "deployment.environment": "staging",
                                "host.name": "not-wanted"})
    provider = TracerProvider(resource=resource)
    capture = Capture()
    processor = processor_for(provider, capture)
    ScriptedAgent("calc", {"add": lambda a, b: a + b}).run(provider.get_tracer("app"), "add 1 and 2", GOOD, conversation_id="c-1")
    assert processor.force_flush(10_000)
    processor.shutdown()

    (trace,) = capture.traces
    assert trace.metadata == {
        # the agent span's own attributes, its message content (gen_ai.input/output.messages) left out
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "calc",
        "gen_ai.provider.name": "demo",
        "gen_ai.request.model": "demo-model-1",
        "gen_ai.conversation.id": "c-1",
        # its resource's, the older spelling of the environment renamed
        "service.name": "shop",
        "service.version": "1.2.3",
        "deployment.environment.name": "staging",
    }


def test_spans_of_one_resource_share_one_mapping() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "shop", "deployment.environment.name": "prod",
                                                        "deployment.environment": "old-spelling"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("a"):
        with tracer.start_as_current_span("b"):
            pass
    first, second = (from_readable_span(span) for span in exporter.get_finished_spans())
    assert first.resource is second.resource  # shared, not copied per span
    assert first.resource == {"service.name": "shop", "deployment.environment.name": "prod"}  # the new spelling wins
    other = TracerProvider(resource=Resource.create({"service.name": "billing"}))
    other.add_span_processor(SimpleSpanProcessor(exporter))
    with other.get_tracer("app").start_as_current_span("c"):
        pass
    third = from_readable_span(exporter.get_finished_spans()[-1])
    assert third.resource == {"service.name": "billing"}
    with pytest.raises(TypeError):
        third.resource["service.name"] = "changed"  # type: ignore[index]


# --------------------------------------------------------------------------- OTLP and Langfuse


def _kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def _otlp_agent(trace_byte: int, service_attrs: list[KeyValue]) -> ResourceSpans:
    trace_id = bytes([trace_byte]) * 16
    agent = Span(trace_id=trace_id, span_id=b"\x00" * 7 + b"\x01", name="invoke_agent helper", start_time_unix_nano=1,
                 end_time_unix_nano=10, attributes=[_kv("gen_ai.operation.name", "invoke_agent"), _kv("gen_ai.agent.name", "helper")])
    chat = Span(trace_id=trace_id, span_id=b"\x00" * 7 + b"\x02", parent_span_id=b"\x00" * 7 + b"\x01", name="chat m",
                start_time_unix_nano=2, end_time_unix_nano=3,
                attributes=[_kv("gen_ai.operation.name", "chat"), _kv("gen_ai.output.messages", json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": "done"}]}]))])
    return ResourceSpans(resource=ResourceProto(attributes=service_attrs), scope_spans=[ScopeSpans(spans=[agent, chat])])


def test_otlp_one_mapping_per_resource_spans() -> None:
    request = ExportTraceServiceRequest(resource_spans=[
        _otlp_agent(1, [_kv("service.name", "shop"), _kv("service.version", "7"), _kv("deployment.environment", "prod")]),
        _otlp_agent(2, [_kv("service.name", "billing")]),
    ])
    records = decode_traces_protobuf(request.SerializeToString())
    assert records[0].resource is records[1].resource
    assert records[0].resource == {"service.name": "shop", "service.version": "7", "deployment.environment.name": "prod"}
    assert records[2].resource is records[3].resource == {"service.name": "billing"}
    assert all("service.name" not in r.attributes for r in records)  # resource attributes are not span attributes
    shop, billing = assemble(records)
    assert (shop.agent_name, billing.agent_name) == ("helper", "helper")
    assert service_of(shop.metadata) == "shop" and shop.metadata["deployment.environment.name"] == "prod"
    assert service_of(billing.metadata) == "billing"


def test_langfuse_export_carries_its_resource(tmp_path: Path) -> None:
    resource = {"service.name": "ai.koog", "service.version": "0.3.0", "service.instance.time": "2025-08-26T19:40:59Z"}

    def observation(span_id: str, name: str, parent: str | None, attributes: dict[str, Any]) -> dict[str, Any]:
        return {"id": span_id, "traceId": "ab" * 16, "name": name, "parentObservationId": parent,
                "startTime": "2025-08-26T19:41:00.000Z", "endTime": "2025-08-26T19:41:01.000Z",
                "metadata": {"attributes": attributes, "resourceAttributes": resource, "scope": {"name": "koog"}}}

    export = {"trace": {}, "observations": [
        observation("01" * 8, "invoke_agent koog", None, {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "koog"}),
        observation("02" * 8, "chat m", "01" * 8, {"gen_ai.operation.name": "chat"}),
    ]}
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export))
    agent, chat = load_langfuse_export(path)
    assert agent.resource is chat.resource
    assert agent.resource == {"service.name": "ai.koog", "service.version": "0.3.0"}
    assert "service.name" not in agent.attributes


# --------------------------------------------------------------------------- the rule


def test_run_metadata_keeps_short_scalars_and_leaves_content_out() -> None:
    attributes = {
        "gen_ai.agent.name": "a", "gen_ai.usage.input_tokens": 3, "temperature": 0.5, "streaming": True,
        "gen_ai.input.messages": "[]", "gen_ai.output.messages": "[]", "gen_ai.system_instructions": "be nice",
        "llm.input_messages.0.message.content": "hi", "input.value": "hi", "traceloop.entity.output": "{}",
        "gen_ai.response.finish_reasons": ("stop",), "notes": "x" * (MAX_VALUE_CHARS + 1),
        "service.name": "from-the-span",
    }
    assert run_metadata({"service.name": "shop"}, attributes) == {
        "gen_ai.agent.name": "a", "gen_ai.usage.input_tokens": 3, "temperature": 0.5, "streaming": True,
        "service.name": "shop",  # the resource's word wins
    }
    assert run_metadata({}, None) == {}


def test_service_label_value() -> None:
    assert service_of({"service.name": "shop"}) == "shop"
    assert service_of({}) == service_of({"service.name": ""}) == "unknown"
    assert service_of({"service.name": "unknown_service:python"}) == "unknown"  # the SDK's stand-in for no name


def test_max_service_labels_setting() -> None:
    assert Settings.load(env={}).max_service_labels == 20
    assert Settings.load(env={"OTEL_AGENT_EVAL_MAX_SERVICE_LABELS": "3"}).max_service_labels == 3


# --------------------------------------------------------------------------- a run cut while its agent span is open


@pytest.mark.parametrize(("named", "expected"), [(True, "planner"), (False, "unknown")])
def test_run_completed_with_its_agent_span_open_is_never_named_after_a_child(named: bool, expected: str) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "shop"}))
    capture = Capture()
    processor = processor_for(provider, capture, idle_timeout_seconds=0.3, max_trace_age_seconds=5.0)
    tracer = provider.get_tracer("app")
    chat_attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                       "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "hi"}]}])}
    if named:
        chat_attributes["gen_ai.agent.name"] = "planner"
    agent = tracer.start_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"})
    try:
        with tracer.start_as_current_span("step", context=_context_of(agent)):
            with tracer.start_as_current_span("chat m", kind=SpanKind.CLIENT, attributes=chat_attributes):
                pass
        deadline = time.monotonic() + 10
        while not capture.traces and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        agent.end()  # late: its trace was completed by the idle timeout
    assert processor.force_flush(10_000)
    processor.shutdown()

    (trace,) = capture.traces
    assert trace.partial and trace.agent_span_id == format(agent.get_span_context().span_id, "016x")
    assert trace.agent_name == expected
    assert trace.metadata == {"service.name": "shop"}  # no agent span: its resource only
    m = parse_registry(processor.registry)
    assert m.value("agent_eval_traces_completed_total", reason="idle_timeout") == 1
    assert m.by_labels("agent_eval_traces_evaluated_total", "agent", "service") == {(expected, "shop"): 1.0}
    assert m.value("agent_eval_late_spans_total") == 1


def _context_of(span: Any) -> Any:
    from opentelemetry import trace

    return trace.set_span_in_context(span)


# --------------------------------------------------------------------------- metrics


def test_results_carry_service_and_reason_and_services_fold_into_other() -> None:
    capture, skipping = Capture(), Skipping()
    registry = CollectorRegistry()
    processor = AgentEvalProcessor(
        [capture, skipping], registry=registry, env={}, emit_spans=False, emit_logs=False, settle_delay_seconds=0.0,
        max_evaluations_per_second=0, max_traces_per_second=0, max_service_labels=2,
    )
    for service in ("eu", "us", "asia", "eu"):
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        provider.add_span_processor(processor)
        ScriptedAgent("calc", {"add": lambda a, b: a + b}).run(provider.get_tracer("app"), "add", GOOD)
        assert processor.force_flush(10_000)
    processor.shutdown()

    m = parse_registry(registry)
    assert m.by_labels("agent_eval_results_total", "evaluator", "service", "outcome", "reason", "agent") == {
        ("capture", "eu", "pass", "", "calc"): 2.0,
        ("capture", "us", "pass", "", "calc"): 1.0,
        ("capture", "other", "pass", "", "calc"): 1.0,
        ("skipping", "eu", "skipped", "not_applicable", "calc"): 2.0,
        ("skipping", "us", "skipped", "not_applicable", "calc"): 1.0,
        ("skipping", "other", "skipped", "not_applicable", "calc"): 1.0,
    }
    assert m.by_labels("agent_eval_score_count", "evaluator", "agent", "service") == {
        ("capture", "calc", "eu"): 2.0, ("capture", "calc", "us"): 1.0, ("capture", "calc", "other"): 1.0,
    }
    assert m.by_labels("agent_eval_agent_traces_total", "agent", "service") == {
        ("calc", "eu"): 2.0, ("calc", "us"): 1.0, ("calc", "other"): 1.0,
    }
