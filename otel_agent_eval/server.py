"""``otel-agent-eval serve``: an OTLP receiver in front of the evaluation pipeline.

A thin shell over ``Pipeline``: apps in any language (or a Collector) send
OTLP traces and logs; spans go through ``Pipeline.offer_records`` into the same
buffering, assembly, sampling and evaluation as the in-process processor.

Ports (the usual ones):

- ``4318`` OTLP/HTTP: ``POST /v1/traces`` and ``/v1/logs``, ``application/x-protobuf``
  or ``application/json``, optionally ``Content-Encoding: gzip``;
- ``4317`` OTLP/gRPC: ``TraceService/Export`` and ``LogsService/Export`` (gzip too);
- ``9464`` admin: ``/metrics`` (Prometheus), ``/healthz`` (liveness), ``/readyz`` (readiness).

Backpressure. The pipeline's intake holds at most ``max_intake_spans`` spans.
When it is above the high-water mark (``--high-water`` x ``max_intake_spans``),
a whole request is refused: HTTP 429 + ``Retry-After`` / gRPC
``RESOURCE_EXHAUSTED`` + ``RetryInfo``; the OTLP exporters retry later, so
memory stays bounded and nothing is lost silently. A request admitted below
the mark that still overflows the intake gets a partial-success response
(``rejected_spans`` + ``error_message``). While draining (shutdown), requests
get HTTP 503 / gRPC ``UNAVAILABLE``.

Connections. OTLP/HTTP serves each connection on its own thread, at most
``max_http_connections`` at once (gRPC has its fixed pool, ``grpc_workers``); a
connection beyond that gets an immediate 503 + ``Retry-After`` and is closed (a
client that is already writing may see the close as a reset: OTLP exporters
retry either way),
and a connection idle for ``http_idle_seconds`` is closed, so a crowd of
clients or idle keep-alive connections cannot pile up threads.

Log records carrying GenAI content (event-only instrumentations) go to the
pipeline with their trace (``Pipeline.offer_log``) and are joined to their
spans when the trace completes (``logs.join_log_records``), whichever arrives
first; a log for a trace already completed counts as a late span.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from .config import Settings
from .evaluators import Evaluator, build_configured_evaluators
from .otlp import (
    LogRecordData,
    OTLPDecodeError,
    decode_logs_json,
    decode_logs_protobuf,
    decode_traces_json,
    decode_traces_protobuf,
    log_records_from_request,
    spans_from_request,
)
from .pipeline import Pipeline
from .logs import OWN_EVENTS, event_name_of, is_genai_content
from .records import SpanRecord
from .sinks.otel import SCOPE_NAME, OtelSink
from .sinks.otlp_export import ExportTally, bounded_log_processor, bounded_span_processor
from .sinks.prometheus import PrometheusSink
from .stats import AtomicCounter, LabelledCounts, PipelineStats, RunLabels

_logger = logging.getLogger("otel_agent_eval.server")

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
GRPC_RESOURCE_EXHAUSTED = 8
GRPC_UNAVAILABLE = 14
GRPC_INVALID_ARGUMENT = 3


@dataclass(frozen=True)
class ServeOptions:
    """Everything about the server that is not a pipeline ``Settings`` field."""

    host: str = "0.0.0.0"
    http_port: int | None = 4318
    """OTLP/HTTP port; 0 picks a free port, None disables."""
    grpc_port: int | None = 4317
    admin_port: int | None = 9464
    """``/metrics``, ``/healthz``, ``/readyz``."""
    drain_seconds: float = 30.0
    """On shutdown, evaluate buffered traces and export results within this deadline."""
    high_water: float = 0.8
    """Refuse whole requests when the intake holds more than this share of ``max_intake_spans``."""
    retry_after_seconds: int = 1
    max_request_bytes: int = 16 * 1024 * 1024
    """Largest request body, after decompression."""
    grpc_workers: int = 8
    max_http_connections: int = 64
    """OTLP/HTTP connections served at once; beyond, a new connection gets 503 and is closed."""
    http_idle_seconds: float = 60.0
    """An OTLP/HTTP connection idle this long (keep-alive, or a stalled client) is closed."""
    """Log records waiting for their span; beyond, the oldest is dropped (evicted)."""
    export_endpoint: str | None = None
    """Where results go over OTLP; default: the ``OTEL_EXPORTER_OTLP_*`` variables; none: only /metrics."""
    export_protocol: str | None = None
    """``http/protobuf`` or ``grpc``; default: ``OTEL_EXPORTER_OTLP_PROTOCOL`` or http/protobuf."""

    def __post_init__(self) -> None:
        if not 0 < self.high_water <= 1:
            raise ValueError(f"high_water must be in (0, 1], got {self.high_water}")
        if self.max_http_connections < 1:
            raise ValueError(f"max_http_connections must be >= 1, got {self.max_http_connections}")
        if self.http_idle_seconds <= 0:
            raise ValueError(f"http_idle_seconds must be > 0, got {self.http_idle_seconds}")
        if self.drain_seconds < 0:
            raise ValueError(f"drain_seconds must be >= 0, got {self.drain_seconds}")
        if self.export_protocol not in (None, "http/protobuf", "grpc"):
            raise ValueError(f"export protocol must be http/protobuf or grpc, got {self.export_protocol!r}")


class Refused(Exception):
    """The whole request is refused: ``overloaded`` (retry later) or ``draining`` (go elsewhere)."""

    def __init__(self, reason: str, retry_after: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


# --------------------------------------------------------------------------- counters


class ServerStats:
    def __init__(self) -> None:
        self.requests = LabelledCounts()  # (transport, signal, outcome)
        self.spans_rejected = AtomicCounter()  # partial success: intake full mid-request, or the drain began meanwhile
        self.own_spans = AtomicCounter()  # our own evaluation spans sent back to us: ignored
        self.log_records = LabelledCounts()  # (outcome,)


class ServerCollector(Collector):
    def __init__(self, server: EvalServer) -> None:
        self.server = server

    def collect(self) -> Iterator[Metric]:
        s = self.server.server_stats
        requests = CounterMetricFamily(
            "agent_eval_server_requests", "OTLP export requests, by outcome (ok, partial, overloaded, draining, invalid, too_large)",
            labels=["transport", "signal", "outcome"],
        )
        for labels, value in sorted(s.requests.snapshot().items()):
            requests.add_metric(list(labels), value)
        yield requests
        yield CounterMetricFamily(
            "agent_eval_server_spans_rejected",
            "Spans rejected in partial-success responses (intake full mid-request, or the drain began meanwhile)",
            value=s.spans_rejected.value,
        )
        yield CounterMetricFamily(
            "agent_eval_server_own_spans", "Spans of scope otel_agent_eval received back and ignored", value=s.own_spans.value
        )
        logs = CounterMetricFamily(
            "agent_eval_server_log_records", "Log records received, by outcome (accepted, not_genai, no_span, own, draining)",
            labels=["outcome"],
        )
        for labels, value in sorted(s.log_records.snapshot().items()):
            logs.add_metric(list(labels), value)
        yield logs
        yield GaugeMetricFamily("agent_eval_server_intake_spans", "Spans waiting for the collector thread", value=len(self.server.pipeline.intake))
        yield GaugeMetricFamily("agent_eval_server_ready", "1 when the server accepts data", value=1 if self.server.ready()[0] else 0)


def _otlp_providers(options: ServeOptions, settings: Settings, tally: ExportTally) -> tuple[Any, Any]:
    """TracerProvider and LoggerProvider exporting over OTLP, or (None, None) when no endpoint is configured.

    Their exporters are wrapped to count what they fail to send (``tally``).
    """
    env = os.environ
    endpoint = options.export_endpoint
    wants_traces = settings.emit_spans and env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() != "none"
    wants_logs = settings.emit_logs and env.get("OTEL_LOGS_EXPORTER", "otlp").strip().lower() != "none"
    configured = endpoint or any(
        env.get(k) for k in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")
    )
    if not configured or not (wants_traces or wants_logs):
        return None, None
    protocol = options.export_protocol or env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf").strip()
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        span_kwargs = log_kwargs = {"endpoint": endpoint} if endpoint else {}
    elif protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter  # type: ignore[assignment]
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # type: ignore[assignment]

        base = (endpoint or "").rstrip("/")
        span_kwargs = {"endpoint": base + "/v1/traces"} if endpoint else {}
        log_kwargs = {"endpoint": base + "/v1/logs"} if endpoint else {}
    else:
        raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL: use http/protobuf or grpc for results, got {protocol!r}")
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "otel-agent-eval"}))
    tracer_provider = logger_provider = None
    if wants_traces:
        tracer_provider = TracerProvider(resource=resource)
        tracer_provider.add_span_processor(
            bounded_span_processor(OTLPSpanExporter(**span_kwargs), tally, settings.export_max_queued_spans))
    if wants_logs:
        logger_provider = LoggerProvider(resource=resource)
        logger_provider.add_log_record_processor(
            bounded_log_processor(OTLPLogExporter(**log_kwargs), tally, settings.export_max_queued_log_records))
    return tracer_provider, logger_provider


# --------------------------------------------------------------------------- the server


class EvalServer:
    """OTLP/HTTP + OTLP/gRPC receivers and an admin HTTP server over one ``Pipeline``."""

    def __init__(
        self,
        settings: Settings | None = None,
        options: ServeOptions | None = None,
        *,
        evaluators: Sequence[Evaluator] | None = None,
        tracer_provider: Any = None,
        logger_provider: Any = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.settings = settings if settings is not None else Settings.load()
        self.options = options or ServeOptions()
        s = self.settings
        self.stats = PipelineStats()
        self.server_stats = ServerStats()
        run_labels = RunLabels(s.max_agent_labels, s.max_service_labels)
        self.registry = registry if registry is not None else CollectorRegistry()
        self.export_tally = ExportTally(on_failure=lambda n: self.stats.sink_errors.inc("otlp", amount=n))
        if tracer_provider is None and logger_provider is None:
            tracer_provider, logger_provider = _otlp_providers(self.options, s, self.export_tally)
            self._own_providers = [p for p in (tracer_provider, logger_provider) if p is not None]
        else:
            self._own_providers = []
        sinks: list[Any] = [PrometheusSink(self.registry, self.stats, run_labels)]
        if tracer_provider is not None or logger_provider is not None:
            sinks.append(
                OtelSink(tracer_provider, logger_provider, emit_spans=s.emit_spans and tracer_provider is not None,
                         emit_logs=s.emit_logs and logger_provider is not None)
            )
        self.exporting = len(sinks) > 1
        self.judge: Any = None
        if evaluators is None:
            evaluators, self.judge = build_configured_evaluators(s, registry=self.registry)
        self.pipeline = Pipeline(s, evaluators, sinks, stats=self.stats, run_labels=run_labels)
        self.registry.register(ServerCollector(self))
        self.high_water = max(1, int(s.max_intake_spans * self.options.high_water))
        self._offer_lock = threading.Lock()
        self._draining = False
        self._started = False
        self._http: ThreadingHTTPServer | None = None
        self._admin: ThreadingHTTPServer | None = None
        self._grpc: Any = None
        self._threads: list[threading.Thread] = []
        self.ports: dict[str, int] = {}

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> None:
        o = self.options
        self.pipeline.start()
        if o.admin_port is not None:
            self._admin = _http_server(o.host, o.admin_port, _AdminHandler, self, max_connections=8)
            self.ports["admin"] = self._admin.server_port
        if o.http_port is not None:
            self._http = _http_server(o.host, o.http_port, _OTLPHandler, self, max_connections=o.max_http_connections)
            self.ports["http"] = self._http.server_port
        if o.grpc_port is not None:
            self._grpc, self.ports["grpc"] = _grpc_server(self, o.host, o.grpc_port)
            self._grpc.start()
        for httpd in (self._admin, self._http):
            if httpd is not None:
                thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True,
                                          name=f"otel-agent-eval-http-{httpd.server_port}")
                thread.start()
                self._threads.append(thread)
        self._started = True

    def stop(self, drain_seconds: float | None = None) -> dict[str, Any]:
        """Stop accepting, evaluate what is buffered and export it within the deadline; count what is lost."""
        drain = self.options.drain_seconds if drain_seconds is None else drain_seconds
        deadline = time.monotonic() + drain
        self._draining = True
        with self._offer_lock:  # a request already past admit() finishes its offer; later ones see _draining
            pass
        before_evaluated = self.stats.traces_evaluated.total()
        at_stop = {"buffered_traces": self.stats.buffered_traces, "intake_spans": len(self.pipeline.intake),
                   "queued_evaluations": self.stats.queue_depth, "queued_judge_evaluations": self.stats.judge_queue_depth}
        if self._grpc is not None:
            self._grpc.stop(grace=min(2.0, drain)).wait(min(2.0, drain) + 1)
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        # Keep a share of the deadline for exporting the last results.
        flushed = self.pipeline.shutdown(timeout=max(0.0, (deadline - time.monotonic()) * (0.8 if self.exporting else 1.0)))
        if self.judge is not None:
            self.judge.close()
        for provider in self._own_providers:
            remaining_ms = int(max(0.0, deadline - time.monotonic()) * 1000)
            provider.force_flush(remaining_ms)  # True whatever the exporter did: the tally says what was sent
            provider.shutdown()
        not_exported = self.export_tally.not_exported()
        if self._admin is not None:
            self._admin.shutdown()
            self._admin.server_close()
        return {
            "drained": bool(flushed),
            "exported": not any(not_exported.values()),
            "not_exported": not_exported,
            "at_stop": at_stop,
            "evaluated_during_drain": self.stats.traces_evaluated.total() - before_evaluated,
            "traces_evaluated": self.stats.traces_evaluated.total(),
            "dropped_shutdown": self.stats.dropped.get("shutdown"),
            "judge_dropped_shutdown": self.stats.dropped.get("judge_shutdown"),
            "dropped": {reason: n for (reason,), n in sorted(self.stats.dropped.snapshot().items())},
            "traces_completed": {reason: n for (reason,), n in sorted(self.stats.traces_completed.snapshot().items())},
            "spans_received": self.stats.spans_received.value,
            "spans_rejected": self.server_stats.spans_rejected.value,
            "spans_dropped": {reason: n for (reason,), n in sorted(self.stats.spans_dropped_snapshot().items()) if n},
        }

    # -- health ----------------------------------------------------------------
    def alive(self) -> bool:
        return self.pipeline.alive

    def overloaded(self) -> bool:
        return len(self.pipeline.intake) >= self.high_water

    def ready(self) -> tuple[bool, str]:
        if not self._started:
            return False, "starting"
        if self._draining:
            return False, "draining"
        if not self.alive():
            return False, "pipeline stopped"
        if self.overloaded():
            return False, "overloaded"
        return True, "ready"

    # -- intake (request threads) ----------------------------------------------
    def admit(self) -> None:
        if self._draining:
            raise Refused("draining", self.options.retry_after_seconds)
        if self.overloaded():
            raise Refused("overloaded", self.options.retry_after_seconds)

    def receive_spans(self, records: list[SpanRecord]) -> int:
        """Feed decoded spans to the pipeline; returns how many were rejected (intake full)."""
        ours = [r for r in records if r.scope_name == SCOPE_NAME]
        if ours:  # our own evaluation spans looping back through a Collector
            for _ in ours:
                self.server_stats.own_spans.inc()
            records = [r for r in records if r.scope_name != SCOPE_NAME]
        full = self.stats.intake_full
        with self._offer_lock:  # so that the intake_full delta is this request's alone
            if self._draining:  # admitted before the drain began: refused now, and said so, not lost
                for _ in records:
                    self.server_stats.spans_rejected.inc()
                return len(records)
            before = full.value
            self.pipeline.offer_records(records)
            rejected = full.value - before
        if rejected:
            for _ in range(rejected):
                self.server_stats.spans_rejected.inc()
        return rejected

    def receive_logs(self, logs: list[LogRecordData]) -> None:
        """GenAI content log records go to the pipeline, which joins them to their spans."""
        with self._offer_lock:  # as for spans: nothing offered once the drain has begun
            for log in logs:
                self._receive_log(log)

    def _receive_log(self, log: LogRecordData) -> None:
        name = event_name_of(log.event_name, log.attributes)
        if self._draining:
            self.server_stats.log_records.inc("draining")
        elif name in OWN_EVENTS:
            self.server_stats.log_records.inc("own")  # our own results, sent back to us
        elif log.trace_id is None or log.span_id is None:
            self.server_stats.log_records.inc("no_span")
        elif not is_genai_content(name):
            self.server_stats.log_records.inc("not_genai")
        else:
            self.pipeline.offer_log(log)
            self.server_stats.log_records.inc("accepted")

    def count(self, transport: str, signal_name: str, outcome: str) -> None:
        self.server_stats.requests.inc(transport, signal_name, outcome)


# --------------------------------------------------------------------------- OTLP/HTTP


_BUSY_BODY = b"too many connections; retry later\n"
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: text/plain\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY)
)


class _BoundedHTTPServer(ThreadingHTTPServer):
    """A thread per connection, at most ``max_connections`` at once: the rest are answered 503 and closed."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type, app: EvalServer, max_connections: int) -> None:
        super().__init__(address, handler)
        self.app = app
        self._slots = threading.BoundedSemaphore(max_connections)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.app.count("http", "unknown", "too_many_connections")
            try:
                request.sendall(_BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def _http_server(host: str, port: int, handler: type, app: EvalServer, *, max_connections: int) -> ThreadingHTTPServer:
    return _BoundedHTTPServer((host, port), handler, app, max_connections)


class _TooLarge(Exception):
    pass


def _gunzip(data: bytes, limit: int) -> bytes:
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = decompressor.decompress(data, limit + 1)
    except zlib.error as exc:
        raise OTLPDecodeError(f"invalid gzip body: {exc}") from exc
    if len(out) > limit:
        raise _TooLarge()
    return out


_DECODERS = {
    ("traces", PROTOBUF): decode_traces_protobuf,
    ("traces", JSON): decode_traces_json,
    ("logs", PROTOBUF): decode_logs_protobuf,
    ("logs", JSON): decode_logs_json,
}


def _trace_response(rejected: int, message: str) -> Any:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    response = ExportTraceServiceResponse()
    if rejected:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = message
    return response


def _logs_response() -> Any:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

    return ExportLogsServiceResponse()


def _rejected_message(rejected: int, app: EvalServer) -> str:
    if app._draining:
        return f"{rejected} spans rejected: the server is draining (shutting down); send them to another replica"
    return f"{rejected} spans rejected: evaluation intake full ({app.settings.max_intake_spans} spans); retry later"


class _OTLPHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "otel-agent-eval"

    def setup(self) -> None:
        self.timeout = self.server.app.options.http_idle_seconds  # type: ignore[attr-defined]
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        _logger.debug("%s " + format, self.address_string(), *args)

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        app: EvalServer = self.server.app  # type: ignore[attr-defined]
        signal_name = {"/v1/traces": "traces", "/v1/logs": "logs"}.get(self.path.split("?", 1)[0])
        content_type = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        try:
            body = self._read_body(app.options.max_request_bytes)
        except _TooLarge:
            self._status(413, "request body too large", JSON, close=True)
            app.count("http", signal_name or "unknown", "too_large")
            return
        except (OSError, ValueError):
            self.close_connection = True
            return
        if signal_name is None:
            self._status(404, f"unknown path {self.path}; use /v1/traces or /v1/logs", JSON)
            return
        if content_type not in (PROTOBUF, JSON):
            self._status(415, f"unsupported Content-Type {content_type!r}; use {PROTOBUF} or {JSON}", JSON)
            return
        try:
            app.admit()
            encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
            if encoding == "gzip":
                body = _gunzip(body, app.options.max_request_bytes)
            elif encoding != "identity":
                self._status(415, f"unsupported Content-Encoding {encoding!r}; use gzip or none", content_type)
                return
            data = _DECODERS[(signal_name, content_type)](body)
        except Refused as refused:
            app.count("http", signal_name, refused.reason)
            code = 429 if refused.reason == "overloaded" else 503
            self._status(code, f"{refused.reason}: retry after {refused.retry_after}s", content_type,
                         headers={"Retry-After": str(refused.retry_after)})
            return
        except _TooLarge:
            app.count("http", signal_name, "too_large")
            self._status(413, "request body too large after decompression", content_type)
            return
        except OTLPDecodeError as exc:
            app.count("http", signal_name, "invalid")
            self._status(400, str(exc), content_type)
            return
        if signal_name == "traces":
            rejected = app.receive_spans(data)
            response = _trace_response(rejected, _rejected_message(rejected, app))
            app.count("http", signal_name, "partial" if rejected else "ok")
        else:
            app.receive_logs(data)
            response = _logs_response()
            app.count("http", signal_name, "ok")
        if content_type == JSON:
            self._send(200, JSON, json_format.MessageToJson(response, indent=None).encode())
        else:
            self._send(200, PROTOBUF, response.SerializeToString())

    def _read_body(self, limit: int) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks, size = [], 0
            while True:
                length = int(self.rfile.readline(65537).split(b";", 1)[0].strip() or b"0", 16)
                if length == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                size += length
                if size > limit:
                    raise _TooLarge()
                chunks.append(self.rfile.read(length))
                self.rfile.readline(65537)
        length = int(self.headers.get("Content-Length") or 0)
        if length > limit:
            raise _TooLarge()
        return self.rfile.read(length) if length else b""

    def _status(self, code: int, message: str, content_type: str, *, headers: dict[str, str] | None = None,
                close: bool = False) -> None:
        """An error response: a google.rpc.Status, as protobuf or JSON like the request."""
        from google.rpc import status_pb2

        status = status_pb2.Status(code=GRPC_UNAVAILABLE if code in (429, 503) else GRPC_INVALID_ARGUMENT, message=message)
        if content_type == PROTOBUF:
            body = status.SerializeToString()
        else:
            content_type, body = JSON, json.dumps({"code": status.code, "message": message}).encode()
        if close:
            self.close_connection = True
        self._send(code, content_type, body, headers)

    def _send(self, code: int, content_type: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)


class _AdminHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "otel-agent-eval"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        _logger.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:  # noqa: N802
        app: EvalServer = self.server.app  # type: ignore[attr-defined]
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            encoder, content_type = choose_encoder(self.headers.get("Accept"))
            self._send(200, content_type, encoder(app.registry))
        elif path == "/healthz":
            alive = app.alive() or app._draining
            self._send(200 if alive else 503, "text/plain; charset=utf-8", b"ok\n" if alive else b"pipeline stopped\n")
        elif path == "/readyz":
            ready, reason = app.ready()
            self._send(200 if ready else 503, "text/plain; charset=utf-8", f"{reason}\n".encode())
        else:
            self._send(404, "text/plain; charset=utf-8", b"not found: use /metrics, /healthz or /readyz\n")

    def _send(self, code: int, content_type: str, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


# --------------------------------------------------------------------------- OTLP/gRPC


def _retry_metadata(code: int, message: str, retry_after: int) -> tuple[tuple[str, bytes], ...]:
    """RetryInfo both where grpc-go reads it (status details) and where the Python exporter does."""
    from google.protobuf.any_pb2 import Any as AnyProto
    from google.rpc import error_details_pb2, status_pb2

    retry = error_details_pb2.RetryInfo()
    retry.retry_delay.seconds = retry_after
    detail = AnyProto()
    detail.Pack(retry)
    status = status_pb2.Status(code=code, message=message, details=[detail])
    return (("grpc-status-details-bin", status.SerializeToString()), ("google.rpc.retryinfo-bin", retry.SerializeToString()))


def _grpc_server(app: EvalServer, host: str, port: int) -> tuple[Any, int]:
    import grpc
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    def refuse(context: Any, signal_name: str, refused: Refused) -> None:
        app.count("grpc", signal_name, refused.reason)
        if refused.reason == "overloaded":
            code, grpc_code = GRPC_RESOURCE_EXHAUSTED, grpc.StatusCode.RESOURCE_EXHAUSTED
        else:
            code, grpc_code = GRPC_UNAVAILABLE, grpc.StatusCode.UNAVAILABLE
        message = f"{refused.reason}: retry after {refused.retry_after}s"
        context.set_trailing_metadata(_retry_metadata(code, message, refused.retry_after))
        context.abort(grpc_code, message)

    class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 - generated name
            try:
                app.admit()
                records = spans_from_request(request)
            except Refused as refused:
                refuse(context, "traces", refused)
            except OTLPDecodeError as exc:
                app.count("grpc", "traces", "invalid")
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            rejected = app.receive_spans(records)
            app.count("grpc", "traces", "partial" if rejected else "ok")
            return _trace_response(rejected, _rejected_message(rejected, app))

    class LogsService(logs_service_pb2_grpc.LogsServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:  # noqa: N802
            try:
                app.admit()
                logs = log_records_from_request(request)
            except Refused as refused:
                refuse(context, "logs", refused)
            except OTLPDecodeError as exc:
                app.count("grpc", "logs", "invalid")
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            app.receive_logs(logs)
            app.count("grpc", "logs", "ok")
            return _logs_response()

    size = app.options.max_request_bytes
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=app.options.grpc_workers, thread_name_prefix="otel-agent-eval-grpc"),
        options=[("grpc.max_receive_message_length", size), ("grpc.so_reuseport", 0)],
        maximum_concurrent_rpcs=app.options.grpc_workers * 4,
    )
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(TraceService(), server)
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(LogsService(), server)
    bound = server.add_insecure_port(f"{'[::]' if host in ('::', '') else host}:{port}")
    if bound == 0:
        raise OSError(f"cannot bind OTLP/gRPC to {host}:{port}")
    return server, bound


# --------------------------------------------------------------------------- entry point


def serve(settings: Settings, options: ServeOptions, *, out: Any = sys.stdout) -> int:
    """Run until SIGTERM/SIGINT, then drain. Prints one JSON line when listening and one when stopped."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server = EvalServer(settings, options)
    server.start()
    if not server.exporting:
        _logger.warning("no OTLP endpoint configured (OTEL_EXPORTER_OTLP_ENDPOINT or --export-endpoint): results only on /metrics")
    print(json.dumps({"event": "listening", **server.ports}), file=out, flush=True)
    first_signal: list[float] = []

    def on_signal(signum: int, frame: Any) -> None:
        # No locks here: the handler runs in the main thread between two bytecodes, possibly inside a
        # ``threading.Event.wait`` that holds the Event's (non-reentrant) lock; ``Event.set`` would
        # deadlock there, and serve would hang on SIGTERM. The main loop polls the list instead.
        if first_signal and time.monotonic() - first_signal[0] > 1.0:  # a second signal (not a duplicate): give up
            os._exit(128 + signum)
        if not first_signal:
            first_signal.append(time.monotonic())

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while not first_signal:
        time.sleep(0.2)
    _logger.info("signal received: draining for up to %gs", options.drain_seconds)
    summary = server.stop()
    print(json.dumps({"event": "stopped", **summary}), file=out, flush=True)
    return 0


__all__ = ["EvalServer", "Refused", "ServeOptions", "serve"]
