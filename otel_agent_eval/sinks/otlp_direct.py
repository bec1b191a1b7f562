"""``serve``'s results straight to OTLP protobuf: no SDK span or log record objects, no SDK encoders.

``serve`` owns its TracerProvider and LoggerProvider only to export results, and building an SDK
``Span`` and four ``LogRecord`` objects per run, each attribute cleaned by ``BoundedAttributes``,
then encoded by the OTLP encoders as two protobuf messages per attribute, was ~45 % of its CPU.
Here each evaluation span and ``gen_ai.evaluation.result`` record is written once as the protobuf
bytes of its ``Span`` / ``LogRecord`` message (the attribute dicts come from ``otel.py``, the one
place that says what is emitted); a request is those bytes joined under the resource and scope,
encoded once. What the SDK path would export is reproduced exactly (pinned by
``tests/sinks/test_otlp_direct.py``, both paths into real receivers): the same ids (a random span
id, the evaluated span as remote parent, a new random trace id when the run has no agent span),
timestamps, span flags, empty status and log body, severity, event name, resource and scope, the
SDK's attribute limits (``OTEL_*ATTRIBUTE*_LIMIT``), and a log record's observed time taken when
it is emitted.

``ResultQueue`` batches like the SDK's batch processors (a request at the batch size or after the
schedule delay, ``OTEL_BSP_SCHEDULE_DELAY`` / ``OTEL_BLRP_SCHEDULE_DELAY``) behind the same bound
and tally as ``otlp_export.py``'s processors: every item is counted emitted, exported, failed,
dropped over the bound, or abandoned at shutdown. The transport (how a request reaches the
endpoint) is the OTLP exporters' own, handed in as ``send``: see ``serve/export.py``.
"""

from __future__ import annotations

import logging
import os
import random
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..metadata import SERVICE_NAME
from ..model import EvaluatedTrace
from .otel import EVENT_NAME, SCOPE_NAME, SPAN_NAMES, log_attributes, span_attributes
from .otlp_export import ExportTally

_logger = logging.getLogger("otel_agent_eval.export")

# --------------------------------------------------------------------------- protobuf wire format

_SMALL = [bytes((n,)) for n in range(128)]
_pack_double = struct.Struct("<d").pack
_pack_fixed64 = struct.Struct("<Q").pack
_pack_fixed32 = struct.Struct("<I").pack


def _varint(n: int) -> bytes:
    if n < 128:
        return _SMALL[n]
    out = bytearray()
    while n >= 128:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: tag, length, payload."""
    n = len(payload)
    return tag + (_SMALL[n] if n < 128 else _varint(n)) + payload


def _text(tag: bytes, text: str) -> bytes:
    return _field(tag, text.encode("utf-8"))


def any_value(value: Any) -> bytes:
    """The ``AnyValue`` message for an attribute value, as the SDK's ``_encode_value`` maps it (bool before int)."""
    kind = type(value)
    if kind is str:
        return _text(b"\x0a", value)
    if kind is bool:
        return b"\x10\x01" if value else b"\x10\x00"
    if kind is float:
        return b"\x21" + _pack_double(value)
    if kind is int:
        return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)
    if value is None:
        return b""
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, str):
        return _text(b"\x0a", value)
    if isinstance(value, int):
        return b"\x18" + _varint(int(value) & 0xFFFFFFFFFFFFFFFF)
    if isinstance(value, float):
        return b"\x21" + _pack_double(value)
    if isinstance(value, bytes):
        return _field(b"\x3a", value)
    if isinstance(value, Sequence):
        return _field(b"\x2a", b"".join(_field(b"\x0a", any_value(v)) for v in value))
    if isinstance(value, Mapping):
        return _field(b"\x32", b"".join(_field(b"\x0a", key_value(str(k), v)) for k, v in value.items()))
    raise TypeError(f"invalid attribute value type {type(value)}")


_KEYS: dict[str, bytes] = {}
MAX_CACHED_KEYS = 4096
"""Attribute keys kept encoded (they recur: a few per evaluator); beyond, keys are encoded each time."""


def _key(key: str) -> bytes:
    """A ``KeyValue``'s key field."""
    encoded = _KEYS.get(key)
    if encoded is None:
        encoded = _text(b"\x0a", key) if key else b""
        if len(_KEYS) < MAX_CACHED_KEYS:
            _KEYS[key] = encoded
    return encoded


def key_value(key: str, value: Any) -> bytes:
    """The ``KeyValue`` message's bytes (without its own tag)."""
    return _key(key) + _field(b"\x12", any_value(value))


_FIELDS: dict[bytes, dict[tuple[Any, ...], bytes]] = {}
"""Whole attribute fields kept encoded, per tag: (key, value) for a string, (key, type, value) for the other scalars
(``1 == 1.0 == True``: the type tells them apart)."""
MAX_CACHED_FIELDS = 4096
"""Fields kept per tag: most values recur (names, labels, scores, counts, explanations); a tag's cache is emptied
when full, so values seen once (result ids, span ids) cannot crowd out the rest for long."""
MAX_CACHED_TEXT = 256


def attributes(tag: bytes, values: Mapping[str, Any]) -> bytes:
    """Repeated ``KeyValue`` fields under ``tag``; a value the SDK could not encode is left out, as it does.

    This loop is most of the sink's cost: a field seen before is one look-up, else ``key_value`` is
    spelled out for the common types.
    """
    out = []
    small = _SMALL
    fields = _FIELDS.get(tag)
    if fields is None:
        fields = _FIELDS[tag] = {}
    for key, value in values.items():
        kind = type(value)
        if kind is str:
            cached: tuple[Any, ...] | None = (key, value) if len(value) <= MAX_CACHED_TEXT else None
        elif kind is int or kind is bool or (kind is float and value):  # 0.0 == -0.0 (one key), but their bytes differ
            cached = (key, kind, value)
        else:
            cached = None
        if cached is not None:
            field = fields.get(cached)
            if field is not None:
                out.append(field)
                continue
        if kind is str:
            text = value.encode("utf-8")
            n = len(text)
            encoded = b"\x0a" + (small[n] if n < 128 else _varint(n)) + text
        elif kind is float:
            encoded = b"\x21" + _pack_double(value)
        elif kind is bool:
            encoded = b"\x10\x01" if value else b"\x10\x00"
        else:
            try:
                encoded = any_value(value)
            except TypeError:  # the SDK logs such a value and leaves it out
                _logger.exception("Failed to encode key %s", key)
                continue
        n = len(encoded)
        pair = _key(key) + b"\x12" + (small[n] if n < 128 else _varint(n)) + encoded
        n = len(pair)
        field = tag + (small[n] if n < 128 else _varint(n)) + pair
        out.append(field)
        if cached is not None:
            if len(fields) >= MAX_CACHED_FIELDS:
                fields.clear()
            fields[cached] = field
    return b"".join(out)


class Limits:
    """The SDK's attribute count and value length limits (read from the same ``OTEL_*`` variables)."""

    def __init__(self, count: int | None, length: int | None) -> None:
        self.count = count
        self.length = length

    def apply(self, values: dict[str, Any]) -> tuple[Mapping[str, Any], int]:
        """The attributes as the SDK keeps them, and how many it drops: only limits in reach cost anything."""
        if self.length is None and (self.count is None or len(values) <= self.count):
            return values, 0
        from opentelemetry.attributes import BoundedAttributes

        bounded = BoundedAttributes(self.count, values, immutable=False, max_value_len=self.length)
        return bounded, bounded.dropped


def span_limits() -> Limits:
    from opentelemetry.sdk.trace import SpanLimits

    limits = SpanLimits()
    return Limits(limits.max_span_attributes, limits.max_span_attribute_length)


def log_limits() -> Limits:
    from opentelemetry.sdk import _logs

    limits = getattr(_logs, "LogRecordLimits", None) or _logs.LogLimits
    made = limits()
    return Limits(getattr(made, "max_log_record_attributes", getattr(made, "max_attributes", None)),
                  getattr(made, "max_log_record_attribute_length", getattr(made, "max_attribute_length", None)))


# --------------------------------------------------------------------------- spans and log records

_KIND_INTERNAL = b"\x30\x01"
_EMPTY_STATUS = b"\x7a\x00"
_EMPTY_BODY = b"\x2a\x00"
_SEVERITY_INFO = b"\x10\x09"
_SAMPLED_FLAGS = b"\x45" + _pack_fixed32(1)
_FLAGS_LOCAL_PARENT = b"\x85\x01" + _pack_fixed32(0x100)
_FLAGS_REMOTE_PARENT = b"\x85\x01" + _pack_fixed32(0x300)
_EVENT = _text(b"\x62", EVENT_NAME)


def _random_id(bits: int) -> int:
    """A non-zero random id, as the SDK's ``RandomIdGenerator`` makes it."""
    while True:
        value = random.getrandbits(bits)
        if value:
            return value


def evaluation_span(evaluated: EvaluatedTrace, limits: Limits) -> bytes:
    """The evaluation span's ``Span`` message: a child of the evaluated agent span (a remote parent),
    or, with no agent span, the root of a new trace (the SDK's answer to an invalid parent)."""
    t = evaluated.trace
    trace_id = int(t.trace_id, 16) if t.trace_id else 0
    parent = int(t.agent_span_id, 16) if t.agent_span_id else 0
    if trace_id and parent:
        ids = (_field(b"\x0a", trace_id.to_bytes(16, "big")) + _field(b"\x12", _random_id(64).to_bytes(8, "big"))
               + _field(b"\x22", parent.to_bytes(8, "big")))
        flags = _FLAGS_REMOTE_PARENT
    else:
        ids = _field(b"\x0a", _random_id(128).to_bytes(16, "big")) + _field(b"\x12", _random_id(64).to_bytes(8, "big"))
        flags = _FLAGS_LOCAL_PARENT
    kept, dropped = limits.apply(span_attributes(evaluated))
    return (ids + _text(b"\x2a", f"{SPAN_NAMES[evaluated.phase]} {t.agent_name}") + _KIND_INTERNAL
            + b"\x39" + _pack_fixed64(evaluated.started_ns) + b"\x41" + _pack_fixed64(evaluated.ended_ns)
            + attributes(b"\x4a", kept) + (b"\x50" + _varint(dropped) if dropped else b"") + _EMPTY_STATUS + flags)


def result_records(evaluated: EvaluatedTrace, limits: Limits, observed_ns: int) -> list[bytes]:
    """One ``LogRecord`` message per result, in the evaluated span's context."""
    t = evaluated.trace
    trace_id = int(t.trace_id, 16) if t.trace_id else 0
    span_id = int(t.agent_span_id, 16) if t.agent_span_id else 0
    common = (b"\x09" + _pack_fixed64(evaluated.ended_ns) + b"\x59" + _pack_fixed64(observed_ns) + _SEVERITY_INFO
              + _EMPTY_BODY + _SAMPLED_FLAGS + (_field(b"\x4a", trace_id.to_bytes(16, "big")) if trace_id else b"")
              + (_field(b"\x52", span_id.to_bytes(8, "big")) if span_id else b"") + _EVENT)
    service = t.metadata.get(SERVICE_NAME)
    out = []
    for result in evaluated.results:
        kept, dropped = limits.apply(log_attributes(result, service))
        out.append(common + attributes(b"\x32", kept) + (b"\x38" + _varint(dropped) if dropped else b""))
    return out


def resource_and_scope(resource: Any) -> tuple[bytes, bytes]:
    """The ``Resource`` and ``InstrumentationScope`` fields every request of ours starts with (encoded once)."""
    encoded = _field(b"\x0a", attributes(b"\x0a", resource.attributes))
    scope = _field(b"\x0a", _text(b"\x0a", SCOPE_NAME))
    schema = _text(b"\x1a", resource.schema_url) if resource.schema_url else b""
    return encoded + schema, scope


def export_request(resource_and_schema: bytes, scope: bytes, items: Sequence[bytes]) -> bytes:
    """An ``ExportTraceServiceRequest`` / ``ExportLogsServiceRequest``: the two share their layout
    (field 1 of each level: resource; field 2: the scope level, then the items).

    Joined once from the lengths: each item is copied once (nesting ``_field`` copied the whole
    request at every level, and each item twice).
    """
    parts = [b"", resource_and_schema, b"", scope]
    scoped = len(scope)
    small = _SMALL
    for item in items:
        n = len(item)
        header = b"\x12" + (small[n] if n < 128 else _varint(n))
        parts.append(header)
        parts.append(item)
        scoped += len(header) + n
    parts[2] = b"\x12" + _varint(scoped)
    parts[0] = b"\x0a" + _varint(len(resource_and_schema) + len(parts[2]) + scoped)
    return b"".join(parts)


# --------------------------------------------------------------------------- batching


class ResultQueue:
    """A bounded queue of encoded items for one signal and the thread that exports them in batches.

    ``send(request_bytes, item_count) -> bool``: True when the endpoint took the request.
    """

    def __init__(self, signal: str, prefix: tuple[bytes, bytes], send: Callable[[bytes, int], bool], tally: ExportTally,
                 max_queued: int, schedule_delay: float, batch_size: int = 512,
                 close: Callable[[], None] = lambda: None) -> None:
        self.signal = signal
        self._prefix = prefix
        self._send = send
        self._tally = tally
        self._max_queued = max_queued
        self._delay = schedule_delay
        self._batch = max(1, min(batch_size, max_queued))
        self._close = close
        self._items: deque[bytes] = deque()
        self._wake = threading.Condition()
        self._flushing = 0
        self._sending = 0
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=f"otel-agent-eval-export-{signal}", daemon=True)
        self._thread.start()

    def put(self, items: list[bytes]) -> None:
        admitted = self._tally.admit_many(self.signal, len(items), self._max_queued)
        if not admitted:
            return
        with self._wake:
            self._items.extend(items[:admitted] if admitted < len(items) else items)
            if len(self._items) >= self._batch:
                self._wake.notify_all()

    def _take(self) -> list[bytes] | None:
        """The next batch to send (None: stop); waits for a full batch, the schedule delay, a flush or the stop."""
        with self._wake:
            if len(self._items) < self._batch and not (self._flushing and self._items) and not self._stopping:
                self._wake.wait(self._delay)
            if not self._items:
                return None if self._stopping else []
            batch = [self._items.popleft() for _ in range(min(self._batch, len(self._items)))]
            self._sending = len(batch)
            return batch

    def _run(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            if batch:
                self._export(batch)

    def _export(self, batch: list[bytes]) -> None:
        try:
            sent = self._send(export_request(*self._prefix, batch), len(batch))
        except Exception:  # the transport failing: counted like a refused request, the thread goes on
            _logger.warning("otel-agent-eval: result export failed", exc_info=True)
            sent = False
        if sent:
            self._tally.add(self._tally.exported, self.signal, len(batch))
        else:
            self._tally.fail(self.signal, len(batch))
        with self._wake:
            self._sending = 0
            self._wake.notify_all()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Send everything queued now; True once the queue is empty and nothing is in flight."""
        deadline = time.monotonic() + timeout_millis / 1e3
        with self._wake:
            self._flushing += 1
            try:
                self._wake.notify_all()
                while (self._items or self._sending) and self._thread.is_alive():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._wake.wait(left)
                return not self._items
            finally:
                self._flushing -= 1

    def shutdown(self) -> None:
        """Send what is queued, stop the thread, close the transport."""
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        self._thread.join()
        self._close()


def schedule_delay(variable: str, default_millis: float) -> float:
    """Seconds between exports of a partial batch, from the SDK batch processors' variable."""
    try:
        return max(0.0, float(os.environ.get(variable, default_millis))) / 1e3
    except ValueError:
        return default_millis / 1e3


class DirectOtlpSink:
    """The ``otel`` sink of ``serve``: the same spans and records as ``OtelSink``, encoded here, queued per signal."""

    name = "otel"

    def __init__(self, spans: ResultQueue | None, log_records: ResultQueue | None) -> None:
        self._spans = spans
        self._records = log_records
        self._span_limits = span_limits() if spans is not None else None
        self._log_limits = log_limits() if log_records is not None else None

    @property
    def queues(self) -> list[ResultQueue]:
        return [q for q in (self._spans, self._records) if q is not None]

    def emit(self, evaluated: EvaluatedTrace) -> None:
        if self._spans is not None:
            self._spans.put([evaluation_span(evaluated, self._span_limits)])  # type: ignore[arg-type]
        if self._records is not None and evaluated.results:
            self._records.put(result_records(evaluated, self._log_limits, time.time_ns()))  # type: ignore[arg-type]
