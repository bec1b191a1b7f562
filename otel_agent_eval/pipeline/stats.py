"""Pipeline counters: cheap on the hot path, read at scrape time.

Counts are kept here, not in prometheus-client objects, so that the span hot
path pays one ``next()`` on an ``itertools.count`` (atomic in CPython) instead
of a lock, and so that the server and offline runs share the same numbers.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import defaultdict
from collections.abc import Callable

from ..metadata import service_of
from ..model import AgentTrace

_logger = logging.getLogger("otel_agent_eval")


class AtomicCounter:
    """A monotonically increasing count, safe to bump from any thread without a lock."""

    __slots__ = ("_count",)

    def __init__(self) -> None:
        self._count = itertools.count()

    def inc(self) -> None:
        next(self._count)

    def incrementer(self) -> Callable[[], object]:
        """The bound ``__next__`` of the count: the cheapest way to bump it on a hot path."""
        return self._count.__next__

    @property
    def value(self) -> int:
        # ``count(n)`` is the only public way to read an itertools.count without advancing it.
        return int(repr(self._count)[6:-1])


class LabelledCounts:
    """Counts keyed by a tuple of label values; updated by background threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, ...], int] = defaultdict(int)

    def inc(self, *labels: str, amount: int = 1) -> None:
        with self._lock:
            self._counts[labels] += amount

    def snapshot(self) -> dict[tuple[str, ...], int]:
        with self._lock:
            return dict(self._counts)

    def get(self, *labels: str) -> int:
        with self._lock:
            return self._counts.get(labels, 0)

    def total(self) -> int:
        with self._lock:
            return sum(self._counts.values())


class AgentLabels:
    """Caps distinct values of one label (agent, service): values beyond ``limit`` report as ``other``."""

    OTHER = "other"

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, agent: str) -> str:
        if agent in self._seen:
            return agent
        with self._lock:
            if len(self._seen) < self.limit:
                self._seen.add(agent)
                return agent
        return self.OTHER


class RunLabels:
    """A run's ``(agent, service)`` label values, each capped by its own ``AgentLabels``.

    The service is the run's ``metadata["service.name"]`` (``unknown`` without one), so
    agents of the same name in different services stay apart.
    """

    def __init__(self, max_agents: int, max_services: int) -> None:
        self.agent = AgentLabels(max_agents)
        self.service = AgentLabels(max_services)

    def __call__(self, trace: AgentTrace) -> tuple[str, str]:
        return self.agent(trace.agent_name), self.service(service_of(trace.metadata))

    def after_fork(self) -> None:
        """In a forked child: fresh locks (a parent thread may have held one at fork)."""
        self.agent = AgentLabels(self.agent.limit)
        self.service = AgentLabels(self.service.limit)


class PipelineStats:
    """Every number the pipeline reports about itself."""

    def __init__(self) -> None:
        self.spans_received = AtomicCounter()
        self.spans_kept = AtomicCounter()
        self.log_records_kept = AtomicCounter()
        self.intake_full = AtomicCounter()
        self.spans_after_shutdown = AtomicCounter()  # offered after shutdown: spans_dropped{already_shutdown}
        self.log_records_after_shutdown = AtomicCounter()  # log_records_dropped{already_shutdown}
        self.traces_admitted = AtomicCounter()  # new GenAI traces buffered (admission)
        self.traces_rejected = AtomicCounter()  # new GenAI traces rejected on arrival (admission)
        self.processor_errors = AtomicCounter()
        self.late_spans = AtomicCounter()
        self.spans_dropped = LabelledCounts()  # (reason,): trace_too_large, evaluator_telemetry; intake_full is counted above
        self.log_records_dropped = LabelledCounts()  # (reason,): evaluator_telemetry; already_shutdown is counted above
        self.traces_completed = LabelledCounts()  # (reason,)
        self.sampling = LabelledCounts()  # (decision, reason)
        self.dropped = LabelledCounts()  # (reason,): agent traces or whole traces not evaluated
        self.agent_traces = LabelledCounts()  # (agent, service)
        self.span_limit_dropped = LabelledCounts()  # (kind,): attributes, events, values_cut_short: the producers' limits
        self.traces_evaluated = LabelledCounts()  # (agent, service): deterministic phase emitted
        self.traces_judged = LabelledCounts()  # (agent, service): judge phase emitted
        self.judge_sampling = LabelledCounts()  # (decision,): judge sample rate on sampled runs
        self.evaluator_errors = LabelledCounts()  # (evaluator, reason)
        self.sink_errors = LabelledCounts()  # (sink,)
        self.waiting_spans = LabelledCounts()  # (outcome,): spans of not-yet-known traces: adopted, expired, evicted, not_admitted
        self.queue_depth = 0
        self.judge_queue_depth = 0
        self.buffered_traces = 0
        self.buffered_bytes = 0
        self.admission_ratio = 1.0

    def after_fork(self) -> None:
        """In a forked child: every counter afresh, with fresh locks; whoever holds this object sees the new ones."""
        self.__init__()  # type: ignore[misc]

    def spans_dropped_snapshot(self) -> dict[tuple[str, ...], int]:
        counts = self.spans_dropped.snapshot()
        counts[("intake_full",)] = self.intake_full.value
        counts[("already_shutdown",)] = self.spans_after_shutdown.value
        return counts

    def log_records_dropped_snapshot(self) -> dict[tuple[str, ...], int]:
        counts = self.log_records_dropped.snapshot()
        counts[("already_shutdown",)] = self.log_records_after_shutdown.value
        return counts


class LogOnce:
    """Log an internal error once per kind, so a hot-path bug cannot flood the app's logs."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def __call__(self, kind: str, message: str, *args: object) -> None:
        if kind in self._seen:
            return
        self._seen.add(kind)
        # Called from except blocks (``Pipeline.internal_error``): the exception being handled is logged.
        _logger.error(message + " (further occurrences are only counted)", *args, exc_info=True)  # noqa: LOG014
