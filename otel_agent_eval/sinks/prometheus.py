"""Scores and pipeline health as Prometheus metrics (prometheus-client).

Result metrics are ordinary prometheus-client objects; pipeline counters are
read from ``PipelineStats`` at scrape time by a custom collector, so the span
hot path never touches a prometheus-client lock. Labels: evaluator, agent,
service, outcome, reason only, never ids or free text (trace ids go in exemplars).
Agent and service values are capped (``RunLabels``); ``reason`` is a result's short
code from a small fixed set (``EvalResult.reason``), empty for pass and fail.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..model import EvaluatedTrace
from ..pipeline.stats import PipelineStats, RunLabels

SCORE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
DURATION_BUCKETS = (0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0)


class PrometheusSink:
    name = "prometheus"

    def __init__(self, registry: CollectorRegistry, stats: PipelineStats, run_labels: RunLabels) -> None:
        self.registry = registry
        self.run_labels = run_labels
        self.score = Histogram(
            "agent_eval_score", "Evaluation scores in [0, 1] (exemplar: trace_id)",
            ["evaluator", "agent", "service"], buckets=SCORE_BUCKETS, registry=registry,
        )
        self.results = Counter(
            "agent_eval_results",
            "Evaluation results by outcome (pass, fail, skipped, error) and, for skipped and error, reason",
            ["evaluator", "agent", "service", "outcome", "reason"], registry=registry,
        )
        self.duration = Histogram(
            "agent_eval_evaluation_duration_seconds", "Time one evaluator took on one agent trace",
            ["evaluator"], buckets=DURATION_BUCKETS, registry=registry,
        )
        registry.register(PipelineCollector(stats))
        self._children: dict[tuple[Any, ...], Any] = {}
        """Labelled children by (metric, label values): ``labels()`` validates and locks on every call. As
        bounded as the metrics' own children (capped agent and service labels, fixed evaluators and reasons)."""

    def _child(self, metric: Any, *values: str) -> Any:
        key = (metric, *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def emit(self, evaluated: EvaluatedTrace) -> None:
        agent, service = self.run_labels(evaluated.trace)
        exemplar = {"trace_id": evaluated.trace.trace_id}
        for result in evaluated.results:
            self._child(self.results, result.evaluator, agent, service, result.label, result.reason or "").inc()
            if result.score is not None:
                self._child(self.score, result.evaluator, agent, service).observe(result.score, exemplar=exemplar)
        for evaluator, seconds in evaluated.durations.items():
            self._child(self.duration, evaluator).observe(seconds)


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
