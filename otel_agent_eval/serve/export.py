"""Where ``serve`` sends its results: OTLP from ``--export-endpoint`` or the ``OTEL_EXPORTER_OTLP_*`` variables.

``result_export`` encodes results itself (``sinks/otlp_direct.py``) and sends the requests through
the SDK OTLP exporters' own transport, so every ``OTEL_EXPORTER_OTLP_*`` setting (endpoint,
headers, certificates, compression, timeout) and their retries apply as before. The seam, the
narrowest one each exporter has for a request already encoded:

- gRPC: the exporter mixin's ``_translate_data`` hook (SDK items -> request message), overridden
  in a subclass to parse our bytes; ``export`` -> ``_export`` keeps its channel, metadata,
  deadline and retries (``_count_data`` overridden too, for its own metrics);
- http/protobuf: ``exporter._client.export(bytes)`` (``_OTLPHTTPClient``: compression, headers,
  retries with backoff and ``Retry-After``), the call the exporter's ``export`` makes once it has
  serialised the SDK items; the exporter's request size limit is checked here as it does.

Both are private to the SDK: when the installed exporters do not have them (an older or newer
release), ``result_export`` logs it once and falls back to the SDK providers (``otlp_providers``),
which export the same data (``tests/sinks/test_otlp_direct.py``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from ..config import Settings
from ..sinks import Sink
from ..sinks.otel import OtelSink
from ..sinks.otlp_direct import (
    DirectOtlpSink,
    ResultQueue,
    resource_and_scope,
    schedule_delay,
)
from ..sinks.otlp_export import (
    EXPORT_BATCH,
    ExportTally,
    bounded_log_processor,
    bounded_span_processor,
    hashed_once,
)

_logger = logging.getLogger("otel_agent_eval.export")


class Configured:
    """What the arguments and ``OTEL_*`` variables ask of the result export."""

    def __init__(self, endpoint: str | None, protocol: str, traces: bool, logs: bool) -> None:
        self.protocol = protocol
        self.traces = traces
        self.logs = logs
        if protocol == "grpc":
            self.span_kwargs = self.log_kwargs = {"endpoint": endpoint} if endpoint else {}
        elif protocol == "http/protobuf":
            base = (endpoint or "").rstrip("/")
            self.span_kwargs = {"endpoint": base + "/v1/traces"} if endpoint else {}
            self.log_kwargs = {"endpoint": base + "/v1/logs"} if endpoint else {}
        else:
            raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL: use http/protobuf or grpc for results, got {protocol!r}")

    def exporter_classes(self) -> tuple[Any, Any]:
        """The SDK's span and log exporter classes for the protocol."""
        if self.protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
                OTLPLogExporter,
            )
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter,
            )

            return OTLPSpanExporter, OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http._log_exporter import (
            OTLPLogExporter as HttpLogExporter,
        )
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpSpanExporter,
        )

        return HttpSpanExporter, HttpLogExporter

    @staticmethod
    def resource() -> Any:
        """serve's resource: ``OTEL_RESOURCE_ATTRIBUTES`` / ``OTEL_SERVICE_NAME``, named otel-agent-eval by default."""
        from opentelemetry.sdk.resources import Resource

        resource = Resource.create()
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": "otel-agent-eval"}))
        return hashed_once(resource)


def configured(endpoint: str | None, protocol: str | None, settings: Settings) -> Configured | None:
    """The export asked for, or None when no endpoint is configured or no signal is wanted."""
    env = os.environ
    wants_traces = settings.emit_spans and env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() != "none"
    wants_logs = settings.emit_logs and env.get("OTEL_LOGS_EXPORTER", "otlp").strip().lower() != "none"
    endpoints = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")
    if not (endpoint or any(env.get(k) for k in endpoints)) or not (wants_traces or wants_logs):
        return None
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":  # the SDK providers would emit nothing
        return None
    return Configured(endpoint, protocol or env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf").strip(),
                      wants_traces, wants_logs)


def otlp_providers(endpoint: str | None, protocol: str | None, settings: Settings, tally: ExportTally) -> tuple[Any, Any]:
    """TracerProvider and LoggerProvider exporting over OTLP through the SDK, or (None, None) when no
    endpoint is configured: the fallback of ``result_export``, and the reference its output is held to.

    Their exporters are wrapped to count what they fail to send (``tally``). Not shut down at
    exit (``shutdown_on_exit=False``): ``EvalServer.stop`` does it within the drain deadline
    (``finish_export``), and an exit handler waiting on a stalled endpoint would outlast it.
    """
    config = configured(endpoint, protocol, settings)
    if config is None:
        return None, None
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk.trace import TracerProvider

    span_exporter, log_exporter = config.exporter_classes()
    resource = config.resource()
    tracer_provider = logger_provider = None
    if config.traces:
        tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        tracer_provider.add_span_processor(
            bounded_span_processor(span_exporter(**config.span_kwargs), tally, settings.export_max_queued_spans))
    if config.logs:
        logger_provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
        logger_provider.add_log_record_processor(
            bounded_log_processor(log_exporter(**config.log_kwargs), tally, settings.export_max_queued_log_records))
    return tracer_provider, logger_provider


Send = Callable[[bytes, int], bool]
DIRECT_SAMPLERS = ("parentbased_always_on", "always_on", "")
"""``OTEL_TRACES_SAMPLER`` values under which the SDK exports every evaluation span (what the direct
path does); another sampler keeps the SDK path, which applies it."""


def grpc_sender(exporter_class: Any, request_class: Any, kwargs: dict[str, Any]) -> tuple[Send, Callable[[], None]] | None:
    """``send`` over the gRPC exporter: a subclass whose ``_translate_data`` parses the encoded request."""
    if not hasattr(exporter_class, "_translate_data"):
        return None

    class PreEncoded(exporter_class):  # type: ignore[misc,valid-type]
        def _translate_data(self, data: Any) -> Any:
            return request_class.FromString(data[0])

        def _count_data(self, data: Any) -> int:
            return int(data[1])

    exporter = PreEncoded(**kwargs)

    def send(body: bytes, count: int) -> bool:
        return getattr(exporter.export((body, count)), "name", None) == "SUCCESS"

    return send, exporter.shutdown


def http_sender(exporter_class: Any, kwargs: dict[str, Any]) -> tuple[Send, Callable[[], None]] | None:
    """``send`` over the http/protobuf exporter's client (``_client.export(bytes)``)."""
    exporter = exporter_class(**kwargs)
    client = getattr(exporter, "_client", None)
    if not callable(getattr(client, "export", None)):
        exporter.shutdown()
        return None
    limit = getattr(exporter, "_max_request_size", 0) or 0

    def send(body: bytes, count: int) -> bool:
        if 0 < limit < len(body):
            _logger.warning("otel-agent-eval: dropping %d results: request of %d bytes over max_request_size %d",
                            count, len(body), limit)
            return False
        return bool(client.export(body).success)

    return send, exporter.shutdown


def result_export(endpoint: str | None, protocol: str | None, settings: Settings,
                  tally: ExportTally) -> tuple[Sink | None, list[Any]]:
    """The sink that sends serve's results over OTLP, and what ``finish_export`` flushes and shuts down
    (``force_flush`` / ``shutdown``); (None, []) when no endpoint is configured."""
    config = configured(endpoint, protocol, settings)
    if config is None:
        return None, []
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
        ExportLogsServiceRequest,
    )
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    span_exporter, log_exporter = config.exporter_classes()
    if config.protocol == "grpc":
        spans = grpc_sender(span_exporter, ExportTraceServiceRequest, config.span_kwargs) if config.traces else None
        logs = grpc_sender(log_exporter, ExportLogsServiceRequest, config.log_kwargs) if config.logs else None
    else:
        spans = http_sender(span_exporter, config.span_kwargs) if config.traces else None
        logs = http_sender(log_exporter, config.log_kwargs) if config.logs else None
    sampler = os.environ.get("OTEL_TRACES_SAMPLER", "parentbased_always_on").strip().lower()
    if (config.traces and spans is None) or (config.logs and logs is None) or sampler not in DIRECT_SAMPLERS:
        _logger.warning("otel-agent-eval: %s; exporting results through the OpenTelemetry SDK",
                        f"OTEL_TRACES_SAMPLER={sampler}" if sampler not in DIRECT_SAMPLERS
                        else "the installed OTLP exporters have no seam for encoded requests")
        for made in (spans, logs):
            if made is not None:
                made[1]()
        tracer_provider, logger_provider = otlp_providers(endpoint, protocol, settings, tally)
        return (OtelSink(tracer_provider, logger_provider, emit_spans=tracer_provider is not None,
                         emit_logs=logger_provider is not None),
                [p for p in (tracer_provider, logger_provider) if p is not None])
    prefix = resource_and_scope(config.resource())
    span_queue = log_queue = None
    if spans is not None:
        span_queue = ResultQueue("spans", prefix, spans[0], tally, settings.export_max_queued_spans,
                                 schedule_delay("OTEL_BSP_SCHEDULE_DELAY", 5000), EXPORT_BATCH, close=spans[1])
    if logs is not None:
        log_queue = ResultQueue("log_records", prefix, logs[0], tally, settings.export_max_queued_log_records,
                                schedule_delay("OTEL_BLRP_SCHEDULE_DELAY", 1000), EXPORT_BATCH, close=logs[1])
    sink = DirectOtlpSink(span_queue, log_queue)
    return sink, sink.queues
