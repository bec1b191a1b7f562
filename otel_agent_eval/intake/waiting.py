"""Spans of traces not yet known, held a few seconds in case their GenAI spans follow.

Over the wire, batches from several processes (or several batch processors)
arrive in any order: the HTTP handler span at the root of an agent run can
reach ``serve`` before the run's GenAI spans do. The records intake
(``Intake.offer_records``) keeps a non-GenAI span of an unknown trace here;
when a GenAI span of the same trace is admitted, the waiting spans are adopted
into the trace (so it completes on its root, not on the idle timeout).

Bounded three ways: ``seconds`` after a trace's first waiting span its spans
leave (``expired``: the normal fate of spans of traces with no GenAI spans at
all), and ``max_spans`` / ``max_bytes`` (estimated like the TraceBuffer's) push
out the oldest waiting traces (``evicted``). Every span that leaves without
being adopted is reported to ``on_leave`` with its outcome.

The in-process processor does not need this: there children end before parents.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from ..pipeline.buffer import estimate_size
from ..records import SpanRecord

ADOPTED = "adopted"
EXPIRED = "expired"
EVICTED = "evicted"
NOT_ADMITTED = "not_admitted"


class _Waiting:
    __slots__ = ("first_seen", "spans", "bytes")

    def __init__(self, now: float) -> None:
        self.first_seen = now
        self.spans: list[SpanRecord] = []
        self.bytes = 0


class WaitingSpans:
    """Non-GenAI spans per unknown trace id, oldest first. Thread safe; every operation O(1) amortised."""

    def __init__(self, seconds: float, max_spans: int, max_bytes: int, on_leave: Callable[[str, int], None]) -> None:
        self.seconds = seconds
        self.max_spans = max_spans
        self.max_bytes = max_bytes
        self.on_leave = on_leave
        self.spans = 0
        self.bytes = 0
        self._traces: OrderedDict[int, _Waiting] = OrderedDict()  # insertion order = first seen
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.seconds > 0 and self.max_spans > 0

    def add(self, record: SpanRecord, now: float) -> None:
        """Hold ``record`` until its trace is known, it expires, or the bounds push it out."""
        size = estimate_size(record)
        if self.max_bytes and size > self.max_bytes:
            self.on_leave(EVICTED, 1)
            return
        with self._lock:
            self._expire(now)
            waiting = self._traces.get(record.trace_id)
            if waiting is None:
                waiting = self._traces[record.trace_id] = _Waiting(now)
            waiting.spans.append(record)
            waiting.bytes += size
            self.spans += 1
            self.bytes += size
            while self.spans > self.max_spans or (self.max_bytes and self.bytes > self.max_bytes):
                self._leave(next(iter(self._traces)), EVICTED)

    def take(self, trace_id: int, outcome: str = ADOPTED) -> list[SpanRecord]:
        """The waiting spans of a trace that is now known (``adopted``) or refused (``not_admitted``)."""
        if not self._traces:  # the common case: nothing waits (unlocked read of a dict's size is safe)
            return []
        with self._lock:
            if trace_id not in self._traces:
                return []
            return self._leave(trace_id, outcome)

    def clear(self, outcome: str) -> None:
        """Every waiting span leaves with ``outcome`` (shutdown)."""
        with self._lock:
            while self._traces:
                self._leave(next(iter(self._traces)), outcome)

    def expire(self, now: float) -> None:
        with self._lock:
            self._expire(now)

    def _expire(self, now: float) -> None:
        traces = self._traces
        while traces:
            trace_id, waiting = next(iter(traces.items()))
            if now - waiting.first_seen < self.seconds:
                return
            self._leave(trace_id, EXPIRED)

    def _leave(self, trace_id: int, outcome: str) -> list[SpanRecord]:
        waiting = self._traces.pop(trace_id)
        self.spans -= len(waiting.spans)
        self.bytes -= waiting.bytes
        self.on_leave(outcome, len(waiting.spans))
        return waiting.spans

    def __len__(self) -> int:
        return self.spans
