"""AgentEvalProcessor: the one line a user adds to an existing TracerProvider.

The hot path (``on_end``) follows the intake rule (``intake/admission.py``): keep
a span if its trace already has kept spans (children end before their parents, so
every ancestor of a GenAI span arrives after it), or if it carries GenAI data and
its trace is admitted (an adaptive trace-id ratio caps new traces per second);
drop everything else at once. That is a few dict look-ups per span and
never I/O, a lock or an exception into the app. All other work happens on
background threads.
"""

from __future__ import annotations

import atexit
import logging
import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry._logs import LoggerProvider, NoOpLoggerProvider, get_logger_provider
from opentelemetry._logs._internal import ProxyLoggerProvider
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from prometheus_client import CollectorRegistry, start_http_server

from ..config import Settings, SettingsOverrides
from ..evaluators import Evaluator, ToolExpectation
from ..pipeline.build import build_pipeline
from ..pipeline.core import at_fork_in_child
from ..sinks.prometheus_multiprocess import multiprocess_mode, multiprocess_registry
from .logs import AgentEvalLogProcessor

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import LoggerProvider as SDKLoggerProvider
    from opentelemetry.sdk.trace import TracerProvider
    from typing_extensions import Unpack

_logger = logging.getLogger("otel_agent_eval")


class AgentEvalProcessor(SpanProcessor):
    """Evaluates a sample of completed agent traces in the background.

    ``AgentEvalProcessor()`` reads its settings from ``OTEL_AGENT_EVAL_*``
    variables (or from ``env``); a ``settings`` object replaces them, and keyword
    arguments (``sample_rate=0.25``, ``prometheus_port=9464``: any ``Settings``
    field, see ``SettingsOverrides``) override either. Evaluation spans and log
    records go to ``tracer_provider`` / ``logger_provider`` (default: the global
    ones); metrics to ``registry`` (default: a private registry, served on
    ``prometheus_port`` when set); when none of them can show anything, the
    processor says so once, at startup. When a judge is configured
    (``OTEL_AGENT_EVAL_JUDGE_*``), the LLM-judge evaluators run too; their
    requests are spans on ``judge_tracer_provider`` when given, else not traced.
    Nothing an evaluator does is ever evaluated (``isolation.py``).

    Contracts, as the SDK's span processors keep them:

    - ``on_end`` never raises, takes no lock and does no I/O (``intake/admission.py``);
    - ``force_flush`` completes every buffered trace and waits for its evaluation; it
      returns False when the timeout passes first, and False once shut down;
    - ``shutdown`` evaluates what is buffered within ``shutdown_timeout_seconds`` (or
      ``timeout_millis``), counts the rest as dropped (``shutdown``), stops the
      threads, closes the judge client and the ``/metrics`` server. It is idempotent:
      a second call returns at once. After it, spans and log records are dropped and
      counted (``spans_dropped{already_shutdown}``) and nothing is retained;
    - after ``os.fork()`` the child has its own threads, locks, events, queues,
      counters and judge client, and starts empty; the parent's ``/metrics`` server
      stays the parent's.
    """

    def __init__(
        self,
        evaluators: Sequence[Evaluator] | None = None,
        *,
        settings: Settings | None = None,
        env: Mapping[str, str] | None = None,
        expectations: Sequence[ToolExpectation] | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        logger_provider: LoggerProvider | None = None,
        registry: CollectorRegistry | None = None,
        judge_tracer_provider: trace.TracerProvider | None = None,
        **overrides: Unpack[SettingsOverrides],
    ) -> None:
        if evaluators is not None and any(isinstance(e, str) for e in evaluators):  # not an AttributeError from a worker's setup
            raise TypeError(f"evaluators={list(evaluators)!r}: give Evaluator objects; evaluators by name go in "
                            f"OTEL_AGENT_EVAL_EVALUATORS or settings=Settings.load(evaluators=...)")
        self.settings = _settings(settings, env, overrides)
        s = self.settings
        multiprocess = multiprocess_mode()
        self._built = build_pipeline(s, evaluators=evaluators, expectations=expectations, registry=registry,
                                     tracer_provider=tracer_provider, logger_provider=logger_provider,
                                     judge_tracer_provider=judge_tracer_provider, env=env, multiprocess=multiprocess)
        self.registry = self._built.registry
        self.pipeline = self._built.pipeline
        self.stats = self.pipeline.stats
        self.evaluators = self._built.evaluation.evaluators
        self.metrics_port: int | None = None
        self._metrics_server: Any = None
        if s.prometheus_port is not None:
            self._metrics_server = _metrics_server(s.prometheus_host, s.prometheus_port,
                                                   multiprocess_registry() if multiprocess else self.registry, multiprocess)
            self.metrics_port = self._metrics_server.server_port if self._metrics_server is not None else None
        if _results_go_nowhere(s, tracer_provider, logger_provider, registry):
            _logger.warning(
                "otel-agent-eval: evaluation results have nowhere to go: no tracer or logger provider was given and the "
                "global ones are not set, and no prometheus_port. Use install(provider, ...) or pass tracer_provider=, "
                "logger_provider= or prometheus_port= (see the README, 'Use it in your app')."
            )
        self._shutdown = False
        at_fork_in_child(self._after_fork_in_child)
        self._at_exit = _shutdown_at_exit(self)
        self.pipeline.start()

    @property
    def judge(self) -> Any:
        """The judge client the judge evaluators share (None without a judge)."""
        return self._built.evaluation.judge

    # -- SpanProcessor ---------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing to do when a span starts: decisions are made when it ends."""

    def on_end(self, span: ReadableSpan) -> None:
        """The hot path: the intake rule (``intake/admission.py``), then one bounded append. Never raises."""
        try:
            self.pipeline.intake.offer_span(span)
        except Exception:  # noqa: BLE001 - never raise into the host app
            self.pipeline.internal_error("on_end", "otel-agent-eval: error in on_end")

    @property
    def log_processor(self) -> AgentEvalLogProcessor:
        """A LogRecordProcessor feeding GenAI content log records into this pipeline.

        Add it to the app's LoggerProvider when instrumentations record content as
        log events (event-only mode); ``install()`` does both in one call.
        """
        return AgentEvalLogProcessor(self.pipeline, on_shutdown=self.shutdown)

    def shutdown(self, *, timeout_millis: int | None = None) -> None:
        """Evaluate what is buffered (within ``timeout_millis``, default ``shutdown_timeout_seconds``), then stop.

        Idempotent: the second call returns at once. See the class docstring for what is counted.
        """
        if self._shutdown:
            return
        self._shutdown = True
        atexit.unregister(self._at_exit)
        timeout = self.settings.shutdown_timeout_seconds if timeout_millis is None else timeout_millis / 1000.0
        self._built.shutdown(timeout)
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
            self._metrics_server = None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Complete every buffered trace now and wait for its evaluation: True when done within the timeout.

        False when the timeout passes first, and False once shut down (nothing can be flushed any more).
        """
        return self.pipeline.flush(timeout_millis / 1000.0)

    def _after_fork_in_child(self) -> None:
        """The parent's ``/metrics`` server thread is not in the child: the child does not serve (nor stop) it."""
        self._metrics_server = None


def _metrics_server(host: str, port: int, registry: CollectorRegistry, multiprocess: bool = False) -> Any:
    """prometheus-client's ``/metrics`` server, or None when the port cannot be bound: in the app's process a
    taken port (the other workers of a gunicorn or uvicorn app given the same port, a second instance on the
    host) must not stop the app from starting; it is said once, at ERROR, naming the setting. In multiprocess
    mode (``registry`` reads every process's files) one process serving the port is the setup, said at WARNING."""
    try:
        server, _ = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        if multiprocess:
            _logger.warning(
                "otel-agent-eval: cannot serve /metrics on %s:%d (prometheus_port, OTEL_AGENT_EVAL_PROMETHEUS_PORT): %s. "
                "This process's metrics go to PROMETHEUS_MULTIPROC_DIR, where the process serving that port (another "
                "worker) or your own multiprocess /metrics reads them.", host, port, exc)
            return None
        reloaded = os.environ.get("WERKZEUG_RUN_MAIN") == "true" or os.environ.get("RUN_MAIN") == "true"
        _logger.error(
            "otel-agent-eval: cannot serve /metrics on %s:%d (prometheus_port, OTEL_AGENT_EVAL_PROMETHEUS_PORT): %s. "
            "This process serves no metrics; evaluation and its spans and log records go on. %s",
            host, port, exc,
            # The child a reloader runs the app in (WERKZEUG_RUN_MAIN: Flask's debug mode; RUN_MAIN: Django's runserver).
            "This process runs under a reloader (Flask's debug mode, Django's runserver): its watching parent, "
            "which serves no requests, imported the app first and holds the port. Set PROMETHEUS_MULTIPROC_DIR "
            "(the parent then serves this process's metrics; see the README, 'Several worker processes') or turn "
            "the reloader off." if reloaded else
            "With several worker processes, set PROMETHEUS_MULTIPROC_DIR (one port then serves them all; see the "
            "README, 'Several worker processes'), give each its own port (0 picks a free one) or pass registry= "
            "and serve it yourself.")
        return None
    return server


def _shutdown_at_exit(processor: AgentEvalProcessor) -> Callable[[], None]:
    """Shut ``processor`` down at interpreter exit, before the providers it emits through: exit handlers run last
    registered first, and the providers registered theirs when they were made, before the processor. The SDK's
    own handler shuts a provider's processors down in the order they were added, the app's exporters usually
    first: the last results, emitted while the processor drains, went into processors already shut down and
    were lost. Holds the processor weakly (a processor that is gone has nothing to drain)."""
    ref = weakref.ref(processor)

    def at_exit() -> None:
        alive = ref()
        if alive is not None:
            alive.shutdown()

    atexit.register(at_exit)
    return at_exit


def _first_in_chain(chain: Any, attribute: str, processor: Any) -> None:
    """Put ``processor`` first in an SDK provider's processor chain (the providers' default chains,
    ``SynchronousMultiSpanProcessor`` and ``SynchronousMultiLogRecordProcessor``: a tuple and a lock, private to
    the SDK, checked here; a chain of another shape leaves it where ``add_*_processor`` put it, last). Such a chain
    shuts its processors down in that order: first, the processor drains and emits its last results while the
    app's exporting processors can still send them (``provider.shutdown()`` called by the app). A
    ``ConcurrentMultiSpanProcessor`` shuts them down all at once: there the exit handler, or the app calling
    ``processor.shutdown()`` before ``provider.shutdown()``, is what keeps the last results."""
    lock = getattr(chain, "_lock", None)
    if lock is None or type(getattr(chain, attribute, None)) is not tuple:
        return
    with lock:
        current = getattr(chain, attribute)
        if any(p is processor for p in current):
            setattr(chain, attribute, (processor, *(p for p in current if p is not processor)))


def _settings(settings: Settings | None, env: Mapping[str, str] | None, overrides: Mapping[str, Any]) -> Settings:
    """``settings`` (else the environment), with ``overrides`` on top, validated again."""
    if settings is None:
        return Settings.load(env, **overrides)
    if not overrides:
        return settings
    return Settings.load({}, **{**settings.model_dump(), **overrides})


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
    tracer_provider: TracerProvider,
    logger_provider: SDKLoggerProvider | LoggerProvider | None = None,
    evaluators: Sequence[Evaluator] | None = None,
    *,
    settings: Settings | None = None,
    env: Mapping[str, str] | None = None,
    expectations: Sequence[ToolExpectation] | None = None,
    registry: CollectorRegistry | None = None,
    judge_tracer_provider: trace.TracerProvider | None = None,
    **overrides: Unpack[SettingsOverrides],
) -> AgentEvalProcessor:
    """Attach an AgentEvalProcessor to ``tracer_provider`` and, when given, its log
    processor to ``logger_provider`` (for content recorded as log events).

    Evaluation spans and log records are emitted through the same providers
    (``judge_tracer_provider=`` for the judge's own request spans); the other
    arguments are ``AgentEvalProcessor``'s. Both processors go first in their provider's
    chain, so that whichever provider the app shuts down first drains the evaluation
    while its exporters still send what it emits. A ``logger_provider`` that takes no
    processors (the API's proxy or no-op one: no logs exporter configured, as
    ``_logs.get_logger_provider()`` gives under ``opentelemetry-instrument`` without
    ``OTEL_LOGS_EXPORTER``) gets none, and result records go through it to wherever it
    leads. Returns the processor.
    """
    chain = getattr(tracer_provider, "_active_span_processor", None)
    if any(isinstance(p, AgentEvalProcessor) and not p._shutdown for p in getattr(chain, "_span_processors", ())):
        _logger.warning("otel-agent-eval: this provider already has an AgentEvalProcessor: each trace will be evaluated "
                        "by both (a notebook cell run twice?); shut the first down (processor.shutdown()) to replace it")
    processor = AgentEvalProcessor(
        evaluators, settings=settings, env=env, expectations=expectations, tracer_provider=tracer_provider,
        logger_provider=logger_provider, registry=registry, judge_tracer_provider=judge_tracer_provider, **overrides,
    )
    tracer_provider.add_span_processor(processor)
    _first_in_chain(chain, "_span_processors", processor)
    if hasattr(logger_provider, "add_log_record_processor"):
        log_processor = processor.log_processor
        logger_provider.add_log_record_processor(log_processor)
        _first_in_chain(getattr(logger_provider, "_multi_log_record_processor", None), "_log_record_processors",
                        log_processor)
    return processor
