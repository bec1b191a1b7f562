"""Intake of content carried by log records.

Instrumentations in event-only content mode (OpenTelemetry's
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=EVENT_ONLY``, the older
``gen_ai.*.message`` / ``gen_ai.choice`` log events) put prompts and completions
into log records correlated by trace and span id. A SpanProcessor never sees
them, so ``AgentEvalLogProcessor`` hands them to the same intake (the OTLP
receiver does the same with the records it decodes); ``classify_log`` is the one
rule for which records are content. The pipeline folds them into their spans when
the trace completes (``pipeline/completion.py``, ``join_log_records``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk._logs import LogRecordProcessor

from ..records import LogRecordData, event_name_of

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import ReadWriteLogRecord

    from ..pipeline.core import Pipeline

OWN_EVENTS = frozenset({"gen_ai.evaluation.result"})
CONTENT = "content"


def classify_log(event_name: str | None, trace_id: int | None, span_id: int | None) -> str:
    """``content`` for a GenAI content record tied to a span; else why not: ``own``, ``no_span``, ``not_genai``."""
    if event_name in OWN_EVENTS:
        return "own"  # our own results, sent back to us
    if not trace_id or not span_id:
        return "no_span"
    if not event_name or not event_name.startswith("gen_ai."):
        return "not_genai"
    return CONTENT


def log_record_data(record: Any, event_name: str | None) -> LogRecordData:
    """The pipeline's copy of an SDK ``LogRecord`` (its attribute dict copied, the body as is)."""
    return LogRecordData(
        trace_id=record.trace_id,
        span_id=record.span_id,
        time_unix_nano=record.timestamp or record.observed_timestamp or 0,
        event_name=event_name,
        attributes=dict(record.attributes or {}),
        body=record.body,
    )


class AgentEvalLogProcessor(LogRecordProcessor):
    """Hands GenAI content log records to an AgentEvalProcessor's intake. O(1), never raises.

    Its lifecycle is the span processor's: ``shutdown`` shuts the span processor down
    (``on_shutdown``: whichever provider shuts down first drains the pipeline, while the
    other still exports what the drain emits), ``force_flush`` returns at once (the
    records are flushed with their traces by the span processor's ``force_flush``).
    """

    def __init__(self, pipeline: Pipeline, on_shutdown: Callable[[], None] = lambda: None) -> None:
        self.pipeline = pipeline  # its intake is read per record: a forked child has a new one
        self._on_shutdown = on_shutdown

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        try:
            record = log_record.log_record
            name = event_name_of(record.event_name, record.attributes)
            if classify_log(name, record.trace_id, record.span_id) == CONTENT:
                self.pipeline.intake.offer_log(log_record_data(record, name))
        except Exception:  # noqa: BLE001 - never raise into the host app
            self.pipeline.internal_error("on_emit", "otel-agent-eval: error in the log record processor")

    emit = on_emit  # older SDKs call emit()

    def shutdown(self) -> None:
        """The span processor's ``shutdown`` (idempotent): it owns the pipeline."""
        self._on_shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
