"""Honest OTLP export of results: what reached the endpoint, what did not.

The OTLP exporters report failures only to a logger, and the SDK's batch
processors answer ``force_flush`` with True whatever happened. ``serve``
therefore wraps its exporters (``CountingExporter``) and tallies what it
handed to its providers (``emitted_counters``), so that results that never
reached the endpoint (export failed, batch queue full, shutdown deadline
passed) are counted: failed exports in ``agent_eval_sink_errors_total{sink="otlp"}``,
all of them in the stop report's ``not_exported``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

SIGNALS = ("spans", "log_records")


class ExportTally:
    """Items emitted to, exported by, and failed in the OTLP pipelines, per signal. Thread safe."""

    def __init__(self, on_failure: Callable[[int], None] = lambda n: None) -> None:
        self.on_failure = on_failure
        self._lock = threading.Lock()
        self.emitted = dict.fromkeys(SIGNALS, 0)
        self.exported = dict.fromkeys(SIGNALS, 0)
        self.failed = dict.fromkeys(SIGNALS, 0)

    def add(self, counts: dict[str, int], signal: str, amount: int) -> None:
        with self._lock:
            counts[signal] += amount

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
        self._tally.add(self._tally.failed, self._signal, count)
        self._tally.on_failure(count)

    def shutdown(self, *args: Any, **kwargs: Any) -> None:
        self._exporter.shutdown(*args, **kwargs)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self._exporter.force_flush(timeout_millis))


def emitted_counters(tally: ExportTally) -> tuple[Any, Any]:
    """A span processor and a log record processor counting what their provider was given to export."""
    from opentelemetry.sdk._logs import LogRecordProcessor
    from opentelemetry.sdk.trace import SpanProcessor

    class EmittedSpans(SpanProcessor):
        def on_end(self, span: Any) -> None:
            tally.add(tally.emitted, "spans", 1)

    class EmittedLogRecords(LogRecordProcessor):
        def on_emit(self, log_record: Any) -> None:
            tally.add(tally.emitted, "log_records", 1)

        emit = on_emit  # older SDKs call emit()

        def shutdown(self) -> None:
            pass

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return True

    return EmittedSpans(), EmittedLogRecords()
