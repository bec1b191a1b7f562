"""TraceBuffer: spans per trace id until the trace is complete. Single-threaded.

A trace is complete when its local root span has ended plus ``settle_delay``
(for stragglers), or after ``idle_timeout`` without a new span (no root seen:
the root is in another process or never ends), or at ``max_age`` after its
first span (long-running agents still get evaluated).

Finding the complete traces costs O(traces completed), not O(traces buffered):
each of the three clocks has its own queue in deadline order (traces by first
span, by last span, roots by end), and ``pop_complete`` reads each queue only up
to the first deadline not yet reached. A scan of every buffered trace per tick
cost 23 ms at 20,000 buffered traces and 355 ms at 100,000, ten times a second,
on the collector thread of the app or of ``serve``. ``now`` must not go back
(the pipeline's clock is monotonic).

Late-span policy: a span arriving for a trace completed within the last
``late_window`` traces is dropped and counted as ``late_span``; the trace is not
evaluated twice. A span for a trace older than that opens a new buffer entry
(indistinguishable from a new trace).

Bounds: ``max_traces`` (the oldest buffered trace is dropped: ``buffer_full``),
``max_bytes`` (estimated bytes, see below: the oldest traces are dropped until the
total fits, ``buffer_full``; never the trace the new span belongs to) and
``max_spans_per_trace`` (further spans dropped: ``trace_too_large``). A trace that
alone would exceed ``max_bytes`` keeps what it has and further spans are dropped
(``trace_too_large``): it is still evaluated, on a prefix, like a trace over
``max_spans_per_trace``; evicting it would lose it entirely and first empty the
buffer for it. The completed trace says how many of its items were dropped
(``CompletedTrace.dropped``), so its runs know they are cut and the judge is told.

Byte estimate (``estimate_size``): computed once per item in ``add`` (the collector
thread, never the app's hot path), O(number of attributes): a fixed cost per kind
of item (measured with tracemalloc: an SDK span with its ``BoundedAttributes``,
events list, locks and context costs ~2.6 kB before any attribute), a cost per
attribute (its dict slot), and ``sys.getsizeof`` of string, bytes and number
values (and of the strings in sequences and event attributes). Content shared
with other spans (an interned model name, a prompt string the app reuses) is
counted in every span, so the estimate errs towards more bytes, not fewer: for
realistic GenAI spans it is 4-8 % above tracemalloc's heap figure, and RSS per
buffered span is a few % above the heap figure (allocator size classes and
headers), so ``max_bytes`` holds in RSS too (``benchmarks/memory.py``).
"""

from __future__ import annotations

import sys
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from ..records import LogRecordData, SpanRecord

ROOT_ENDED = "root_ended"
IDLE_TIMEOUT = "idle_timeout"
MAX_AGE = "max_age"
FLUSH = "flush"
SHUTDOWN = "shutdown"

# Calibrated with tracemalloc on CPython 3.11 / opentelemetry-sdk 1.45 (see
# tests/pipeline/test_buffer_bytes.py, which checks the estimate against a measurement).
SDK_SPAN_COST = 2_600
"""An SDK ``ReadableSpan`` with no attributes: the span object, its context, status,
``BoundedAttributes`` and ``BoundedList``s (each with a lock), resource reference."""
SDK_EVENT_COST = 500
"""An SDK ``Event`` with its own ``BoundedAttributes``."""
RECORD_COST = 380
"""A ``SpanRecord`` (slots) with its own ids, times and attributes dict."""
RECORD_EVENT_COST = 250
"""A ``SpanEvent`` with its attributes dict."""
LOG_COST = 400
"""A ``LogRecordData`` with its ids, timestamp and attributes dict."""
ATTRIBUTE_COST = 32
"""One dict slot (amortised over the dict's growth)."""
CONTAINER_COST = 160
"""A nested dict in a log body or OTLP value before its items (a small dict's table). 160, not the 120 measured on
3.11: on CPython 3.10 a log record with a nested body measured 36 bytes over the estimate made with 120."""
MAX_ITEMS_SIZED = 32
"""Sequences and mappings longer than this are sized from their first items (bounded work)."""
MAX_DEPTH = 4
_str_size = str.__sizeof__
"""``sys.getsizeof`` of a ``str`` (not tracked by the collector, so no header is added), ~10x cheaper: it runs for
every key, value and name of every buffered span."""


def _value_size(value: Any, depth: int = 0) -> int:
    """Bytes a value owns: ``getsizeof`` of strings, bytes and numbers (O(1) each),
    containers from at most ``MAX_ITEMS_SIZED`` items, scaled to their length."""
    kind = type(value)
    if kind is str:
        return _str_size(value)
    if kind is bytes or kind is float:
        return sys.getsizeof(value)
    if kind is int:
        return 0 if -5 <= value <= 256 else sys.getsizeof(value)  # CPython caches small ints
    if kind is bool or value is None:
        return 0  # singletons
    if depth >= MAX_DEPTH:
        return CONTAINER_COST
    if isinstance(value, (tuple, list)):
        n = len(value)
        sample = value if n <= MAX_ITEMS_SIZED else value[:MAX_ITEMS_SIZED]
        items = 0
        for v in sample:
            items += _str_size(v) if type(v) is str else _value_size(v, depth + 1)
        return sys.getsizeof(value) + (items * n // len(sample) if sample else 0)
    if isinstance(value, Mapping):
        n = len(value)
        pairs = islice(value.items(), MAX_ITEMS_SIZED)
        items = sum(ATTRIBUTE_COST + _value_size(k, depth + 1) + _value_size(v, depth + 1) for k, v in pairs)
        return CONTAINER_COST + (items * n // MAX_ITEMS_SIZED if n > MAX_ITEMS_SIZED else items)
    return CONTAINER_COST  # anything else an attribute should not hold: a nominal cost


def _attributes_size(attributes: Mapping[str, Any] | None, *, own_keys: bool) -> int:
    """Attribute dict cost. Keys of SDK spans are the instrumentation's literals
    (shared, not counted); keys decoded from OTLP are new strings (counted)."""
    if not attributes:
        return 0
    raw = getattr(attributes, "_dict", attributes)  # SDK BoundedAttributes: the plain dict beneath
    size = len(raw) * ATTRIBUTE_COST
    if own_keys:
        try:
            size += sum(map(_str_size, raw))
        except TypeError:  # a key that is not a str (no decoder makes one)
            size += sum(map(sys.getsizeof, raw))
    for value in raw.values():  # ``_value_size`` inlined for strings: this runs for every span
        size += _str_size(value) if type(value) is str else _value_size(value)
    return size


def estimate_size(item: Any) -> int:
    """Estimated bytes an item keeps alive while buffered: a ``SpanRecord``, a
    ``LogRecordData`` or an SDK ``ReadableSpan``. See the module docstring."""
    if isinstance(item, SpanRecord):
        size = RECORD_COST + _value_size(item.name) + _attributes_size(item.attributes, own_keys=True)
        for event in item.events:
            size += RECORD_EVENT_COST + _value_size(event.name) + _attributes_size(event.attributes, own_keys=True)
        return size
    if isinstance(item, LogRecordData):
        name = item.event_name
        return (LOG_COST + (sys.getsizeof(name) if name else 0) + _attributes_size(item.attributes, own_keys=True)
                + _value_size(item.body))
    # An SDK span (or any span-like object: only what it has is counted).
    attributes = getattr(item, "_attributes", None)
    if attributes is None:
        attributes = getattr(item, "attributes", None)
    size = SDK_SPAN_COST + sys.getsizeof(getattr(item, "name", "")) + _attributes_size(attributes, own_keys=False)
    for event in getattr(item, "events", None) or ():
        size += SDK_EVENT_COST + sys.getsizeof(event.name) + _attributes_size(event.attributes, own_keys=False)
    return size


@dataclass
class _Entry:
    first_seen: float
    last_seen: float
    spans: list[Any] = field(default_factory=list)
    logs: list[LogRecordData] = field(default_factory=list)
    root_ended_at: float | None = None
    arrival: int = 0
    """Its place in arrival order (``pop_complete`` returns traces in that order)."""
    bytes: int = 0
    """Sum of ``estimate_size`` of its spans and logs."""
    dropped: int = 0
    """Items refused as ``trace_too_large``: the evaluated run is a prefix."""


@dataclass(frozen=True)
class CompletedTrace:
    trace_id: int
    spans: list[Any]
    """``SpanRecord``s or SDK ``ReadableSpan``s, in arrival order."""
    reason: str
    logs: list[LogRecordData] = field(default_factory=list)
    dropped: int = 0
    """Spans and log records of this trace dropped as ``trace_too_large``: runs assembled
    from it are cut (``AgentTrace.spans_dropped``)."""


class TraceBuffer:
    def __init__(
        self,
        *,
        settle_delay: float,
        idle_timeout: float,
        max_age: float,
        max_traces: int,
        max_spans_per_trace: int,
        on_drop: Callable[[str, int], None],
        max_bytes: int = 0,
        late_window: int = 10_000,
    ) -> None:
        """``max_bytes`` 0 disables the byte bound (sizes are still estimated and summed)."""
        self.settle_delay = settle_delay
        self.idle_timeout = idle_timeout
        self.max_age = max_age
        self.max_traces = max_traces
        self.max_spans_per_trace = max_spans_per_trace
        self.max_bytes = max_bytes
        self.bytes = 0
        """Estimated bytes of everything buffered now (the ``max_bytes`` bound's measure)."""
        self._on_drop = on_drop
        self._entries: OrderedDict[int, _Entry] = OrderedDict()  # insertion order = age (``max_age`` order)
        self._by_last_seen: OrderedDict[int, None] = OrderedDict()
        """The buffered trace ids, the least recently added to first (``idle_timeout`` order)."""
        self._roots_ended: deque[tuple[float, int]] = deque()
        """(root end, trace id) in end order (``settle_delay`` order); an item whose trace has completed
        since, or whose root ended again later, is passed over when its turn comes."""
        self._arrivals = 0
        self._completed: OrderedDict[int, None] = OrderedDict()
        self._late_window = late_window

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, trace_id: int) -> bool:
        return trace_id in self._entries

    def trace_ids(self) -> list[int]:
        return list(self._entries)

    def add(self, span: Any, trace_id: int, is_local_root: bool, now: float) -> None:
        """Buffer one span: a ``SpanRecord``, or an SDK span kept as is until the trace
        completes (evicted traces then never pay for the copy)."""
        size = estimate_size(span)
        entry = self._entry(trace_id, size, now)
        if entry is None:
            return
        entry.spans.append(span)
        if is_local_root:
            entry.root_ended_at = now
            self._roots_ended.append((now, trace_id))
        self._grow(trace_id, entry, size)

    def add_log(self, log: LogRecordData, now: float) -> None:
        """A GenAI content log record; it counts towards the trace's span and byte bounds."""
        if log.trace_id is None:
            return
        size = estimate_size(log)
        entry = self._entry(log.trace_id, size, now)
        if entry is not None:
            entry.logs.append(log)
            self._grow(log.trace_id, entry, size)

    def _entry(self, trace_id: int, size: int, now: float) -> _Entry | None:
        """The trace's entry with room for one more item of ``size`` bytes, or None (drop counted)."""
        entry = self._entries.get(trace_id)
        if entry is None:
            if trace_id in self._completed:
                self._on_drop("late_span", 1)
                return None
            if self.max_bytes and size > self.max_bytes:
                self._on_drop("trace_too_large", 1)  # no entry for a span that can never fit
                return None
            if len(self._entries) >= self.max_traces:
                self._evict(next(iter(self._entries)))
            self._arrivals += 1
            entry = self._entries[trace_id] = _Entry(first_seen=now, last_seen=now, arrival=self._arrivals)
            self._by_last_seen[trace_id] = None
        if len(entry.spans) + len(entry.logs) >= self.max_spans_per_trace or (
            self.max_bytes and entry.bytes + size > self.max_bytes
        ):
            self._on_drop("trace_too_large", 1)
            entry.dropped += 1
            return None
        entry.last_seen = now
        self._by_last_seen.move_to_end(trace_id)
        return entry

    def _grow(self, trace_id: int, entry: _Entry, size: int) -> None:
        """Account an added item, then evict the oldest other traces while over ``max_bytes``.

        ``entry.bytes <= max_bytes`` (checked in ``_entry``), so evicting other traces
        always suffices (``next`` cannot run out); the trace just added to is never
        the one evicted: it has just proved alive, and dropping it would discard the
        span that was accepted a moment ago.
        """
        entry.bytes += size
        self.bytes += size
        while self.max_bytes and self.bytes > self.max_bytes:
            entries = iter(self._entries)
            victim = next(entries)
            if victim == trace_id:
                victim = next(entries)
            self._evict(victim)

    def _evict(self, trace_id: int) -> None:
        """Drop a buffered trace whole (``buffer_full``); its later spans count as late."""
        entry = self._pop(trace_id)
        self.bytes -= entry.bytes
        self._remember_completed(trace_id)  # its later spans count as late, not as a new trace
        self._on_drop("buffer_full", len(entry.spans))

    def pop_complete(self, now: float) -> list[CompletedTrace]:
        """The traces complete at ``now``, in arrival order, each with the first reason that applies
        (root ended, then idle, then max age); each queue is read only up to its first deadline not reached."""
        reasons: dict[int, str] = {}
        roots = self._roots_ended
        while roots and now - roots[0][0] >= self.settle_delay:
            ended_at, trace_id = roots.popleft()
            entry = self._entries.get(trace_id)
            if entry is not None and entry.root_ended_at == ended_at:
                reasons[trace_id] = ROOT_ENDED
        for trace_id in self._by_last_seen:
            if now - self._entries[trace_id].last_seen < self.idle_timeout:
                break
            reasons.setdefault(trace_id, IDLE_TIMEOUT)
        for trace_id, entry in self._entries.items():
            if now - entry.first_seen < self.max_age:
                break
            reasons.setdefault(trace_id, MAX_AGE)
        order = sorted(reasons, key=lambda trace_id: self._entries[trace_id].arrival)
        return [self._complete(trace_id, reasons[trace_id]) for trace_id in order]

    def pop_all(self, reason: str) -> list[CompletedTrace]:
        """Everything still buffered (``flush`` or ``shutdown``)."""
        self._roots_ended.clear()
        return [self._complete(trace_id, reason) for trace_id in list(self._entries)]

    def _complete(self, trace_id: int, reason: str) -> CompletedTrace:
        entry = self._pop(trace_id)
        self.bytes -= entry.bytes
        self._remember_completed(trace_id)
        return CompletedTrace(trace_id, entry.spans, reason, entry.logs, entry.dropped)

    def _pop(self, trace_id: int) -> _Entry:
        """Take a trace out of the buffer (its ``_roots_ended`` items are passed over when their turn comes)."""
        del self._by_last_seen[trace_id]
        return self._entries.pop(trace_id)

    def _remember_completed(self, trace_id: int) -> None:
        self._completed[trace_id] = None
        if len(self._completed) > self._late_window:
            self._completed.popitem(last=False)
