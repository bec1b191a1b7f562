"""Scores as OpenTelemetry data, tied to the evaluated trace.

- one evaluation span per evaluated agent trace and phase, in the same trace,
  child of the evaluated agent span, carrying that phase's scores as
  attributes: ``evaluate_agent {agent}`` for the deterministic evaluators (out
  as soon as they are done), ``judge_agent {agent}`` for the judge evaluators;
- one ``gen_ai.evaluation.result`` log record per result (GenAI semantic
  conventions), parented to the evaluated span.

Span attribute names (documented in the README):
``agent_eval.<evaluator>.score`` (double, absent when the result has none),
``agent_eval.<evaluator>.label`` (pass | fail | skipped | error),
plus ``agent_eval.agent.name``, ``agent_eval.phase`` (deterministic | judge), ``agent_eval.service.name`` (the run's resource
``service.name``, when known: an evaluation span exported by ``serve`` has a
resource of its own), ``agent_eval.evaluated_span_id``,
``agent_eval.partial`` (true when the agent span was missing),
``agent_eval.spans_dropped`` (spans of the trace dropped as too many, when any),
``agent_eval.attributes_dropped`` / ``agent_eval.events_dropped`` (attributes and span events the
producer's SDK dropped from the run's spans at its span limits, when any), ``agent_eval.values_cut_short``
(JSON values cut short by a value length limit, not read, when any),
``agent_eval.results.{pass,fail,skipped,error}`` counts. An evaluator that
returns several results reports its lowest score and worst label. The span
deliberately carries no ``gen_ai.*`` attribute, so that no reader (this
product included) mistakes it for an agent span.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry._logs import LoggerProvider, LogRecord, SeverityNumber, get_logger_provider
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from ..metadata import SERVICE_NAME
from ..model import EvalResult, EvaluatedTrace
from ..records import OWN_SCOPE
from .fit import fit_json

SCOPE_NAME = OWN_SCOPE
EVENT_NAME = "gen_ai.evaluation.result"
SERVICE_ATTRIBUTE = "agent_eval.service.name"
LABEL_RANK = {"error": 0, "fail": 1, "skipped": 2, "pass": 3}
SPAN_NAMES = {"deterministic": "evaluate_agent", "judge": "judge_agent"}
MAX_EXPLANATION = 1000
MAX_DETAILS = 4000
"""Characters of ``agent_eval.details``: longer details are shortened by structure (``fit.py``), still valid JSON."""


def evaluated_context(evaluated: EvaluatedTrace) -> Any:
    """A context whose current span is the evaluated agent span (a remote parent)."""
    t = evaluated.trace
    span_context = SpanContext(
        trace_id=int(t.trace_id, 16),
        span_id=int(t.agent_span_id, 16) if t.agent_span_id else 0,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(NonRecordingSpan(span_context))


def span_attributes(evaluated: EvaluatedTrace) -> dict[str, Any]:
    t = evaluated.trace
    attributes: dict[str, Any] = {"agent_eval.agent.name": t.agent_name, "agent_eval.phase": evaluated.phase}
    if SERVICE_NAME in t.metadata:
        attributes[SERVICE_ATTRIBUTE] = t.metadata[SERVICE_NAME]
    if t.agent_span_id:
        attributes["agent_eval.evaluated_span_id"] = t.agent_span_id
    if t.partial:
        attributes["agent_eval.partial"] = True
    for name, count in t.losses.items():
        attributes[f"agent_eval.{name}"] = count
    worst: dict[str, tuple[str, float | None]] = {}  # per evaluator, in first-result order: worst label, lowest score
    counts = dict.fromkeys(LABEL_RANK, 0)
    for result in evaluated.results:
        fields = result.__dict__  # see log_attributes
        label, score, evaluator = fields["label"], fields["score"], fields["evaluator"]
        counts[label] += 1
        seen = worst.get(evaluator)
        if seen is not None:
            if LABEL_RANK[seen[0]] <= LABEL_RANK[label]:
                label = seen[0]
            if score is None or (seen[1] is not None and seen[1] <= score):
                score = seen[1]
        worst[evaluator] = (label, score)
    for name, (label, score) in worst.items():
        attributes[f"agent_eval.{name}.label"] = label
        if score is not None:
            attributes[f"agent_eval.{name}.score"] = score
    for label, count in counts.items():
        attributes[f"agent_eval.results.{label}"] = count
    return attributes


def explanation_text(explanation: str) -> str:
    """A result's explanation as emitted (a function of the explanation alone: serve's encoder keeps it by text)."""
    return explanation[:MAX_EXPLANATION]


def details_text(details: Any) -> str:
    """A result's details as emitted: JSON of at most ``MAX_DETAILS`` characters."""
    return fit_json(details, MAX_DETAILS)


def log_attributes(result: EvalResult, service: Any = None) -> dict[str, Any]:
    """A result record's attributes. ``otlp_attributes.py`` encodes them from templates it derives from this
    function (see there): a value that changes from result to result comes from ``explanation``,
    ``result_id``, ``score`` or ``details`` (through the functions above), the rest from the evaluator,
    label, agent, version and service."""
    # The fields read off the model's ``__dict__`` (where pydantic keeps them): ``BaseModel`` defines
    # ``__getattr__``, so each attribute read on a model takes the slow slot, ~4x a dict read.
    fields = result.__dict__
    label, score, details = fields["label"], fields["score"], fields["details"]
    attributes: dict[str, Any] = {
        "gen_ai.evaluation.name": fields["evaluator"],
        "gen_ai.evaluation.score.label": label,
        "gen_ai.evaluation.explanation": explanation_text(fields["explanation"]),
        "gen_ai.agent.name": fields["agent_name"],
        "agent_eval.result_id": fields["result_id"],
        "agent_eval.evaluator.version": fields["evaluator_version"],
    }
    if service is not None:
        attributes[SERVICE_ATTRIBUTE] = service
    if score is not None:
        attributes["gen_ai.evaluation.score.value"] = score
    if label == "error":
        attributes["error.type"] = str(details.get("reason", "_OTHER"))
    if details:
        attributes["agent_eval.details"] = details_text(details)
    return attributes


class OtelSink:
    name = "otel"

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        logger_provider: LoggerProvider | None = None,
        *,
        emit_spans: bool = True,
        emit_logs: bool = True,
    ) -> None:
        self._tracer_provider = tracer_provider
        self._logger_provider = logger_provider
        self.emit_spans = emit_spans
        self.emit_logs = emit_logs
        self._tracer: tuple[Any, Any] = (None, None)
        self._logger: tuple[Any, Any] = (None, None)

    def _current_tracer(self) -> Any:
        """The tracer of the configured (or current global) provider, made once per provider: the SDK's
        ``get_tracer`` rebuilds scope objects and re-installs a warnings filter on every call."""
        provider = self._tracer_provider or trace.get_tracer_provider()
        if self._tracer[0] is not provider:
            self._tracer = (provider, provider.get_tracer(SCOPE_NAME))
        return self._tracer[1]

    def _current_logger(self) -> Any:
        provider = self._logger_provider or get_logger_provider()
        if self._logger[0] is not provider:
            self._logger = (provider, provider.get_logger(SCOPE_NAME))
        return self._logger[1]

    def emit(self, evaluated: EvaluatedTrace) -> None:
        context = evaluated_context(evaluated)
        if self.emit_spans:
            span = self._current_tracer().start_span(
                f"{SPAN_NAMES[evaluated.phase]} {evaluated.trace.agent_name}",
                context=context,
                kind=SpanKind.INTERNAL,
                attributes=span_attributes(evaluated),
                start_time=evaluated.started_ns,
            )
            span.end(end_time=evaluated.ended_ns)
        if self.emit_logs:
            logger = self._current_logger()
            service = evaluated.trace.metadata.get(SERVICE_NAME)
            for result in evaluated.results:
                logger.emit(
                    LogRecord(
                        timestamp=evaluated.ended_ns,
                        context=context,
                        severity_number=SeverityNumber.INFO,
                        event_name=EVENT_NAME,
                        attributes=log_attributes(result, service),
                    )
                )
