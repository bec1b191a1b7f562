"""Content carried by log records, joined to the spans it belongs to.

Instrumentations in event-only content mode (OpenTelemetry's
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=EVENT_ONLY``, the older
``gen_ai.*.message`` / ``gen_ai.choice`` log events) put prompts and completions
into log records correlated by trace and span id. A SpanProcessor never sees
them, so ``AgentEvalLogProcessor`` hands them to the same pipeline, and
``join_log_records`` folds them into the span records before assembly:

- ``gen_ai.client.inference.operation.details`` carries the inference span's
  attributes (``gen_ai.input.messages``, ``gen_ai.output.messages``, ...): they
  fill attributes the span does not have;
- any other ``gen_ai.*`` event becomes a span event of that span (its body's
  keys as event attributes), where the dialects read span events.
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk._logs import LogRecordProcessor

from ..assembly.dialects.base import plain
from ..records import LogRecordData, SpanEvent, SpanRecord

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import ReadWriteLogRecord

    from ..pipeline.core import Pipeline

DETAILS_EVENT = "gen_ai.client.inference.operation.details"
OWN_EVENTS = frozenset({"gen_ai.evaluation.result"})


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


def event_name_of(event_name: str | None, attributes: Mapping[str, Any] | None) -> str | None:
    """The event name, from the record field or (older SDKs) the ``event.name`` attribute."""
    if event_name:
        return event_name
    if attributes:
        value = attributes.get("event.name")
        return str(value) if value else None
    return None


def is_genai_content(event_name: str | None) -> bool:
    return bool(event_name) and event_name.startswith("gen_ai.") and event_name not in OWN_EVENTS  # type: ignore[union-attr]


def _body_attributes(body: Any) -> dict[str, Any]:
    """A log body as event attributes; structured values (tuples, read-only mappings) as plain lists/dicts."""
    if isinstance(body, Mapping):
        return {str(k): plain(v) for k, v in body.items()}
    if body is None:
        return {}
    return {"content": plain(body)}


def _attributes(log: LogRecordData) -> dict[str, Any]:
    return {**{str(k): plain(v) for k, v in (log.attributes or {}).items()}, **_body_attributes(log.body)}


TOOL_DEFINITIONS = "gen_ai.tool.definitions"


def _fuller_definitions(candidate: Any, current: Any) -> bool:
    """Do ``candidate`` tool definitions have parameters where ``current`` has none?

    With content capture off for one signal, the GenAI instrumentation writes the definitions
    there without parameters (ADK 2 with event-only capture: on the span; with span-only
    capture: in the log record); the other signal's copy is the complete one.
    """

    def has_parameters(value: Any) -> bool:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return False
        return isinstance(value, (list, tuple)) and any(
            isinstance(item, Mapping) and item.get("parameters") for item in value)

    return has_parameters(candidate) and not has_parameters(current)


def join_log_records(records: Sequence[SpanRecord], logs: Sequence[LogRecordData]) -> list[SpanRecord]:
    """Fold GenAI log records into the span records they belong to. Pure.

    Logs whose span is not among ``records`` are ignored (the caller counts them).
    """
    if not logs:
        return list(records)
    by_span: dict[int, list[LogRecordData]] = defaultdict(list)
    for log in logs:
        if log.span_id is not None:
            by_span[log.span_id].append(log)
    joined = []
    for record in records:
        mine = by_span.get(record.span_id)
        if not mine:
            joined.append(record)
            continue
        attributes = dict(record.attributes)
        events = list(record.events)
        for log in sorted(mine, key=lambda l: l.time_unix_nano):
            name = event_name_of(log.event_name, log.attributes) or "log"
            if name == DETAILS_EVENT:
                for key, value in _attributes(log).items():
                    if key not in attributes or (key == TOOL_DEFINITIONS and _fuller_definitions(value, attributes[key])):
                        attributes[key] = value
            else:
                events.append(SpanEvent(name, log.time_unix_nano, _attributes(log)))
        joined.append(dataclasses.replace(record, attributes=attributes, events=tuple(events)))
    return joined


class AgentEvalLogProcessor(LogRecordProcessor):
    """Hands GenAI content log records to an AgentEvalProcessor's pipeline. O(1), never raises."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        try:
            record = log_record.log_record
            name = event_name_of(record.event_name, record.attributes)
            if not is_genai_content(name) or not record.trace_id or not record.span_id:
                return
            self.pipeline.offer_log(log_record_data(record, name))
        except Exception:
            self.pipeline.stats.processor_errors.inc()
            self.pipeline.log_once("on_emit", "otel-agent-eval: error in the log record processor")

    emit = on_emit  # older SDKs call emit()

    def shutdown(self) -> None:
        """The span processor owns the pipeline and shuts it down."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
