"""The one intake rule and admission, for spans and log records alike, from any source.

A span is kept when its trace already has kept spans (children end before their
parents, so every ancestor of a GenAI span arrives after it), or when it carries
GenAI data and its trace is admitted; everything else is dropped at once. A GenAI
content log record follows the same rule (``classify_log`` says which records are
content). Admission: an adaptive trace-id ratio (``AdmissionRate``, the
``TraceIdRatioBased`` rule) caps new traces per second; rejected ids are remembered
so a trace's later spans are rejected too.

Sources: the SDK span processor (``offer_span``, the app's hot path: a few dict
look-ups, no lock, no I/O), the SDK log-record processor and the OTLP receiver
(``offer_log`` / ``offer_logs``), the receiver and offline runs (``offer_records``:
there a non-GenAI span of a trace not yet known waits in ``WaitingSpans``, since
batches over the wire arrive in any order).

Once ``stop()`` is called, everything offered is dropped and counted
(``already_shutdown``) and nothing is remembered: no id is added to any set.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..assembly.dialects import GENAI_MARKERS
from ..config import Settings
from ..isolation import is_evaluator_telemetry
from ..pipeline.sampling import AdmissionRate
from ..pipeline.stats import PipelineStats
from ..records import OWN_SCOPE, LogRecordData, SpanRecord
from .waiting import NOT_ADMITTED, WaitingSpans

REJECTED_MEMORY = 10
"""Rejected trace ids remembered per generation, in multiples of ``max_buffered_traces``."""

_GENAI_MARKERS = frozenset(GENAI_MARKERS)


def _attributes(item: Any) -> Any:
    """A span's attribute mapping: a record's, or (SDK span) the internal dict, cheaper than the public proxy."""
    if isinstance(item, SpanRecord):
        return item.attributes
    attributes = getattr(item, "_attributes", None)
    return getattr(attributes, "_dict", None) or attributes or item.attributes


def _own(item: Any) -> bool:
    """Is this span one of our own evaluation spans (scope ``otel_agent_eval``)?"""
    if isinstance(item, SpanRecord):
        return item.scope_name == OWN_SCOPE
    scope = item.instrumentation_scope
    return scope is not None and scope.name == OWN_SCOPE


class Intake:
    """The bounded hand-over from the sources to the pipeline's collector thread, behind the one rule.

    ``queue`` holds kept items (SDK spans, ``SpanRecord``s, ``LogRecordData``) for the
    collector; at ``max_intake_spans`` new items are dropped (``intake_full``). ``active``
    holds the trace ids with kept items: the collector removes a trace's id when it completes.
    """

    def __init__(self, settings: Settings, stats: PipelineStats, clock: Callable[[], float]) -> None:
        self.stats = stats
        self.clock = clock
        self.max_items = settings.max_intake_spans
        self.max_traces = settings.max_buffered_traces
        self.memory = REJECTED_MEMORY * settings.max_buffered_traces
        self.queue: deque[Any] = deque()
        self.active: dict[int, None] = {}
        self.rejected: dict[int, None] = {}
        self.rejected_earlier: dict[int, None] = {}
        self.admission = AdmissionRate(settings.max_traces_per_second, clock())
        self.waiting = WaitingSpans(settings.wait_for_trace_seconds, settings.max_waiting_spans,
                                    settings.max_waiting_bytes,
                                    on_leave=lambda outcome, n: stats.waiting_spans.inc(outcome, amount=n))
        self.stopped = False
        self._count_received = stats.spans_received.incrementer()
        self._count_after_shutdown = stats.spans_after_shutdown.incrementer()

    def __len__(self) -> int:
        return len(self.queue)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.queue)

    def stop(self) -> None:
        """From now on drop (and count) everything offered."""
        self.stopped = True

    def release(self) -> None:
        """After the collector stopped: let go of everything held (queue, ids, waiting spans)."""
        self.stopped = True
        self.queue.clear()
        self.active.clear()
        self.rejected.clear()
        self.rejected_earlier.clear()
        self.waiting.clear(NOT_ADMITTED)

    # -- the rule ----------------------------------------------------------------------------
    def _keeps(self, trace_id: int, item: Any) -> bool | None:
        """The one rule for a span: True keep, False drop, None: not GenAI and its trace unknown (may wait)."""
        kept = trace_id in self.active
        if not kept:
            attributes = _attributes(item)
            if not attributes or _GENAI_MARKERS.isdisjoint(attributes):
                return None
            if trace_id in self.rejected or trace_id in self.rejected_earlier:
                return False  # a later span of a trace rejected on arrival (the common case under overload)
        if _own(item):
            return False  # never evaluate our own evaluation spans
        return kept or self._admit_with_waiting(trace_id)

    def admit(self, trace_id: int, *, log: bool = False) -> bool:
        """The first GenAI span (or ``log`` record) of a trace not yet kept: keep its trace, or reject it. O(1).

        Rejected ids are remembered in two generations of ``max_buffered_traces x
        REJECTED_MEMORY`` ids each; a trace that outlives both is decided again by
        the same trace-id rule, which only disagrees if the ratio rose meanwhile.
        Evaluator-made telemetry (``isolation.py``) is dropped here, item by item.
        """
        if trace_id in self.rejected or trace_id in self.rejected_earlier:
            return False
        if is_evaluator_telemetry(trace_id):
            (self.stats.log_records_dropped if log else self.stats.spans_dropped).inc("evaluator_telemetry")
            return False
        if not self.admission.admits(trace_id):
            self.rejected[trace_id] = None
            self.stats.traces_rejected.inc()
            return False
        self.active[trace_id] = None
        self.stats.traces_admitted.inc()
        return True

    def _admit_with_waiting(self, trace_id: int, *, log: bool = False) -> bool:
        """``admit``, then adopt (or let go) the trace's spans that waited for it."""
        if self.admit(trace_id, log=log):
            for record in self.waiting.take(trace_id):
                self._append(record)
            return True
        self.waiting.take(trace_id, NOT_ADMITTED)
        return False

    def _append(self, span: Any) -> bool:
        if len(self.queue) >= self.max_items:
            self.stats.intake_full.inc()
            return False
        self.queue.append(span)
        self.stats.spans_kept.inc()
        return True

    # -- sources -----------------------------------------------------------------------------
    def offer_span(self, span: Any) -> None:
        """The app's hot path (SDK ``ReadableSpan``): counted, the rule, one bounded append. O(1), no lock."""
        self._count_received()
        if self.stopped:
            self._count_after_shutdown()
            return
        # SDK internals first (plain attribute reads are several times cheaper than the public properties).
        trace_id = (getattr(span, "_context", None) or span.context).trace_id
        if self._keeps(trace_id, span):
            self._append(span)

    def offer_records(self, records: Sequence[SpanRecord]) -> int:
        """Spans decoded from OTLP or files, not yet filtered; returns how many ``intake_full`` turned away."""
        full = self.stats.intake_full.value
        waiting = self.waiting.enabled
        now = self.clock() if waiting else 0.0
        for record in records:
            self._count_received()
            if self.stopped:
                self._count_after_shutdown()
                continue
            trace_id = record.trace_id
            verdict = self._keeps(trace_id, record)
            if verdict:
                self._append(record)
            elif verdict is None and waiting and trace_id not in self.rejected and trace_id not in self.rejected_earlier:
                self.waiting.add(record, now)
        return self.stats.intake_full.value - full

    def offer_log(self, log: LogRecordData) -> bool:
        """A GenAI content log record (``classify_log`` said so): kept with its trace, by the same rule. O(1)."""
        if self.stopped:
            self.stats.log_records_after_shutdown.inc()
            return False
        if len(self.queue) >= self.max_items:
            self.stats.intake_full.inc()
            return False
        trace_id = log.trace_id
        if trace_id is not None and trace_id not in self.active and not self._admit_with_waiting(trace_id, log=True):
            return False
        self.queue.append(log)
        self.stats.log_records_kept.inc()
        return True

    def offer_logs(self, logs: Sequence[LogRecordData]) -> int:
        """``offer_log`` for each; returns how many ``intake_full`` turned away."""
        full = self.stats.intake_full.value
        for log in logs:
            self.offer_log(log)
        return self.stats.intake_full.value - full

    # -- collector thread --------------------------------------------------------------------
    def completed(self, trace_id: int) -> None:
        """A trace left the buffer: its later spans are decided afresh (as late spans, by the buffer)."""
        self.active.pop(trace_id, None)

    def tick(self, now: float, buffered: Callable[[int], bool]) -> None:
        """Every collector pass: expire waiting spans, adapt the ratio, rotate the rejected ids, prune the active ids."""
        if self.waiting.spans:
            self.waiting.expire(now)
        stats = self.stats
        self.admission.update(stats.traces_admitted.value + stats.traces_rejected.value, now)
        stats.admission_ratio = self.admission.ratio
        if len(self.rejected) >= self.memory:
            self.rejected_earlier, self.rejected = self.rejected, {}
        if len(self.active) > 2 * self.max_traces:
            # Evicted traces leave ids behind; rebuild from what is still buffered.
            self.active = dict.fromkeys(t for t in list(self.active) if buffered(t))
