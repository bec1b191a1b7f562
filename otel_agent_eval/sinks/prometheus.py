"""Scores and pipeline health as Prometheus metrics (prometheus-client).

Result metrics are counted per run under one lock (``ResultMetrics``) and exposed as
prometheus-client's own ``Histogram`` and ``Counter`` would expose them; pipeline counters
are read from ``PipelineStats`` at scrape time by a custom collector, so the span
hot path never touches a prometheus-client lock. Labels: evaluator, agent,
service, outcome, reason only, never ids or free text (trace ids go in exemplars).
Agent and service values are capped (``RunLabels``); ``reason`` is a result's short
code from a small fixed set (``EvalResult.reason``), empty for pass and fail.
"""

from __future__ import annotations

import math
import threading
import time
from bisect import bisect_left
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client import metrics as prometheus_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Exemplar
from prometheus_client.utils import floatToGoString

from ..model import EvaluatedTrace
from ..pipeline.core import at_fork_in_child
from ..pipeline.stats import PipelineStats, RunLabels

SCORE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
DURATION_BUCKETS = (0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0)


class _Series:
    """One labelled series of a histogram (``bounds`` given) or a counter: what prometheus-client's child keeps."""

    __slots__ = ("buckets", "sum", "exemplars", "created")

    def __init__(self, size: int, created: float) -> None:
        self.buckets = [0.0] * size
        self.sum = 0.0
        self.exemplars: list[tuple[dict[str, str], float, float] | None] = [None] * size
        """Each bucket's latest exemplar as ``Exemplar``'s fields: the object is made at scrape time, not per score."""
        self.created = created


class ResultMetrics(Collector):
    """The result metrics, kept under one lock per run and exposed at scrape time.

    prometheus-client's ``Histogram`` and ``Counter`` take a lock and validate per call, a dozen
    calls per run (~27 us, a twentieth of serve's CPU per run); here a run's results are
    counted in one pass under one lock. What is exposed is what the library's own objects
    expose for the same observations, sample for sample (buckets, exemplars, ``_count``,
    ``_sum``, ``_created``): ``tests/sinks/test_prometheus_results.py`` holds the two to it.
    """

    def __init__(self) -> None:
        self._init_state()
        at_fork_in_child(self._init_state)

    def _init_state(self) -> None:
        """Also in a forked child: a lock a parent thread held at fork would stay held there for ever, so the
        child starts with a fresh lock and its own counts, as its ``PipelineStats`` do."""
        self._lock = threading.Lock()
        self.results: dict[tuple[str, ...], _Series] = {}
        self.scores: dict[tuple[str, ...], _Series] = {}
        self.durations: dict[tuple[str, ...], _Series] = {}

    def add(self, evaluated: EvaluatedTrace, agent: str, service: str) -> None:
        now = time.time()
        trace_id = evaluated.trace.trace_id
        # OpenMetrics caps an exemplar's labels at 128 characters (prometheus-client raised on more):
        # a trace id is 32; an id that is not one is left out of the exemplar, never the counts.
        exemplar_labels = {"trace_id": trace_id} if len(trace_id) <= MAX_EXEMPLAR_ID else None
        with self._lock:
            for result in evaluated.results:
                fields = result.__dict__  # a model's fields, read as ``sinks/otel.py`` reads them
                evaluator, score = fields["evaluator"], fields["score"]
                key = (evaluator, agent, service, fields["label"], fields["reason"] or "")
                series = self.results.get(key)
                if series is None:
                    series = self.results[key] = _Series(1, now)
                series.buckets[0] += 1.0
                if score is not None:
                    _observe(self.scores, (evaluator, agent, service), SCORE_BOUNDS, score, now, exemplar_labels)
            for evaluator, seconds in evaluated.durations.items():
                _observe(self.durations, (evaluator,), DURATION_BOUNDS, seconds, now, None)

    def describe(self) -> Iterator[Metric]:
        """The families, without samples: the registry refuses a second sink's metrics of the same names."""
        for name, documentation, kind, _, _, _ in self._families():
            yield Metric(name, documentation, kind)

    def collect(self) -> Iterator[Metric]:
        created = getattr(prometheus_metrics, "_use_created", True)
        for name, documentation, kind, labelnames, series_of, bounds in self._families():
            metric = Metric(name, documentation, kind)
            with self._lock:
                items = [(values, list(s.buckets), s.sum, list(s.exemplars), s.created) for values, s in series_of.items()]
            for values, buckets, total, exemplars, since in items:
                labels = dict(zip(labelnames, values))
                if bounds is None:
                    metric.add_sample(name + "_total", labels, buckets[0])
                else:
                    count = 0.0
                    for bound, n, exemplar in zip(bounds, buckets, exemplars):
                        count += n
                        metric.add_sample(name + "_bucket", {**labels, "le": floatToGoString(bound)}, count,
                                          exemplar=None if exemplar is None else Exemplar(*exemplar))
                    metric.add_sample(name + "_count", labels, count)
                    metric.add_sample(name + "_sum", labels, total)
                if created:
                    metric.add_sample(name + "_created", labels, since)
            yield metric

    def _families(self) -> list[tuple[str, str, str, list[str], dict[tuple[str, ...], _Series], tuple[float, ...] | None]]:
        return [
            ("agent_eval_score", "Evaluation scores in [0, 1] (exemplar: trace_id)", "histogram",
             ["evaluator", "agent", "service"], self.scores, SCORE_BOUNDS),
            ("agent_eval_results",
             "Evaluation results by outcome (pass, fail, skipped, error) and, for skipped and error, reason", "counter",
             ["evaluator", "agent", "service", "outcome", "reason"], self.results, None),
            ("agent_eval_evaluation_duration_seconds", "Time one evaluator took on one agent trace", "histogram",
             ["evaluator"], self.durations, DURATION_BOUNDS),
        ]


MAX_EXEMPLAR_ID = 128 - len("trace_id")
SCORE_BOUNDS = (*SCORE_BUCKETS, math.inf)
DURATION_BOUNDS = (*DURATION_BUCKETS, math.inf)


def _observe(series_of: dict[tuple[str, ...], _Series], key: tuple[str, ...], bounds: tuple[float, ...], value: float,
             now: float, exemplar: dict[str, str] | None) -> None:
    """prometheus-client's ``Histogram.observe``: the first bucket whose bound is >= value (none for NaN)."""
    series = series_of.get(key)
    if series is None:
        series = series_of[key] = _Series(len(bounds), now)
    series.sum += value
    i = bisect_left(bounds, value)
    if i < len(bounds) and value <= bounds[i]:
        series.buckets[i] += 1.0
        if exemplar is not None:
            series.exemplars[i] = (exemplar, value, now)


class PrometheusSink:
    name = "prometheus"

    def __init__(self, registry: CollectorRegistry, stats: PipelineStats, run_labels: RunLabels) -> None:
        self.registry = registry
        self.run_labels = run_labels
        self.metrics = ResultMetrics()
        self.collectors = (self.metrics, PipelineCollector(stats))
        for collector in self.collectors:
            registry.register(collector)

    def emit(self, evaluated: EvaluatedTrace) -> None:
        self.metrics.add(evaluated, *self.run_labels(evaluated.trace))


class PipelineCollector(Collector):
    """Exposes ``PipelineStats`` at scrape time."""

    def __init__(self, stats: PipelineStats) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        s = self.stats
        yield _counter("agent_eval_spans_received", "Spans the processor saw end (or the server received)", s.spans_received.value)
        yield _counter("agent_eval_spans_kept", "Spans kept for evaluation (GenAI spans and their trace's ancestors)", s.spans_kept.value)
        yield _counter(
            "agent_eval_log_records_kept", "GenAI content log records joined to their spans", s.log_records_kept.value
        )
        yield _counter("agent_eval_late_spans", "Spans that arrived after their trace was completed (dropped)", s.late_spans.value)
        yield _counter("agent_eval_processor_errors", "Internal errors caught so the app never sees them", s.processor_errors.value)
        yield _labelled("agent_eval_spans_dropped", "Spans dropped, by reason", ["reason"], s.spans_dropped_snapshot())
        yield _labelled("agent_eval_log_records_dropped", "GenAI log records dropped, by reason", ["reason"], s.log_records_dropped_snapshot())
        yield _labelled(
            "agent_eval_waiting_spans",
            "Non-GenAI spans of traces not yet known that waited for their trace (records intake), by how they left: "
            "adopted, expired, evicted (bounds), not_admitted",
            ["outcome"], s.waiting_spans.snapshot(),
        )
        yield _labelled("agent_eval_traces_completed", "Traces completed, by reason", ["reason"], s.traces_completed.snapshot())
        yield _labelled(
            "agent_eval_admission_decisions",
            "New GenAI traces on arrival: admitted (buffered, assembled) or rejected by the adaptive trace-id ratio",
            ["decision"], {("admitted",): s.traces_admitted.value, ("rejected",): s.traces_rejected.value},
        )
        yield GaugeMetricFamily(
            "agent_eval_admission_ratio", "Trace-id ratio at which new traces are admitted (1: all)", value=s.admission_ratio
        )
        yield _labelled(
            "agent_eval_agent_traces", "Agent invocations assembled (evaluated or not)", ["agent", "service"],
            s.agent_traces.snapshot(),
        )
        yield _labelled(
            "agent_eval_span_limit_dropped",
            "Attributes and span events the producers' SDKs dropped at their span limits, and JSON values cut short "
            "(value length limits), on assembled agent runs",
            ["kind"], {("attributes",): 0, ("events",): 0, ("values_cut_short",): 0, **s.span_limit_dropped.snapshot()},
        )
        yield _labelled(
            "agent_eval_sampling_decisions", "Sampling decisions on agent traces", ["decision", "reason"], s.sampling.snapshot()
        )
        yield _labelled(
            "agent_eval_traces_evaluated", "Agent invocations evaluated (deterministic results emitted)", ["agent", "service"],
            s.traces_evaluated.snapshot(),
        )
        yield _labelled("agent_eval_traces_judged", "Agent invocations whose judge results were emitted", ["agent", "service"], s.traces_judged.snapshot())
        yield _labelled(
            "agent_eval_judge_sampling_decisions", "Judge sample rate on sampled agent invocations (with judge evaluators)",
            ["decision"], s.judge_sampling.snapshot(),
        )
        yield _labelled("agent_eval_dropped", "Traces or agent invocations not evaluated, by reason", ["reason"], s.dropped.snapshot())
        yield _labelled(
            "agent_eval_evaluator_errors", "Evaluator failures (exception, timeout)", ["evaluator", "reason"], s.evaluator_errors.snapshot()
        )
        yield _labelled("agent_eval_sink_errors", "Failures while emitting results", ["sink"], s.sink_errors.snapshot())
        yield GaugeMetricFamily("agent_eval_queue_depth", "Agent traces waiting for an evaluation worker", value=s.queue_depth)
        yield GaugeMetricFamily("agent_eval_judge_queue_depth", "Agent traces waiting for a judge worker", value=s.judge_queue_depth)
        yield GaugeMetricFamily("agent_eval_buffered_traces", "Traces buffered until complete", value=s.buffered_traces)
        yield GaugeMetricFamily(
            "agent_eval_buffered_bytes", "Estimated bytes of the buffered spans (bounded by max_buffered_bytes)",
            value=s.buffered_bytes,
        )


def _counter(name: str, documentation: str, value: int) -> Metric:
    return CounterMetricFamily(name, documentation, value=value)


def _labelled(name: str, documentation: str, labels: list[str], counts: dict[tuple[str, ...], int]) -> Metric:
    family = CounterMetricFamily(name, documentation, labels=labels)
    for values, count in sorted(counts.items()):
        family.add_metric(list(values), count)
    return family
