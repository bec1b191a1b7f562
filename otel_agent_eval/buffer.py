"""TraceBuffer: spans per trace id until the trace is complete. Single-threaded.

A trace is complete when its local root span has ended plus ``settle_delay``
(for stragglers), or after ``idle_timeout`` without a new span (no root seen:
the root is in another process or never ends), or at ``max_age`` after its
first span (long-running agents still get evaluated).

Late-span policy: a span arriving for a trace completed within the last
``late_window`` traces is dropped and counted as ``late_span``; the trace is not
evaluated twice. A span for a trace older than that opens a new buffer entry
(indistinguishable from a new trace).

Bounds: ``max_traces`` (the oldest buffered trace is dropped: ``buffer_full``)
and ``max_spans_per_trace`` (further spans dropped: ``trace_too_large``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .records import LogRecordData

ROOT_ENDED = "root_ended"
IDLE_TIMEOUT = "idle_timeout"
MAX_AGE = "max_age"
FLUSH = "flush"
SHUTDOWN = "shutdown"


@dataclass
class _Entry:
    first_seen: float
    last_seen: float
    spans: list[Any] = field(default_factory=list)
    logs: list[LogRecordData] = field(default_factory=list)
    root_ended_at: float | None = None


@dataclass(frozen=True)
class CompletedTrace:
    trace_id: int
    spans: list[Any]
    """``SpanRecord``s or SDK ``ReadableSpan``s, in arrival order."""
    reason: str
    logs: list[LogRecordData] = field(default_factory=list)


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
        late_window: int = 10_000,
    ) -> None:
        self.settle_delay = settle_delay
        self.idle_timeout = idle_timeout
        self.max_age = max_age
        self.max_traces = max_traces
        self.max_spans_per_trace = max_spans_per_trace
        self._on_drop = on_drop
        self._entries: OrderedDict[int, _Entry] = OrderedDict()  # insertion order = age
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
        entry = self._entry(trace_id, now)
        if entry is None:
            return
        entry.spans.append(span)
        if is_local_root:
            entry.root_ended_at = now

    def add_log(self, log: LogRecordData, now: float) -> None:
        """A GenAI content log record; it counts towards the trace's span bound."""
        if log.trace_id is None:
            return
        entry = self._entry(log.trace_id, now)
        if entry is not None:
            entry.logs.append(log)

    def _entry(self, trace_id: int, now: float) -> _Entry | None:
        """The trace's entry with room for one more item, or None (drop counted)."""
        entry = self._entries.get(trace_id)
        if entry is None:
            if trace_id in self._completed:
                self._on_drop("late_span", 1)
                return None
            if len(self._entries) >= self.max_traces:
                oldest_id, oldest = self._entries.popitem(last=False)
                self._remember_completed(oldest_id)  # its later spans count as late, not as a new trace
                self._on_drop("buffer_full", len(oldest.spans))
            entry = self._entries[trace_id] = _Entry(first_seen=now, last_seen=now)
        if len(entry.spans) + len(entry.logs) >= self.max_spans_per_trace:
            self._on_drop("trace_too_large", 1)
            return None
        entry.last_seen = now
        return entry

    def pop_complete(self, now: float) -> list[CompletedTrace]:
        done: list[CompletedTrace] = []
        for trace_id, entry in list(self._entries.items()):
            reason = self._completion_reason(entry, now)
            if reason is not None:
                done.append(self._complete(trace_id, reason))
        return done

    def pop_all(self, reason: str) -> list[CompletedTrace]:
        """Everything still buffered (``flush`` or ``shutdown``)."""
        return [self._complete(trace_id, reason) for trace_id in list(self._entries)]

    def _completion_reason(self, entry: _Entry, now: float) -> str | None:
        if entry.root_ended_at is not None and now - entry.root_ended_at >= self.settle_delay:
            return ROOT_ENDED
        if now - entry.last_seen >= self.idle_timeout:
            return IDLE_TIMEOUT
        if now - entry.first_seen >= self.max_age:
            return MAX_AGE
        return None

    def _complete(self, trace_id: int, reason: str) -> CompletedTrace:
        entry = self._entries.pop(trace_id)
        self._remember_completed(trace_id)
        return CompletedTrace(trace_id, entry.spans, reason, entry.logs)

    def _remember_completed(self, trace_id: int) -> None:
        self._completed[trace_id] = None
        if len(self._completed) > self._late_window:
            self._completed.popitem(last=False)
