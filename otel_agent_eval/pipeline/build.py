"""The one place that wires evaluation from settings.

``evaluation(settings)``: the configured evaluators and, when a judge is configured, the
judge client they share (``evaluators.configure_evaluators`` reads the names, rules,
thresholds and ``OTEL_AGENT_EVAL_JUDGE_*``). ``evaluate`` (offline) uses it as it is,
experiments through its ``factory`` (evaluators built per case, one judge client for
all); ``build_pipeline`` puts it behind a ``Pipeline`` with its counters, run labels and
sinks, for the in-process processor (the demo runs one) and ``serve``.

After ``fork`` the child gets a judge client of its own (fresh locks, limits and HTTP
connections: the parent's connection pool is not the child's to use), and the pipeline
rebuilds the rest (``Pipeline._after_fork_in_child``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..config import Settings
from ..evaluators import (
    Evaluator,
    EvaluatorFactory,
    ToolExpectation,
    configure_evaluators,
)
from ..sinks import Sink
from .core import Pipeline, at_fork_in_child
from .stats import PipelineStats, RunLabels

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from ..evaluators.judge import JudgeClient


@dataclass
class Evaluation:
    """The evaluators of a run of the product, and the judge client they share (None without a judge)."""

    evaluators: list[Evaluator]
    judge: JudgeClient | None = None
    factory: EvaluatorFactory | None = None
    """Builds the configured evaluators again, with other expectations (experiments: per case)."""
    judge_tracer_provider: Any = None

    def __iter__(self) -> Any:
        """``evaluators, judge = evaluation(settings)``."""
        return iter((self.evaluators, self.judge))

    def close(self) -> None:
        if self.judge is not None:
            self.judge.close()

    def _after_fork_in_child(self) -> None:
        """A judge client of the child's own, the same settings and metrics, given to every evaluator using it."""
        old = self.judge
        if old is None:
            return
        from ..evaluators.judge import JudgeClient

        self.judge = JudgeClient(old.settings, metrics=old.metrics, tracer_provider=self.judge_tracer_provider)
        for evaluator in self.evaluators:
            if getattr(evaluator, "judge", None) is old:
                evaluator.judge = self.judge  # type: ignore[attr-defined]
        if self.factory is not None:
            self.factory.judge = self.judge
        # The parent's client is left as it is: closing it here would close connections the parent uses.


def evaluation(
    settings: Settings,
    *,
    evaluators: Sequence[Evaluator] | None = None,
    expectations: Sequence[ToolExpectation] | None = None,
    registry: CollectorRegistry | None = None,
    env: Mapping[str, str] | None = None,
    judge_tracer_provider: Any = None,
) -> Evaluation:
    """``evaluators`` as given, else every configured evaluator, built once (a bad spec fails here), and the
    judge client when one is configured; ``close()`` it when done."""
    if evaluators is not None:
        built = Evaluation(list(evaluators))
    else:
        factory = configure_evaluators(settings, expectations, registry=registry, env=env,
                                       judge_tracer_provider=judge_tracer_provider)
        try:
            built = Evaluation(factory.build(), factory.judge, factory, judge_tracer_provider)
        except BaseException:  # a bad evaluator spec: the judge client is closed, the error goes on
            factory.close()
            raise
    at_fork_in_child(built._after_fork_in_child)
    return built


@dataclass
class Built:
    """A wired pipeline, what it evaluates with, and where its results go."""

    pipeline: Pipeline
    evaluation: Evaluation
    registry: CollectorRegistry
    exporting: bool
    """True when results also go out as spans or log records (an ``OtelSink``)."""

    @property
    def stats(self) -> PipelineStats:
        return self.pipeline.stats

    def shutdown(self, timeout: float | None) -> bool:
        """Drain the pipeline within ``timeout`` seconds, then close the judge client; True when all was evaluated."""
        flushed = self.pipeline.shutdown(timeout)
        self.evaluation.close()
        return flushed


def build_pipeline(
    settings: Settings,
    *,
    evaluators: Sequence[Evaluator] | None = None,
    expectations: Sequence[ToolExpectation] | None = None,
    registry: CollectorRegistry | None = None,
    tracer_provider: Any = None,
    logger_provider: Any = None,
    global_providers: bool = True,
    judge_tracer_provider: Any = None,
    env: Mapping[str, str] | None = None,
    result_sink: Sink | None = None,
    multiprocess: bool = False,
) -> Built:
    """A pipeline (not started) from settings: evaluators, counters, run labels, the Prometheus sink and,
    when results can go out as telemetry, the OpenTelemetry sink.

    ``global_providers``: a provider left None means the global one (the in-process processor);
    otherwise None means "not emitted" (``serve`` without an export endpoint).
    ``result_sink``: results go out through it instead (``serve``'s own OTLP export).
    ``multiprocess``: the Prometheus sink's metrics are also written to prometheus-client's multiprocess
    files (the in-app processor when ``PROMETHEUS_MULTIPROC_DIR`` is set: ``sinks/prometheus_multiprocess.py``).
    """
    # Here, not at the top: `evaluate` (offline) needs ``evaluation`` only, not these sinks' libraries.
    from prometheus_client import CollectorRegistry

    from ..sinks.otel import OtelSink
    from ..sinks.prometheus import PrometheusSink

    registry = registry if registry is not None else CollectorRegistry()
    evaluated = evaluation(settings, evaluators=evaluators, expectations=expectations, registry=registry, env=env,
                           judge_tracer_provider=judge_tracer_provider)
    stats = PipelineStats()
    run_labels = RunLabels(settings.max_agent_labels, settings.max_service_labels)
    prometheus = PrometheusSink(registry, stats, run_labels)
    sinks: list[Sink] = [prometheus]
    emit_spans = settings.emit_spans and (global_providers or tracer_provider is not None)
    emit_logs = settings.emit_logs and (global_providers or logger_provider is not None)
    if result_sink is not None:
        sinks.append(result_sink)
    elif emit_spans or emit_logs:
        sinks.append(OtelSink(tracer_provider, logger_provider, emit_spans=emit_spans, emit_logs=emit_logs))
    publish: list[Callable[[], None]] = []
    if multiprocess:
        from ..sinks.prometheus_multiprocess import MultiprocessMirror

        publish.append(MultiprocessMirror(prometheus.collectors).sync)
        judge_metrics = getattr(evaluated.judge, "metrics", None)
        if judge_metrics is not None:
            publish.append(judge_metrics.publish)
    pipeline = Pipeline(settings, evaluated.evaluators, sinks, stats=stats, run_labels=run_labels, publish=publish)
    return Built(pipeline, evaluated, registry, exporting=len(sinks) > 1)
