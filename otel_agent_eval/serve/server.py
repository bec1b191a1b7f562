"""``otel-agent-eval serve``: an OTLP receiver in front of the evaluation pipeline.

A thin shell over ``Pipeline``: apps in any language (or a Collector) send
OTLP traces and logs; spans go through ``Intake.offer_records`` into the same
buffering, assembly, sampling and evaluation as the in-process processor.

Ports (the usual ones):

- ``4318`` OTLP/HTTP: ``POST /v1/traces`` and ``/v1/logs``, ``application/x-protobuf``
  or ``application/json``, optionally ``Content-Encoding`` gzip, deflate (or zlib), zstd, snappy or lz4;
- ``4317`` OTLP/gRPC: ``TraceService/Export`` and ``LogsService/Export`` (gzip too);
- ``9464`` admin: ``/metrics`` (Prometheus), ``/healthz`` (liveness), ``/readyz`` (readiness).

Every export request, HTTP or gRPC, goes through one ``EvalServer.receive(signal,
payload, content_type)``, which returns an ``Outcome`` each transport maps to its
own status codes (``server_http.py``: uvicorn + Starlette; ``server_grpc.py``).

Backpressure. The pipeline's intake holds at most ``max_intake_spans`` spans.
A request is refused whole when it would not fit: before its body is read when
the intake is above the high-water mark (``--high-water`` x ``max_intake_spans``),
and after decoding when its spans exceed the room left. HTTP answers 429 +
``Retry-After``, gRPC ``RESOURCE_EXHAUSTED`` + ``RetryInfo``; the OTLP exporters
retry later, so memory stays bounded and nothing is lost silently. Only a single
request larger than the whole intake, which no retry could ever fit, gets a
partial-success response (``rejected_spans`` + ``error_message``). While
draining (shutdown), requests get HTTP 503 / gRPC ``UNAVAILABLE``.

Security. Binds loopback unless ``--host`` says otherwise; TLS (optionally
mutual) on every port and bearer tokens on OTLP and ``/metrics`` come from files
re-read when they change (``server_security.py``); ``/healthz`` and ``/readyz``
stay open for orchestrator probes.

Log records carrying GenAI content (event-only instrumentations) go to the
pipeline with their trace (``Intake.offer_logs``) and are joined to their
spans when the trace completes (``completion.join_log_records``), whichever arrives
first; a log for a trace already completed counts as a late span.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import signal
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry

from ..config import Settings
from ..evaluators import Evaluator
from ..formats.otlp import (
    LogRecordData,
    OTLPDecodeError,
    decode_logs_json,
    decode_logs_protobuf,
    decode_traces_json,
    decode_traces_protobuf,
    protobuf_decoder,
)
from ..intake.logs import CONTENT, classify_log
from ..pipeline.build import build_pipeline
from ..records import SpanRecord, event_name_of
from ..sinks.otel import SCOPE_NAME
from ..sinks.otlp_export import ExportTally, finish_export
from .export import result_export
from .metrics import ServerCollector, ServerStats
from .otlp_grpc import grpc_server
from .otlp_http import JSON, PROTOBUF, UvicornThread, admin_app, otlp_app
from .outcome import Outcome, TooLarge, Unsupported, decompress
from .security import BearerTokens, TLSFiles

_logger = logging.getLogger("otel_agent_eval.server")



@dataclass(frozen=True)
class ServeOptions:
    """Everything about the server that is not a pipeline ``Settings`` field."""

    host: str = "127.0.0.1"
    """Loopback by default, like the Collector: ``0.0.0.0`` (every interface) is an explicit choice."""
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
    """OTLP/HTTP connections served at once (uvicorn's ``limit_concurrency``); beyond, requests get 503."""
    http_idle_seconds: float = 60.0
    """An OTLP/HTTP connection idle this long (keep-alive, silent, or stalled mid-body) is closed."""
    tls: TLSFiles | None = None
    """Certificate and key for TLS on every port; with a client CA, OTLP clients must present a certificate."""
    bearer_token_file: str | None = None
    """Tokens (one per line) OTLP clients and ``/metrics`` scrapers must send as ``Authorization: Bearer``."""
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


_DECODERS = {
    ("traces", PROTOBUF): decode_traces_protobuf,
    ("traces", JSON): decode_traces_json,
    ("logs", PROTOBUF): decode_logs_protobuf,
    ("logs", JSON): decode_logs_json,
}


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
        self.server_stats = ServerStats()
        self.export_tally = ExportTally(on_failure=lambda n: self.stats.sink_errors.inc("otlp", amount=n))
        result_sink = None
        self._own_providers: list[Any] = []  # what finish_export flushes and shuts down
        if tracer_provider is None and logger_provider is None:
            result_sink, self._own_providers = result_export(self.options.export_endpoint, self.options.export_protocol, s,
                                                             self.export_tally)
        self._built = build_pipeline(s, evaluators=evaluators, registry=registry, tracer_provider=tracer_provider,
                                     logger_provider=logger_provider, global_providers=False, result_sink=result_sink)
        self.registry = self._built.registry
        self.pipeline = self._built.pipeline
        self.stats = self.pipeline.stats
        self.exporting = self._built.exporting
        self.registry.register(ServerCollector(self))
        self.high_water = max(1, int(s.max_intake_spans * self.options.high_water))
        self._offer_lock = threading.Lock()
        self._draining = False
        self._started = False
        self.tokens = BearerTokens(self.options.bearer_token_file) if self.options.bearer_token_file else None
        self._http: UvicornThread | None = None
        self._admin: UvicornThread | None = None
        self._grpc: Any = None
        self.ports: dict[str, int] = {}

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> None:
        o = self.options
        self.pipeline.start()
        if o.admin_port is not None:
            with _naming("--admin-port", o.host, o.admin_port):
                self._admin = UvicornThread(admin_app(self), o.host, o.admin_port, tls=o.tls, client_cert=False,
                                            max_connections=8, idle_seconds=o.http_idle_seconds, name="admin")
            self.ports["admin"] = self._admin.port
        if o.http_port is not None:
            with _naming("--http-port", o.host, o.http_port):
                self._http = UvicornThread(otlp_app(self), o.host, o.http_port, tls=o.tls, client_cert=True,
                                           max_connections=o.max_http_connections, idle_seconds=o.http_idle_seconds,
                                           name="otlp-http", refused=lambda signal, outcome: self.count("http", signal, outcome),
                                           retry_after=o.retry_after_seconds)
            self.ports["http"] = self._http.port
        if o.grpc_port is not None:
            with _naming("--grpc-port", o.host, o.grpc_port):
                self._grpc, self.ports["grpc"] = grpc_server(self, o.host, o.grpc_port)
            self._grpc.start()
        for server in (self._admin, self._http):
            if server is not None:
                server.start()
        self._started = True

    def stop(self, drain_seconds: float | None = None) -> dict[str, Any]:
        """Stop accepting, evaluate what is buffered and export it, all within the deadline; count what is lost.

        Every step takes its share of the time left (``_left``), the result export too
        (``finish_export``): what the exporters have not sent when the deadline passes is
        counted as not exported, never waited on.
        """
        drain = self.options.drain_seconds if drain_seconds is None else drain_seconds
        deadline = time.monotonic() + drain

        def left(cap: float = float("inf")) -> float:
            return max(0.0, min(cap, deadline - time.monotonic()))

        self._draining = True
        with self._offer_lock:  # a request already past refusal() finishes its offer; later ones see _draining
            pass
        before_evaluated = self.stats.traces_evaluated.total()
        at_stop = {"buffered_traces": self.stats.buffered_traces, "intake_spans": len(self.pipeline.intake),
                   "queued_evaluations": self.stats.queue_depth, "queued_judge_evaluations": self.stats.judge_queue_depth}
        if self._grpc is not None:
            grace = left(2.0)
            self._grpc.stop(grace=grace).wait(grace)
        if self._http is not None:
            self._http.stop(timeout=left(2.0))
        # Keep a share of the deadline for exporting the last results.
        flushed = self._built.shutdown(left() * (0.8 if self.exporting else 1.0))
        finish_export(self._own_providers, self.export_tally, left())
        not_exported = self.export_tally.not_exported()
        if self._admin is not None:
            self._admin.stop(timeout=min(1.0, max(0.2, left())))
        return {
            "drained": bool(flushed),
            "exported": not any(not_exported.values()),
            "not_exported": not_exported,
            "sink_errors": {sink: n for (sink,), n in sorted(self.stats.sink_errors.snapshot().items())},
            "at_stop": at_stop,
            "evaluated_during_drain": self.stats.traces_evaluated.total() - before_evaluated,
            "traces_evaluated": self.stats.traces_evaluated.total(),
            "dropped_shutdown": self.stats.dropped.get("shutdown"),
            "judge_dropped_shutdown": self.stats.dropped.get("judge_shutdown"),
            "dropped": {reason: n for (reason,), n in sorted(self.stats.dropped.snapshot().items())},
            "traces_completed": {reason: n for (reason,), n in sorted(self.stats.traces_completed.snapshot().items())},
            "spans_received": self.stats.spans_received.value,
            "spans_rejected": self.server_stats.spans_rejected.total(),
            "spans_dropped": {reason: n for (reason,), n in sorted(self.stats.spans_dropped_snapshot().items()) if n},
        }

    @property
    def judge(self) -> Any:
        """The judge client the judge evaluators share (None without a judge)."""
        return self._built.evaluation.judge

    # -- health ----------------------------------------------------------------
    @property
    def draining(self) -> bool:
        return self._draining

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
    def refusal(self) -> Outcome | None:
        """The refusal every request gets right now, whatever it holds (checked before reading its body)."""
        if self._draining:
            return self._draining_outcome()
        if self.overloaded():
            return self._overloaded("intake above its high-water mark")
        return None

    def _draining_outcome(self) -> Outcome:
        retry = self.options.retry_after_seconds
        return Outcome("draining", f"draining (shutting down): retry after {retry}s, or another replica", retry_after=retry)

    def _overloaded(self, why: str) -> Outcome:
        retry = self.options.retry_after_seconds
        return Outcome("overloaded", f"overloaded ({why}): retry after {retry}s", retry_after=retry)

    def authenticate(self, transport: str, authorization: str | bytes | None) -> Outcome | None:
        """None when no token is configured or ``authorization`` carries a valid one; else the refusal, counted."""
        if self.tokens is None:
            return None
        reason = self.tokens.check(authorization)
        if reason is None:
            return None
        self.server_stats.auth_failures.inc(transport, reason)
        return Outcome("unauthenticated", f"bearer token {reason}")

    def receive(self, signal_name: str, payload: bytes, content_type: str, *, transport: str,
                encoding: str = "identity") -> Outcome:
        """One OTLP export request (``traces`` or ``logs``), as the bytes on the wire: decode it and feed the pipeline.

        The one path for HTTP and gRPC: refusals (draining, overloaded, would not fit),
        decompression bounded by ``max_request_bytes``, decoding, and the partial success
        that only a request larger than the whole intake can get. Counted by outcome.
        """
        outcome = self._receive(signal_name, payload, content_type, encoding)
        self.count(transport, signal_name, outcome.status)
        return outcome

    def _receive(self, signal_name: str, payload: bytes, content_type: str, encoding: str) -> Outcome:
        refused = self.refusal()
        if refused is not None:
            return refused
        decoder = _DECODERS.get((signal_name, content_type))
        if decoder is None:
            return Outcome("unsupported", f"unsupported Content-Type {content_type!r}; use {PROTOBUF} or {JSON}")
        try:
            data = decoder(decompress(payload, encoding, self.options.max_request_bytes))
        except Unsupported as exc:
            return Outcome("unsupported", str(exc))
        except TooLarge as exc:
            return Outcome("too_large", str(exc))
        except OTLPDecodeError as exc:
            return Outcome("invalid", str(exc))
        if signal_name == "traces":
            return self._take_spans(data)
        return self._take_logs(data)

    def _offer_whole(self, count: int, offer: Callable[[], int]) -> Outcome | int:
        """Offer ``count`` items to the intake if they fit; returns how many the intake rejected, or the refusal.

        Decided under a lock (only the collector thread takes from the intake meanwhile,
        so the room can only grow): a request that does not fit now is refused whole and
        retried by its client; one larger than the whole intake could never fit, so it is
        taken in part and the rest reported as partial success.
        """
        capacity = self.settings.max_intake_spans
        with self._offer_lock:
            if self._draining:  # passed refusal() before the drain began: refused now (retryable), nothing offered
                return self._draining_outcome()
            if capacity - len(self.pipeline.intake) < count <= capacity:
                return self._overloaded(f"{count} items do not fit in the intake now")
            return offer()

    def _take_spans(self, records: list[SpanRecord]) -> Outcome:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        ours = sum(1 for r in records if r.scope_name == SCOPE_NAME)
        if ours:  # our own evaluation spans looping back through a Collector
            self.server_stats.own_spans.inc(amount=ours)
            records = [r for r in records if r.scope_name != SCOPE_NAME]
        taken = self._offer_whole(len(records), lambda: self.pipeline.intake.offer_records(records))
        if isinstance(taken, Outcome):
            return taken
        response = ExportTraceServiceResponse()
        if not taken:
            return Outcome("ok", response=response)
        self.server_stats.spans_rejected.inc(amount=taken)
        message = (f"{taken} spans rejected: evaluation intake full (the request is larger than the whole intake, "
                   f"{self.settings.max_intake_spans} spans)")
        response.partial_success.rejected_spans = taken
        response.partial_success.error_message = message
        return Outcome("partial", message, rejected=taken, response=response)

    def _take_logs(self, logs: list[LogRecordData]) -> Outcome:
        """GenAI content log records go to the pipeline, which joins them to their spans."""
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

        wanted = []
        for log in logs:
            verdict = classify_log(event_name_of(log.event_name, log.attributes), log.trace_id, log.span_id)
            if verdict == CONTENT:
                wanted.append(log)
            else:
                self.server_stats.log_records.inc(verdict)

        taken = self._offer_whole(len(wanted), lambda: self.pipeline.intake.offer_logs(wanted))
        if isinstance(taken, Outcome):
            return taken
        self.server_stats.log_records.inc("accepted", amount=len(wanted) - taken)
        response = ExportLogsServiceResponse()
        if not taken:
            return Outcome("ok", response=response)
        message = f"{taken} log records rejected: evaluation intake full (the request is larger than the whole intake)"
        self.server_stats.log_records.inc("intake_full", amount=taken)
        response.partial_success.rejected_log_records = taken
        response.partial_success.error_message = message
        return Outcome("partial", message, rejected=taken, response=response)

    def count(self, transport: str, signal_name: str, outcome: str) -> None:
        self.server_stats.requests.inc(transport, signal_name, outcome)


# --------------------------------------------------------------------------- entry point


SERVER_GC_THRESHOLDS = (50_000, 10, 10)
"""Collector thresholds of the serve process: a young-generation pass every 50,000 new objects, not 700."""


def server_collector() -> None:
    """The cyclic collector for the serve process, once it has started: what startup made (modules,
    classes, the pipeline, the servers) is frozen out of every collection, and passes are rarer.

    Spans, runs and results are many young objects that live until their trace is evaluated and
    make few reference cycles (assembly about one object per trace over the test corpus, see
    ``cli/evaluate.py``): at CPython's thresholds (700, 10, 10) the collector traversed them again
    and again, and each full pass traversed every module too: 0.12-0.13 s of the ~2 s of CPU
    ``benchmarks/serve_ingest.py`` measures (``gc.callbacks``), 0-0.016 s with this. The older
    generations keep their thresholds, so cyclic garbage (asyncio's, assembly's) is still
    collected; what refcounting frees, nearly everything, is freed at once as before.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*SERVER_GC_THRESHOLDS)


@contextlib.contextmanager
def _naming(flag: str, host: str, port: int) -> Iterator[None]:
    """A port that cannot be bound, said with the flag that asked for it (serve binds three)."""
    try:
        yield
    except OSError as exc:
        raise OSError(f"{flag} {port}: cannot listen on {host}:{port}: {exc.strerror or exc}") from exc


def serve(settings: Settings, options: ServeOptions, *, out: Any = sys.stdout) -> int:
    """Run until SIGTERM/SIGINT, then drain. Prints one JSON line when listening and one when stopped."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        server = EvalServer(settings, options)
        server.start()
    except (OSError, ValueError, ssl.SSLError) as exc:  # a port taken, a certificate or token file unreadable
        print(f"otel-agent-eval serve: {exc}", file=sys.stderr)
        return 2
    server_collector()
    if not server.exporting:
        _logger.warning("no OTLP endpoint configured (OTEL_EXPORTER_OTLP_ENDPOINT or --export-endpoint): results only on /metrics")
    decoder = protobuf_decoder()
    if decoder == "upb":
        _logger.info("OTLP protobuf decoded through upb: the C decoder was not compiled at install (no C compiler) "
                     "or OTEL_AGENT_EVAL_PURE_PYTHON is true; decoding costs ~3x the CPU")
    print(json.dumps({"event": "listening", **server.ports, "protobuf_decoder": decoder}), file=out, flush=True)
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
    # The budget runs from the signal, not from this poll's wake-up (up to 0.2 s later).
    summary = server.stop(max(0.0, options.drain_seconds - (time.monotonic() - first_signal[0])))
    print(json.dumps({"event": "stopped", **summary}), file=out, flush=True)
    return 0


__all__ = ["EvalServer", "Outcome", "ServeOptions", "serve"]
