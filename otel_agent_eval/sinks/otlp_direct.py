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
The attributes' encoding, the limits and the templates the usual attributes are written from (the same bytes)
are in ``otlp_attributes.py``; the wire format's varints and fields in ``otlp_wire.py``.

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
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from ..metadata import SERVICE_NAME
from ..model import EvaluatedTrace
from .otel import EVENT_NAME, SCOPE_NAME, SPAN_NAMES, log_attributes, span_attributes
from .otlp_attributes import (
    MAX_CACHED_FIELDS,
    MAX_CACHED_TEXT,
    Limits,
    RecordTemplates,
    SpanTemplates,
    attributes,
    log_limits,
    span_limits,
)
from .otlp_export import ExportTally
from .otlp_wire import SMALL as _SMALL
from .otlp_wire import field as _field
from .otlp_wire import pack_fixed32 as _pack_fixed32
from .otlp_wire import pack_fixed64 as _pack_fixed64
from .otlp_wire import text as _text
from .otlp_wire import varint as _varint

_logger = logging.getLogger("otel_agent_eval.export")

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


_NAMES: dict[tuple[str, str], bytes] = {}
"""The evaluation span's name field per phase and agent."""


def _name(phase: str, agent_name: str) -> bytes:
    """The evaluation span's name field (kept: a few agents, two phases)."""
    key = (phase, agent_name)
    name = _NAMES.get(key)
    if name is None:
        name = _text(b"\x2a", f"{SPAN_NAMES[phase]} {agent_name}")
        if type(agent_name) is str and len(agent_name) <= MAX_CACHED_TEXT:
            if len(_NAMES) >= MAX_CACHED_FIELDS:
                _NAMES.clear()
            _NAMES[key] = name
    return name


def _context(fields: dict[str, Any]) -> tuple[int, int]:
    """The evaluated trace's id and agent span id (its ``__dict__``) as ints, 0 where there is none."""
    return (int(fields["trace_id"], 16) if fields["trace_id"] else 0,
            int(fields["agent_span_id"], 16) if fields["agent_span_id"] else 0)


def evaluation_span(evaluated: EvaluatedTrace, limits: Limits, templates: SpanTemplates | None = None) -> bytes:
    """The evaluation span's ``Span`` message: a child of the evaluated agent span (a remote parent),
    or, with no agent span, the root of a new trace (the SDK's answer to an invalid parent).

    The trace's fields are read from its ``__dict__`` (a pydantic model's ``__getattr__`` makes each
    attribute read a slow generic look-up); ids have a fixed length, so their fields are spelled out."""
    fields = evaluated.trace.__dict__
    trace_id, parent = _context(fields)
    if trace_id and parent:
        ids = (b"\x0a\x10" + trace_id.to_bytes(16, "big") + b"\x12\x08"
               + (random.getrandbits(64) or _random_id(64)).to_bytes(8, "big") + b"\x22\x08" + parent.to_bytes(8, "big"))
        flags = _FLAGS_REMOTE_PARENT
    else:
        ids = (b"\x0a\x10" + _random_id(128).to_bytes(16, "big") + b"\x12\x08"
               + _random_id(64).to_bytes(8, "big"))
        flags = _FLAGS_LOCAL_PARENT
    encoded = templates.encode(evaluated, fields) if templates is not None else None
    if encoded is None:
        kept, dropped = limits.apply(span_attributes(evaluated))
        encoded = attributes(b"\x4a", kept) + (b"\x50" + _varint(dropped) if dropped else b"")
    return (ids + _name(evaluated.phase, fields["agent_name"]) + _KIND_INTERNAL
            + b"\x39" + _pack_fixed64(evaluated.started_ns) + b"\x41" + _pack_fixed64(evaluated.ended_ns)
            + encoded + _EMPTY_STATUS + flags)


def result_records(evaluated: EvaluatedTrace, limits: Limits, observed_ns: int,
                   templates: RecordTemplates | None = None) -> list[bytes]:
    """One ``LogRecord`` message per result, in the evaluated span's context; its attributes from a
    template when ``templates`` has one for the result, else from ``log_attributes``."""
    fields = evaluated.trace.__dict__
    trace_id, span_id = _context(fields)
    common = (b"\x09" + _pack_fixed64(evaluated.ended_ns) + b"\x59" + _pack_fixed64(observed_ns) + _SEVERITY_INFO
              + _EMPTY_BODY + _SAMPLED_FLAGS + (b"\x4a\x10" + trace_id.to_bytes(16, "big") if trace_id else b"")
              + (b"\x52\x08" + span_id.to_bytes(8, "big") if span_id else b"") + _EVENT)
    service = fields["metadata"].get(SERVICE_NAME)
    out = []
    for result in evaluated.results:
        if templates is not None:
            encoded = templates.encode(result, service)
            if encoded is not None:
                out.append(common + encoded)
                continue
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
        self._templates = RecordTemplates(self._log_limits) if self._log_limits is not None else None
        self._span_templates = SpanTemplates(self._span_limits) if self._span_limits is not None else None

    @property
    def queues(self) -> list[ResultQueue]:
        return [q for q in (self._spans, self._records) if q is not None]

    def emit(self, evaluated: EvaluatedTrace) -> None:
        if self._spans is not None:
            self._spans.put([evaluation_span(evaluated, self._span_limits, self._span_templates)])  # type: ignore[arg-type]
        if self._records is not None and evaluated.results:
            self._records.put(result_records(evaluated, self._log_limits, time.time_ns(), self._templates))  # type: ignore[arg-type]
