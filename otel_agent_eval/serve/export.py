"""Where ``serve`` sends its results: OTLP providers from ``--export-endpoint`` or the ``OTEL_EXPORTER_OTLP_*`` variables."""

from __future__ import annotations

import os
from typing import Any

from ..config import Settings
from ..sinks.otlp_export import (
    ExportTally,
    bounded_log_processor,
    bounded_span_processor,
    hashed_once,
)


def otlp_providers(endpoint: str | None, protocol: str | None, settings: Settings, tally: ExportTally) -> tuple[Any, Any]:
    """TracerProvider and LoggerProvider exporting over OTLP, or (None, None) when no endpoint is configured.

    Their exporters are wrapped to count what they fail to send (``tally``). Not shut down at
    exit (``shutdown_on_exit=False``): ``EvalServer.stop`` does it within the drain deadline
    (``finish_export``), and an exit handler waiting on a stalled endpoint would outlast it.
    """
    env = os.environ
    wants_traces = settings.emit_spans and env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() != "none"
    wants_logs = settings.emit_logs and env.get("OTEL_LOGS_EXPORTER", "otlp").strip().lower() != "none"
    configured = endpoint or any(
        env.get(k) for k in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")
    )
    if not configured or not (wants_traces or wants_logs):
        return None, None
    protocol = protocol or env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf").strip()
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter,
        )

        span_kwargs = log_kwargs = {"endpoint": endpoint} if endpoint else {}
    elif protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter  # type: ignore[assignment]
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter,  # type: ignore[assignment]
        )

        base = (endpoint or "").rstrip("/")
        span_kwargs = {"endpoint": base + "/v1/traces"} if endpoint else {}
        log_kwargs = {"endpoint": base + "/v1/logs"} if endpoint else {}
    else:
        raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL: use http/protobuf or grpc for results, got {protocol!r}")
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "otel-agent-eval"}))
    resource = hashed_once(resource)
    tracer_provider = logger_provider = None
    if wants_traces:
        tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        tracer_provider.add_span_processor(
            bounded_span_processor(OTLPSpanExporter(**span_kwargs), tally, settings.export_max_queued_spans))
    if wants_logs:
        logger_provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
        logger_provider.add_log_record_processor(
            bounded_log_processor(OTLPLogExporter(**log_kwargs), tally, settings.export_max_queued_log_records))
    return tracer_provider, logger_provider
