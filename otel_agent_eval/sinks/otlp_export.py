"""Honest OTLP export of results: what reached the endpoint, what did not.

The OTLP exporters report failures only to a logger, the SDK's batch
processors drop what overflows their queue with a log line ("Queue full,
dropping ..."), and answer ``force_flush`` with True whatever happened.
``serve`` therefore wraps its exporters (``CountingExporter``) and puts its
own bound in front of each batch processor (``bounded_span_processor``,
``bounded_log_processor``): an item is handed on only while fewer than
``max_queued`` items are queued or being exported, so the SDK queue (sized to
the same bound) never overflows, and an item over the bound is dropped here
and counted. Results that never reached the endpoint (export failed, over the
queue bound, shutdown deadline passed) are counted, in
``agent_eval_sink_errors_total{sink="otlp"}`` and in the stop report's
``not_exported``. At shutdown (``finish_export``) the flush runs within the
time left and is never waited on beyond it: once the tally is closed, what
the exporters still hold (queued, or in a request the endpoint has not
answered) is counted as not exported, and later answers change nothing. ``serve``'s own encoder (``otlp_direct.ResultQueue``) keeps the same
tally behind the same bound; these wrappers serve its fallback to the SDK path.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

_logger = logging.getLogger("otel_agent_eval.export")

SIGNALS = ("spans", "log_records")


class ExportTally:
    """Items emitted to, exported by, and failed in the OTLP pipelines, per signal. Thread safe."""

    def __init__(self, on_failure: Callable[[int], None] = lambda n: None) -> None:
        self.on_failure = on_failure
        self._lock = threading.Lock()
        self.emitted = dict.fromkeys(SIGNALS, 0)
        self.exported = dict.fromkeys(SIGNALS, 0)
        self.failed = dict.fromkeys(SIGNALS, 0)
        self.dropped = dict.fromkeys(SIGNALS, 0)
        """Over the queue bound (or emitted once closed): never handed to the batch processor."""
        self.abandoned = dict.fromkeys(SIGNALS, 0)
        """Still queued or unanswered when the tally was closed (the shutdown deadline)."""
        self.closed = False

    def add(self, counts: dict[str, int], signal: str, amount: int) -> None:
        with self._lock:
            if not self.closed:  # once closed, the figures are final: a late answer changes nothing
                counts[signal] += amount

    def fail(self, signal: str, amount: int) -> None:
        """Count ``amount`` items the endpoint did not take (unless closed: then they were counted already)."""
        with self._lock:
            if self.closed:
                return
            self.failed[signal] += amount
        self.on_failure(amount)

    def close(self) -> int:
        """Final figures: what is still queued or in flight is counted as abandoned (and a failure); returns how many."""
        with self._lock:
            if self.closed:
                return 0
            self.closed = True
            for s in SIGNALS:
                self.abandoned[s] = self.emitted[s] - self.exported[s] - self.failed[s] - self.dropped[s]
            total = sum(self.abandoned.values())
        if total:
            self.on_failure(total)
        return total

    def admit(self, signal: str, max_queued: int) -> bool:
        """Count one emitted item; True if it fits: fewer than ``max_queued`` queued or being exported."""
        return self.admit_many(signal, 1, max_queued) == 1

    def admit_many(self, signal: str, count: int, max_queued: int) -> int:
        """``admit`` for ``count`` items in one go (one lock): how many fit, the first ones; the rest are dropped."""
        with self._lock:
            in_flight = self.emitted[signal] - self.exported[signal] - self.failed[signal] - self.dropped[signal]
            fit = 0 if self.closed else max(0, min(count, max_queued - in_flight))
            self.emitted[signal] += count
            self.dropped[signal] += count - fit
        if fit < count:
            self.on_failure(count - fit)
        return fit

    def not_exported(self) -> dict[str, int]:
        """Per signal: emitted but never confirmed by the endpoint (failed, dropped by a full queue, or left at shutdown)."""
        with self._lock:
            return {s: self.emitted[s] - self.exported[s] for s in SIGNALS}


class CountingExporter:
    """Wraps a span or log exporter: counts the items of each batch as exported or failed.

    Duck-typed for both ``SpanExporter`` and ``LogExporter`` (the batch
    processors call ``export``, ``shutdown`` and ``force_flush`` only); success
    is read by name, as the SDK has had two log result enums.
    """

    def __init__(self, exporter: Any, signal: str, tally: ExportTally) -> None:
        self._exporter = exporter
        self._signal = signal
        self._tally = tally

    def export(self, batch: Sequence[Any]) -> Any:
        try:
            result = self._exporter.export(batch)
        except Exception:
            self._failed(len(batch))
            raise
        if getattr(result, "name", None) == "SUCCESS":
            self._tally.add(self._tally.exported, self._signal, len(batch))
        else:
            self._failed(len(batch))
        return result

    def _failed(self, count: int) -> None:
        self._tally.fail(self._signal, count)

    def shutdown(self, *args: Any, **kwargs: Any) -> None:
        self._exporter.shutdown(*args, **kwargs)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self._exporter.force_flush(timeout_millis))


def hashed_once(resource: Any) -> Any:
    """The same SDK ``Resource`` with its hash computed once.

    The OTLP encoders group every exported item by resource, and ``Resource.__hash__``
    serialises all its attributes to JSON on each call: a fifth of the cost of
    encoding a result log record. A resource is immutable, so its hash can be kept.
    """
    from opentelemetry.sdk.resources import Resource

    class HashedResource(Resource):
        def __init__(self) -> None:
            super().__init__(resource.attributes, resource.schema_url)
            self._hash = Resource.__hash__(self)

        def __hash__(self) -> int:
            return self._hash

    return HashedResource()


EXPORT_BATCH = 512
"""Items per export request (the SDK default), or the queue bound if smaller."""


def bounded_span_processor(exporter: Any, tally: ExportTally, max_queued: int) -> Any:
    """A ``BatchSpanProcessor`` over ``exporter`` (counted) behind the tally's queue bound."""
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    batch = BatchSpanProcessor(CountingExporter(exporter, "spans", tally), max_queue_size=max_queued,  # type: ignore[arg-type]
                               max_export_batch_size=min(EXPORT_BATCH, max_queued))

    class BoundedSpans(SpanProcessor):
        def on_end(self, span: Any) -> None:
            if tally.admit("spans", max_queued):
                batch.on_end(span)

        def shutdown(self) -> None:
            batch.shutdown()

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return batch.force_flush(timeout_millis)

    return BoundedSpans()


def bounded_log_processor(exporter: Any, tally: ExportTally, max_queued: int) -> Any:
    """A ``BatchLogRecordProcessor`` over ``exporter`` (counted) behind the tally's queue bound."""
    from opentelemetry.sdk._logs import LogRecordProcessor
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

    batch = BatchLogRecordProcessor(CountingExporter(exporter, "log_records", tally), max_queue_size=max_queued,  # type: ignore[arg-type]
                                    max_export_batch_size=min(EXPORT_BATCH, max_queued))

    class BoundedLogRecords(LogRecordProcessor):
        def on_emit(self, log_record: Any) -> None:
            if tally.admit("log_records", max_queued):
                batch.on_emit(log_record)

        emit = on_emit  # older SDKs call emit()

        def shutdown(self) -> None:
            batch.shutdown()

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return batch.force_flush(timeout_millis)

    return BoundedLogRecords()


def finish_export(providers: Sequence[Any], tally: ExportTally, timeout: float) -> bool:
    """Flush and shut down ``providers`` within ``timeout`` seconds, then close ``tally``; True if they finished.

    The SDK's ``force_flush`` ignores its timeout and its ``shutdown`` waits up to 30 s per
    processor, each export up to the exporter's own timeout: against an endpoint that stalls,
    that is unbounded. So they run on a daemon thread, waited on only until ``timeout``; what
    they had not sent by then is counted (``ExportTally.close``) and left behind (the providers
    are built with ``shutdown_on_exit=False``, so nothing waits on them at exit either).
    """

    def flush_and_shut_down() -> None:
        for provider in providers:
            try:
                provider.force_flush()
                provider.shutdown()
            except Exception:  # an exporter failing at shutdown: what it did not send is counted below
                _logger.warning("otel-agent-eval: result export failed at shutdown", exc_info=True)

    worker = threading.Thread(target=flush_and_shut_down, name="otel-agent-eval-export-shutdown", daemon=True)
    worker.start()
    worker.join(max(0.0, timeout))
    tally.close()
    return not worker.is_alive()
