"""The Prometheus sink's result metrics expose what prometheus-client's own objects expose.

``ResultMetrics`` counts a run's results under one lock instead of a dozen library calls; this
holds it to the library: the same runs go through ``PrometheusSink`` and through a
``Histogram`` / ``Counter`` / ``Histogram`` made as the sink made them before (the reference), and
both registries are scraped in the text and OpenMetrics formats (exemplars, ``_created``). Only
clock readings differ (``_created`` values, exemplar timestamps): they are checked to be in the
run's time range, then normalised.
"""

from __future__ import annotations

import re
import time

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from otel_agent_eval.model import AgentTrace, EvalResult, EvaluatedTrace
from otel_agent_eval.pipeline.stats import PipelineStats, RunLabels
from otel_agent_eval.sinks.prometheus import DURATION_BUCKETS, SCORE_BUCKETS, PrometheusSink


def reference(registry: CollectorRegistry) -> tuple[Histogram, Counter, Histogram]:
    """The metrics as prometheus-client objects (what the sink used before ``ResultMetrics``)."""
    score = Histogram("agent_eval_score", "Evaluation scores in [0, 1] (exemplar: trace_id)",
                      ["evaluator", "agent", "service"], buckets=SCORE_BUCKETS, registry=registry)
    results = Counter("agent_eval_results",
                      "Evaluation results by outcome (pass, fail, skipped, error) and, for skipped and error, reason",
                      ["evaluator", "agent", "service", "outcome", "reason"], registry=registry)
    duration = Histogram("agent_eval_evaluation_duration_seconds", "Time one evaluator took on one agent trace",
                         ["evaluator"], buckets=DURATION_BUCKETS, registry=registry)
    return score, results, duration


def runs() -> list[EvaluatedTrace]:
    """Scores on and between the bucket bounds (0, a bound exactly, 1, none; the model keeps them in [0, 1]),
    reasons, several agents and services, durations across the duration buckets."""
    out = []
    scores = [0.0, 0.1, 0.15, 0.5, 1.0, None, 0.99, 0.2, 0.3, 0.7, 0.05]
    labels = ["pass", "fail", "skipped", "error"]
    for i in range(40):
        agent = f"agent-{i % 3}"
        trace = AgentTrace(trace_id=f"{i:032x}", agent_name=agent, metadata={"service.name": f"svc-{i % 2}"})
        results = [
            EvalResult(evaluator=f"evaluator_{k}", label=labels[(i + k) % 4], score=scores[(i * 4 + k) % len(scores)],
                       agent_name=agent, trace_id=trace.trace_id, reason="timeout" if (i + k) % 4 == 3 else None)
            for k in range(4)
        ]
        durations = {f"evaluator_{k}": [0.0001, 0.0005, 0.003, 0.7, 200.0][(i + k) % 5] for k in range(4)}
        out.append(EvaluatedTrace(trace, results, durations, 1, 2))
    return out


def normalised(text: str, since: float, until: float) -> str:
    """Clock readings replaced (after checking them): ``_created`` values and exemplar timestamps."""
    def created(match: re.Match[str]) -> str:
        assert since - 1 <= float(match.group(2)) <= until + 1
        return match.group(1) + "T"

    text = re.sub(r"(_created\{[^}]*\} )(\S+)", created, text)
    return re.sub(r"(# \{trace_id=\"[0-9a-f]+\"\} \S+ )(\S+)", created, text)


@pytest.mark.parametrize("exposition", [generate_latest, generate_openmetrics], ids=["text", "openmetrics"])
def test_result_metrics_expose_what_prometheus_client_exposes(exposition) -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    run_labels = RunLabels(2, 10)  # agents beyond two are "other", as the sink labels them
    sink = PrometheusSink(ours, PipelineStats(), run_labels)
    score, results, duration = reference(theirs)
    since = time.time()
    for evaluated in runs():
        sink.emit(evaluated)
        agent, service = run_labels(evaluated.trace)
        for result in evaluated.results:
            results.labels(result.evaluator, agent, service, result.label, result.reason or "").inc()
            if result.score is not None:
                score.labels(result.evaluator, agent, service).observe(result.score,
                                                                        exemplar={"trace_id": evaluated.trace.trace_id})
        for evaluator, seconds in evaluated.durations.items():
            duration.labels(evaluator).observe(seconds)
    until = time.time()

    expected = normalised(exposition(theirs).decode(), since, until)
    got = normalised(exposition(ours).decode(), since, until)
    result_lines = [line for line in got.splitlines() if "agent_eval_score" in line or "agent_eval_results" in line
                    or "agent_eval_evaluation_duration" in line]
    assert "\n".join(result_lines) + "\n" == expected.replace("# EOF\n", "")
    assert "agent_eval_score_bucket" in expected and "trace_id" in expected or exposition is generate_latest


def test_a_second_sink_on_the_same_registry_is_refused_as_before() -> None:
    registry = CollectorRegistry()
    PrometheusSink(registry, PipelineStats(), RunLabels(10, 10))
    with pytest.raises(ValueError, match="Duplicated"):
        PrometheusSink(registry, PipelineStats(), RunLabels(10, 10))


def test_an_id_too_long_for_an_exemplar_still_counts() -> None:
    """OpenMetrics caps exemplar labels at 128 characters (prometheus-client raised, losing the run's counts)."""
    registry = CollectorRegistry()
    sink = PrometheusSink(registry, PipelineStats(), RunLabels(10, 10))
    trace = AgentTrace(trace_id="f" * 200, agent_name="a")
    sink.emit(EvaluatedTrace(trace, [EvalResult(evaluator="e", label="pass", score=0.5, agent_name="a")], {}, 1, 2))
    text = generate_openmetrics(registry).decode()
    assert 'agent_eval_score_count{agent="a",evaluator="e",service="unknown"} 1.0' in text
    assert "# {trace_id" not in text
