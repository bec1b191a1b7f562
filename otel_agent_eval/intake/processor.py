"""AgentEvalProcessor: the one line a user adds to an existing TracerProvider.

The hot path (``on_end``) follows the intake rule: keep a span if its trace
already has kept spans (children end before their parents, so every ancestor
of a GenAI span arrives after it), or if it carries GenAI data and its trace is
admitted (``Pipeline.admit``: an adaptive trace-id ratio caps new traces per
second); drop everything else at once. That is a few dict look-ups per span and
never I/O, a lock or an exception into the app. All other work happens on
background threads.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry._logs import LoggerProvider, NoOpLoggerProvider, get_logger_provider
from opentelemetry._logs._internal import ProxyLoggerProvider
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from prometheus_client import CollectorRegistry, start_http_server

from ..config import Settings
from ..evaluators import Evaluator, ToolExpectation, build_configured_evaluators
from ..pipeline.core import Pipeline
from ..pipeline.stats import PipelineStats, RunLabels
from ..sinks.otel import OtelSink
from ..sinks.prometheus import PrometheusSink
from .logs import AgentEvalLogProcessor

_logger = logging.getLogger("otel_agent_eval")


class AgentEvalProcessor(SpanProcessor):
    """Evaluates a sample of completed agent traces in the background.

    ``AgentEvalProcessor()`` reads its settings from ``OTEL_AGENT_EVAL_*``
    variables; keyword arguments (``sample_rate=0.25``, ``prometheus_port=9464``,
    any ``Settings`` field) override them. Evaluation spans and log records go
    to ``tracer_provider`` / ``logger_provider`` (default: the global ones);
    metrics to ``registry`` (default: a private registry, served on
    ``prometheus_port`` when set); when none of them can show anything, the
    processor says so once, at startup. When a judge is configured
    (``OTEL_AGENT_EVAL_JUDGE_*``), the LLM-judge evaluators run too; their
    requests are spans on ``judge_tracer_provider`` when given, else not traced.
    Nothing an evaluator does is ever evaluated (``isolation.py``).
    """

    def __init__(
        self,
        evaluators: Sequence[Evaluator] | None = None,
        *,
        expectations: Sequence[ToolExpectation] | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        logger_provider: LoggerProvider | None = None,
        registry: CollectorRegistry | None = None,
        judge_tracer_provider: trace.TracerProvider | None = None,
        settings: Settings | None = None,
        env: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> None:
        self.settings = settings if settings is not None else Settings.load(env, **overrides)
        s = self.settings
        self.registry = registry if registry is not None else CollectorRegistry()
        self.judge: Any = None
        if evaluators is not None:
            self.evaluators = list(evaluators)
        else:
            self.evaluators, self.judge = build_configured_evaluators(
                s, list(expectations or ()), registry=self.registry, env=env, judge_tracer_provider=judge_tracer_provider
            )
        self.stats = PipelineStats()
        run_labels = RunLabels(s.max_agent_labels, s.max_service_labels)
        sinks: list[Any] = [PrometheusSink(self.registry, self.stats, run_labels)]
        if s.emit_spans or s.emit_logs:
            sinks.append(OtelSink(tracer_provider, logger_provider, emit_spans=s.emit_spans, emit_logs=s.emit_logs))
        self.pipeline = Pipeline(s, self.evaluators, sinks, stats=self.stats, run_labels=run_labels)
        self.metrics_port: int | None = None
        self._metrics_server: Any = None
        if s.prometheus_port is not None:
            self._metrics_server, _ = start_http_server(s.prometheus_port, addr=s.prometheus_host, registry=self.registry)
            self.metrics_port = self._metrics_server.server_port
        if _results_go_nowhere(s, tracer_provider, logger_provider, registry):
            _logger.warning(
                "otel-agent-eval: evaluation results have nowhere to go: no tracer or logger provider was given and the "
                "global ones are not set, and no prometheus_port. Use install(provider, ...) or pass tracer_provider=, "
                "logger_provider= or prometheus_port= (see the README, 'Use it in your app')."
            )
        self.pipeline.start()

    # -- SpanProcessor ---------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing to do when a span starts: decisions are made when it ends."""

    def on_end(self, span: ReadableSpan) -> None:
        """The hot path: the intake rule (``intake/admission.py``), then one bounded append. Never raises."""
        try:
            self.pipeline.intake.offer_span(span)
        except Exception:
            self.pipeline.internal_error("on_end", "otel-agent-eval: error in on_end")

    @property
    def log_processor(self) -> AgentEvalLogProcessor:
        """A LogRecordProcessor feeding GenAI content log records into this pipeline.

        Add it to the app's LoggerProvider when instrumentations record content as
        log events (event-only mode); ``install()`` does both in one call.
        """
        return AgentEvalLogProcessor(self.pipeline.intake, self.pipeline.internal_error)

    def shutdown(self) -> None:
        self.pipeline.shutdown(timeout=self.settings.evaluator_timeout_seconds)
        if self.judge is not None:
            self.judge.close()
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
            self._metrics_server = None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Complete every buffered trace now and wait for its evaluation (up to the timeout)."""
        return self.pipeline.flush(timeout_millis / 1000.0)


def _results_go_nowhere(
    s: Settings, tracer_provider: Any, logger_provider: Any, registry: CollectorRegistry | None
) -> bool:
    """True when no sink can show a result: spans and logs off or on the API's no-op providers, metrics unserved."""
    spans = s.emit_spans and not isinstance(
        tracer_provider or trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
    )
    logs = s.emit_logs and not isinstance(logger_provider or get_logger_provider(), (ProxyLoggerProvider, NoOpLoggerProvider))
    return not (spans or logs or registry is not None or s.prometheus_port is not None)


def install(
    tracer_provider: Any, logger_provider: Any | None = None, **kwargs: Any
) -> AgentEvalProcessor:
    """Attach an AgentEvalProcessor to ``tracer_provider`` and, when given, its log
    processor to ``logger_provider`` (for content recorded as log events).

    Evaluation spans and log records are emitted through the same providers
    unless ``kwargs`` name others (``judge_tracer_provider=`` for the judge's own
    request spans). Returns the processor (keep it for shutdown).
    """
    kwargs.setdefault("tracer_provider", tracer_provider)
    if logger_provider is not None:
        kwargs.setdefault("logger_provider", logger_provider)
    processor = AgentEvalProcessor(**kwargs)
    tracer_provider.add_span_processor(processor)
    if logger_provider is not None:
        logger_provider.add_log_record_processor(processor.log_processor)
    return processor
