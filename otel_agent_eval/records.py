"""SpanRecord: the small immutable copy of a span that the pipeline needs.

Built from an SDK ``ReadableSpan`` (in process), from OTLP data (server, offline
files) or by hand in tests, so that assembly never depends on where a span came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .metadata import NO_RESOURCE, sdk_resource_metadata

OWN_SCOPE = "otel_agent_eval"
"""Instrumentation scope of everything the product emits (see ``sinks/otel.py``): never assembled."""

STATUS_UNSET = "UNSET"
STATUS_OK = "OK"
STATUS_ERROR = "ERROR"


MAX_CLEAN_DEPTH = 64


def clean(value: Any, depth: int = 0) -> Any:
    """A value that can always be encoded as UTF-8 text (JSON, Prometheus labels).

    Span attributes may hold bytes (OTLP ``bytes_value``, invalid UTF-8) and
    strings with lone surrogates (legal in Python, impossible in UTF-8): bytes
    are decoded and bad characters replaced, once, when the record is made.
    """
    kind = type(value)
    if kind is str:
        if value.isascii():
            return value
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-8", "replace").decode("utf-8")
    if kind is bytes or kind is bytearray:
        return bytes(value).decode("utf-8", "replace")
    if depth >= MAX_CLEAN_DEPTH:
        return value
    if kind is tuple or kind is list:
        for v in value:  # almost always clean already: check first, copy only when something changes
            t = type(v)
            if not ((t is str and v.isascii()) or t in _PLAIN) and clean(v, depth + 1) is not v:
                return kind(clean(v, depth + 1) for v in value)
        return value
    if isinstance(value, Mapping):
        if kind is dict:  # other mappings (the SDK's BoundedAttributes) always become a plain dict
            for k, v in value.items():
                t = type(v)
                if (type(k) is str and k.isascii() and ((t is str and v.isascii()) or t in _PLAIN)) or (
                    clean(k, depth + 1) is k and clean(v, depth + 1) is v
                ):
                    continue
                break
            else:
                return value
        return {clean(k, depth + 1): clean(v, depth + 1) for k, v in value.items()}
    return value


_PLAIN = frozenset({int, float, bool, type(None)})
"""Types that are clean as they are (with ASCII text: decided without a recursive call)."""


def _clean_fields(obj: Any, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        cleaned = clean(value)
        if cleaned is not value:
            object.__setattr__(obj, name, cleaned)


@dataclass(frozen=True, slots=True)
class SpanEvent:
    name: str
    time_unix_nano: int
    attributes: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _clean_fields(self, "name", "attributes")


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One finished span, reduced to what assembly and sampling read.

    ``attributes`` may also hold content joined from log records (see
    ``LogRecord`` handling in the processor); ``events`` are span events.
    ``resource`` is the emitting process's ``resource_metadata`` (``metadata.py``):
    one read-only mapping shared by every span of that resource, never copied per span.
    """

    trace_id: int
    span_id: int
    parent_span_id: int | None
    name: str
    start_time_unix_nano: int
    end_time_unix_nano: int
    attributes: Mapping[str, Any] = field(default_factory=dict)
    events: tuple[SpanEvent, ...] = ()
    status_code: str = STATUS_UNSET
    status_message: str | None = None
    kind: str = "INTERNAL"
    scope_name: str = ""
    parent_is_remote: bool = False
    resource: Mapping[str, Any] = field(default_factory=lambda: NO_RESOURCE)
    dropped_attributes_count: int = 0
    """Attributes the producer's SDK dropped at its span limits (OTLP's field of the same name): the Python
    SDK drops the oldest (a long flattened message history loses its start), the JavaScript SDK the newest."""
    dropped_events_count: int = 0
    """Span events the producer's SDK dropped at its span limits (OTLP's field of the same name)."""

    def __post_init__(self) -> None:
        _clean_fields(self, "name", "attributes", "status_message")

    @property
    def is_local_root(self) -> bool:
        """True for the first span of this trace in this process (no parent, or a remote one)."""
        return self.parent_span_id is None or self.parent_is_remote

    @property
    def is_error(self) -> bool:
        return self.status_code == STATUS_ERROR


@dataclass(frozen=True, slots=True)
class LogRecordData:
    """One log record, reduced to what content joining needs.

    GenAI instrumentations in event-only mode put prompts and completions into log
    records correlated to spans by ``trace_id`` / ``span_id`` (see ``intake/logs.py``).
    """

    trace_id: int | None
    span_id: int | None
    time_unix_nano: int
    event_name: str | None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    body: Any = None


def event_name_of(event_name: str | None, attributes: Mapping[str, Any] | None) -> str | None:
    """A log record's event name, from the record field or (older SDKs) the ``event.name`` attribute."""
    if event_name:
        return event_name
    if attributes:
        value = attributes.get("event.name")
        return str(value) if value else None
    return None


class _UncheckedSpanRecord:
    """Filled with plain slot stores, then made a ``SpanRecord`` by ``__class__`` assignment
    (Python allows it between classes with the same base and ``__slots__``)."""

    __slots__ = SpanRecord.__slots__  # type: ignore[attr-defined]


class _UncheckedSpanEvent:
    """The same for ``SpanEvent``."""

    __slots__ = SpanEvent.__slots__  # type: ignore[attr-defined]


def unchecked_span_record(
    *, trace_id: int, span_id: int, parent_span_id: int | None, name: str, start_time_unix_nano: int,
    end_time_unix_nano: int, attributes: Mapping[str, Any], events: tuple[SpanEvent, ...] = (),
    status_code: str = STATUS_UNSET, status_message: str | None = None, kind: str = "INTERNAL", scope_name: str = "",
    parent_is_remote: bool = False, resource: Mapping[str, Any] = NO_RESOURCE, dropped_attributes_count: int = 0,
    dropped_events_count: int = 0,
) -> SpanRecord:
    """A ``SpanRecord`` whose text is known to be clean already (decoded by a parser that refuses
    invalid UTF-8, bytes values decoded): ``clean`` skipped, a third of the cost of decoding a span.

    The frozen dataclass's own ``__init__`` sets each field through ``object.__setattr__``; here
    the same slots are filled by plain stores on a twin class and the object then becomes a
    ``SpanRecord`` (a genuine one: same type, fields, equality, hash, pickling): a fifth of the cost.
    """
    record = _UncheckedSpanRecord()
    record.trace_id = trace_id
    record.span_id = span_id
    record.parent_span_id = parent_span_id
    record.name = name
    record.start_time_unix_nano = start_time_unix_nano
    record.end_time_unix_nano = end_time_unix_nano
    record.attributes = attributes
    record.events = events
    record.status_code = status_code
    record.status_message = status_message
    record.kind = kind
    record.scope_name = scope_name
    record.parent_is_remote = parent_is_remote
    record.resource = resource
    record.dropped_attributes_count = dropped_attributes_count
    record.dropped_events_count = dropped_events_count
    record.__class__ = SpanRecord
    return record  # type: ignore[return-value]


def unchecked_span_event(name: str, time_unix_nano: int, attributes: Mapping[str, Any]) -> SpanEvent:
    """A ``SpanEvent`` whose text is known to be clean already (see ``unchecked_span_record``)."""
    event = _UncheckedSpanEvent()
    event.name = name
    event.time_unix_nano = time_unix_nano
    event.attributes = attributes
    event.__class__ = SpanEvent
    return event  # type: ignore[return-value]


def trace_id_hex(trace_id: int) -> str:
    """``"%032x" % trace_id``: its bytes' hex, a fourth cheaper, for an id in the 128 bits OTel ids have."""
    try:
        return trace_id.to_bytes(16, "big").hex()
    except (OverflowError, AttributeError):  # wider, negative, not an int: as ``%`` writes it (or fails)
        return "%032x" % trace_id  # noqa: UP031 - the contract: an __index__ object formats, format() would not


def span_id_hex(span_id: int) -> str:
    """``"%016x" % span_id``: its bytes' hex, a fourth cheaper, for an id in the 64 bits OTel ids have."""
    try:
        return span_id.to_bytes(8, "big").hex()
    except (OverflowError, AttributeError):  # wider, negative, not an int: as ``%`` writes it (or fails)
        return "%016x" % span_id  # noqa: UP031 - as above


def raw_attributes(span: Any) -> Mapping[str, Any]:
    """A span's attributes as a plain mapping: the SDK's internal dict when there is one.

    ``ReadableSpan.attributes`` wraps the SDK's ``BoundedAttributes`` in a proxy
    whose look-ups go through Python-level ``Mapping`` methods; the dict beneath
    is several times cheaper for the hot path and for copying.
    """
    raw = getattr(span, "_attributes", None)
    raw = getattr(raw, "_dict", raw)
    return raw if raw is not None else (span.attributes or {})


def from_readable_span(span: Any, *, content: bool = True) -> SpanRecord:
    """Copy an SDK ``ReadableSpan`` into a ``SpanRecord``.

    With ``content=False`` only the structural fields are kept (ids, parent, name,
    times, status): enough to keep ancestry through plain spans such as an HTTP
    handler between an agent and its tools.
    """
    ctx = span.context
    parent = span.parent
    status = span.status
    scope = span.instrumentation_scope
    events: tuple[SpanEvent, ...] = ()
    attributes: Mapping[str, Any] = {}
    dropped_attributes = dropped_events = 0
    if content:
        attributes = dict(raw_attributes(span))
        events = tuple(
            SpanEvent(e.name, e.timestamp or 0, dict(e.attributes or {})) for e in span.events
        )
        dropped_attributes = getattr(span, "dropped_attributes", 0) or 0  # SDK ReadableSpan's, O(1)
        dropped_events = getattr(span, "dropped_events", 0) or 0
    return SpanRecord(
        trace_id=ctx.trace_id,
        span_id=ctx.span_id,
        parent_span_id=parent.span_id if parent is not None else None,
        parent_is_remote=bool(parent.is_remote) if parent is not None else False,
        name=span.name,
        start_time_unix_nano=span.start_time or 0,
        end_time_unix_nano=span.end_time or span.start_time or 0,
        attributes=attributes,
        events=events,
        status_code=status.status_code.name if status is not None else STATUS_UNSET,
        status_message=status.description if status is not None else None,
        kind=span.kind.name if span.kind is not None else "INTERNAL",
        scope_name=scope.name if scope is not None else "",
        resource=sdk_resource_metadata(getattr(span, "resource", None)),
        dropped_attributes_count=dropped_attributes,
        dropped_events_count=dropped_events,
    )


def as_record(span: Any) -> SpanRecord:
    """Accept either a ``SpanRecord`` or an SDK ``ReadableSpan``."""
    if isinstance(span, SpanRecord):
        return span
    return from_readable_span(span)
