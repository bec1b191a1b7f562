"""Over the wire, a trace's batches arrive in any order: an HTTP root sent before its agent's
GenAI spans waits in ``serve`` and is adopted, so the trace completes on its root (not on the
idle timeout). Real ``serve`` subprocess, real OTLP/HTTP exporter, one request per batch."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tests.serve.server_process import SCENARIOS, ServerProcess, wait_for


def test_a_root_sent_before_its_genai_spans_is_adopted_and_completes_the_trace(tmp_path: Path) -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = provider.get_tracer("test-app")
    scenario = SCENARIOS[0]
    with tracer.start_as_current_span("POST /agent", kind=SpanKind.SERVER):
        scenario.agent.run(tracer, scenario.task, scenario.turns)
    *children, root = spans.get_finished_spans()
    assert root.parent is None and children

    # An idle timeout of 1 s: were the root dropped, the trace would complete on it instead.
    server = ServerProcess(tmp_path, env={"OTEL_AGENT_EVAL_IDLE_TIMEOUT_SECONDS": "1",
                                          "OTEL_AGENT_EVAL_SETTLE_DELAY_SECONDS": "0.1"})
    try:
        exporter = OTLPSpanExporter(endpoint=f"{server.http_endpoint}/v1/traces", timeout=10)
        assert exporter.export([root]) == SpanExportResult.SUCCESS  # the HTTP handler's process flushes first
        wait_for(lambda: server.metrics().sum("agent_eval_spans_received_total") == 1, 10, "the root received")
        assert exporter.export(list(children)) == SpanExportResult.SUCCESS
        wait_for(lambda: server.metrics().sum("agent_eval_traces_evaluated_total") == 1, 20, "the run evaluated")
        metrics = server.metrics()
        assert metrics.sum("agent_eval_traces_completed_total", reason="root_ended") == 1
        assert metrics.sum("agent_eval_traces_completed_total") == 1
        assert metrics.sum("agent_eval_waiting_spans_total", outcome="adopted") == 1
    finally:
        server.kill()
