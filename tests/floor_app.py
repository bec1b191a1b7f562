"""The in-app path at the declared dependency floors: run by ``tests/test_dependency_floors.py``
with the floor venv's interpreter (this checkout on ``PYTHONPATH``), never collected by pytest.

The demo's scripted agents run through a real SDK ``TracerProvider`` with ``install()``'s processor;
the evaluation spans and the ``gen_ai.evaluation.result`` log records the SDK collects are encoded by
the floor's OTLP encoders (what its exporters send: an in-memory exporter alone accepted log records
that the OTLP encoder of SDK 1.35 could not encode) and read back from the protobuf; the Prometheus
samples come from a registry. Prints one JSON document.
"""

from __future__ import annotations

import json
from importlib import metadata

from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs import export as log_export
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client import CollectorRegistry

from otel_agent_eval import install
from otel_agent_eval.cli.demo import SCENARIOS
from otel_agent_eval.formats.otlp import attributes_to_dict

# The SDK renamed its in-memory log exporter (InMemoryLogExporter before 1.36).
InMemoryLogs = getattr(log_export, "InMemoryLogRecordExporter", None) or log_export.InMemoryLogExporter


def main() -> None:
    spans, logs, registry = InMemorySpanExporter(), InMemoryLogs(), CollectorRegistry()
    provider, logger_provider = TracerProvider(), LoggerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider.add_log_record_processor(log_export.SimpleLogRecordProcessor(logs))
    processor = install(provider, logger_provider, registry=registry, sample_rate=1.0, settle_delay_seconds=0.05,
                        max_evaluations_per_second=0)
    tracer = provider.get_tracer("floor-app")
    trace_ids = []
    for scenario in SCENARIOS:
        with tracer.start_as_current_span("POST /agent", kind=SpanKind.SERVER) as root:
            scenario.agent.run(tracer, scenario.task, scenario.turns)
        trace_ids.append(format(root.get_span_context().trace_id, "032x"))
    assert processor.force_flush(30_000), "the processor did not evaluate everything in 30 s"

    sent_spans = ExportTraceServiceRequest.FromString(encode_spans(spans.get_finished_spans()).SerializeToString())
    sent_logs = ExportLogsServiceRequest.FromString(encode_logs(logs.get_finished_logs()).SerializeToString())
    evaluation_spans = [
        {"trace_id": s.trace_id.hex(), "name": s.name, "attributes": attributes_to_dict(s.attributes)}
        for r in sent_spans.resource_spans for scope in r.scope_spans if scope.scope.name == "otel_agent_eval"
        for s in scope.spans
    ]
    results = [
        {"trace_id": record.trace_id.hex(), "span_id": record.span_id.hex(), "event_name": record.event_name,
         "attributes": attributes_to_dict(record.attributes)}
        for r in sent_logs.resource_logs for scope in r.scope_logs for record in scope.log_records
    ]
    samples = {}
    for family in registry.collect():
        for sample in family.samples:
            samples[sample.name] = samples.get(sample.name, 0.0) + sample.value
    versions = {name: metadata.version(name) for name in (
        "opentelemetry-api", "opentelemetry-sdk", "pydantic", "prometheus-client", "jsonschema")}
    processor.shutdown()
    print(json.dumps({"trace_ids": trace_ids, "scenarios": [s.name for s in SCENARIOS],
                      "evaluation_spans": evaluation_spans, "results": results, "samples": samples,
                      "versions": versions}))


if __name__ == "__main__":
    main()
