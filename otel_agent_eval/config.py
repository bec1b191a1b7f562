"""One validated settings object, from constructor arguments and ``OTEL_AGENT_EVAL_*``.

Precedence: explicit arguments, then environment variables, then defaults. A
wrong value fails at construction with ``ConfigError``, whose message names the
setting (and its environment variable) and what is allowed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .config_base import (
    ENV_PREFIX,
    ConfigError,
    argument_name,
    comma_list,
    load_model,
    table_for,
    threshold_values,
)

DEFAULT_EVALUATORS = ("tool_call_accuracy", "tool_failure_recovery", "loop_detection", "step_budget")


class Settings(BaseModel):
    """Every knob of the pipeline. Field ``x`` is read from ``OTEL_AGENT_EVAL_X``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # sampling
    sample_rate: float = Field(1.0, ge=0.0, le=1.0, description="Share of agent traces evaluated, by trace id (TraceIdRatioBased rule).")
    sample_errors: bool = Field(True, description="Always evaluate traces whose agent span errored.")
    sample_tool_failures: bool = Field(True, description="Always evaluate traces with a failed tool call.")
    slow_trace_seconds: float | None = Field(None, gt=0, description="Always evaluate agent runs longer than this.")
    max_evaluations_per_second: float = Field(50.0, ge=0.0, description="Token-bucket limit on traces evaluated per second; 0 disables the limit.")
    max_traces_per_second: float = Field(200.0, ge=0.0, description="New GenAI traces buffered and assembled per second; above it, an adaptive trace-id ratio admits that many and the rest are rejected on arrival (admission_decisions{rejected}). 0 disables the limit.")
    # trace completion
    settle_delay_seconds: float = Field(2.0, ge=0.0, description="Wait after the local root span ends, for stragglers.")
    idle_timeout_seconds: float = Field(30.0, gt=0, description="Complete a trace with no root after this long without new spans.")
    max_trace_age_seconds: float = Field(300.0, gt=0, description="Complete a trace this long after its first span, whatever else.")
    # bounds
    max_intake_spans: int = Field(20_000, ge=1, description="Spans waiting for the background thread; beyond, new spans are dropped (intake_full).")
    max_buffered_traces: int = Field(2_000, ge=1, description="Traces being buffered; beyond, the oldest is dropped (buffer_full).")
    max_buffered_bytes: int = Field(64 * 1024 * 1024, ge=0, description="Estimated bytes of buffered spans (attribute content plus a fixed cost per span); beyond, the oldest traces are dropped (buffer_full); a single trace over it keeps its first spans (trace_too_large). 0 disables the limit.")
    max_spans_per_trace: int = Field(2_000, ge=1, description="Spans kept per trace; beyond, spans are dropped (trace_too_large).")
    max_queued_evaluations: int = Field(200, ge=1, description="Agent traces waiting for a worker; beyond, the oldest is dropped (queue_full).")
    wait_for_trace_seconds: float = Field(5.0, ge=0.0, description="Records intake (serve, offline): a non-GenAI span of a trace not yet known (an HTTP root arriving before its agent's spans) waits this long for a GenAI span of its trace, then leaves (waiting_spans{expired}). 0: such spans are not kept.")
    max_waiting_spans: int = Field(10_000, ge=0, description="Spans waiting for their trace to become known; beyond, the oldest waiting traces leave (waiting_spans{evicted}).")
    max_waiting_bytes: int = Field(8 * 1024 * 1024, ge=0, description="Estimated bytes of waiting spans; beyond, the oldest waiting traces leave (waiting_spans{evicted}). 0 disables the limit.")
    # evaluation
    evaluators: tuple[str, ...] = Field(DEFAULT_EVALUATORS, description="Evaluators to run, comma separated: built-in and judge names, names installed packages register (entry points `otel_agent_eval.evaluators`), `module:Class` or `module:function`.")
    workers: int = Field(1, ge=1, le=64, description="Evaluation worker threads.")
    evaluator_timeout_seconds: float = Field(30.0, gt=0, description="An evaluator running longer yields an error result (timeout).")
    shutdown_timeout_seconds: float = Field(30.0, ge=0, description="The processor's shutdown() evaluates what is buffered within this deadline, then counts the rest as dropped (shutdown); shutdown(timeout_millis=...) overrides it.")
    expectations_file: str | None = Field(None, description="JSON file of expectation rules: expected tools, retry keys, fallbacks, facts, thresholds (see README).")
    thresholds: dict[str, float] = Field(default_factory=dict, description="Per-evaluator pass thresholds, e.g. tool_call_accuracy=1.0,plan_quality=0.8 (or a JSON object); see README for the defaults.")
    loop_threshold: int = Field(3, ge=2, description="Same tool with identical arguments this many times is a loop.")
    max_steps: int = Field(20, ge=1, description="Step budget: more LLM turns than this fails step_budget.")
    max_conversations: int = Field(1000, ge=0, description="Conversations whose recent turns are remembered for later runs (gen_ai.conversation.id); 0 turns it off.")
    max_turns_per_conversation: int = Field(20, ge=1, description="Prior turns remembered per conversation and given to evaluators.")
    # outputs
    emit_spans: bool = Field(True, description="Emit an evaluation span per evaluated agent trace.")
    emit_logs: bool = Field(True, description="Emit gen_ai.evaluation.result log records.")
    export_max_queued_spans: int = Field(8192, ge=1, description="serve's result export: evaluation spans waiting for the OTLP exporter; beyond, new ones are dropped and counted (sink_errors{otlp}, the stop report's not_exported).")
    export_max_queued_log_records: int = Field(32768, ge=1, description="serve's result export: gen_ai.evaluation.result log records waiting for the OTLP exporter (one per evaluator and run); beyond, dropped and counted like export_max_queued_spans.")
    prometheus_port: int | None = Field(None, ge=0, le=65535, description="Serve /metrics on this port (0 picks a free port); unset: no server. A port already taken (another worker of the app) is logged at ERROR and the process goes on without /metrics.")
    prometheus_host: str = Field("0.0.0.0", description="Address the /metrics server binds to.")
    max_agent_labels: int = Field(50, ge=1, description="Distinct agent label values; further agents are reported as 'other'.")
    max_service_labels: int = Field(
        20, ge=1, description="Distinct service label values (resource service.name); further services are reported as 'other'."
    )

    @field_validator("evaluators", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return comma_list(value)

    @field_validator("thresholds", mode="before")
    @classmethod
    def _thresholds(cls, value: Any) -> Any:
        return check_thresholds(parse_thresholds(value) if isinstance(value, str) else value)

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None, *, given_as: Mapping[str, str] | None = None,
             **overrides: Any) -> Settings:
        """Build settings from ``overrides`` over ``OTEL_AGENT_EVAL_*`` variables over defaults; errors name an
        override as ``given_as`` says the caller took it (a command's ``--flag``), else ``argument {name}``."""
        settings = load_model(cls, ENV_PREFIX, env, overrides, given_as=given_as)
        var = f"{ENV_PREFIX}EVALUATORS"
        given = overrides.get("evaluators") is not None
        settings._check_consistency(f"{argument_name('evaluators', given_as)} ({var})" if given else var)
        return settings

    def _check_consistency(self, evaluators_from: str) -> None:
        """``evaluators_from``: where the evaluators came from, as errors name it (as ``load_model``'s do)."""
        from .evaluators.registry import UnknownEvaluator, check_name

        for name in self.evaluators:
            try:
                check_name(name)
            except UnknownEvaluator as exc:
                raise ConfigError(f"{evaluators_from}: {exc}") from None
        if self.idle_timeout_seconds > self.max_trace_age_seconds:
            raise ConfigError(
                f"{ENV_PREFIX}IDLE_TIMEOUT_SECONDS ({self.idle_timeout_seconds}) must not exceed "
                f"{ENV_PREFIX}MAX_TRACE_AGE_SECONDS ({self.max_trace_age_seconds})"
            )


class SettingsOverrides(TypedDict, total=False):
    """``Settings`` fields as keyword arguments (``AgentEvalProcessor(sample_rate=0.25)``): every field but
    ``evaluators``, which names evaluators where the processor's first argument gives them as objects.
    A test holds the keys equal to the fields."""

    sample_rate: float
    sample_errors: bool
    sample_tool_failures: bool
    slow_trace_seconds: float | None
    max_evaluations_per_second: float
    max_traces_per_second: float
    settle_delay_seconds: float
    idle_timeout_seconds: float
    max_trace_age_seconds: float
    max_intake_spans: int
    max_buffered_traces: int
    max_buffered_bytes: int
    max_spans_per_trace: int
    max_queued_evaluations: int
    wait_for_trace_seconds: float
    max_waiting_spans: int
    max_waiting_bytes: int
    workers: int
    evaluator_timeout_seconds: float
    shutdown_timeout_seconds: float
    expectations_file: str | None
    thresholds: dict[str, float] | str
    loop_threshold: int
    max_steps: int
    max_conversations: int
    max_turns_per_conversation: int
    emit_spans: bool
    emit_logs: bool
    export_max_queued_spans: int
    export_max_queued_log_records: int
    prometheus_port: int | None
    prometheus_host: str
    max_agent_labels: int
    max_service_labels: int


def parse_thresholds(text: str) -> dict[str, Any]:
    """``"a=1.0,b=0.8"`` or a JSON object -> ``{"a": "1.0", "b": "0.8"}`` (values checked by ``check_thresholds``)."""
    text = text.strip()
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError:
            raise ValueError("expected EVALUATOR=VALUE,... or a JSON object") from None
        if not isinstance(value, dict):
            raise ValueError("expected EVALUATOR=VALUE,... or a JSON object")
        return value
    out: dict[str, Any] = {}
    for item in comma_list(text):
        name, sep, number = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"{item!r}: expected EVALUATOR=VALUE, e.g. tool_call_accuracy=1.0")
        out[name.strip()] = number.strip()
    return out


def check_thresholds(thresholds: Any) -> dict[str, float]:
    """Evaluator name -> threshold, each a known evaluator (built-in, judge or installed) and within [0, 1]."""
    from .evaluators.registry import known_evaluator_names

    return threshold_values(thresholds, known_evaluator_names())


def settings_table() -> str:
    """The README's configuration table, generated from the fields (kept in sync by a test)."""
    return table_for(Settings, ENV_PREFIX)


__all__ = [
    "DEFAULT_EVALUATORS", "ENV_PREFIX", "ConfigError", "Settings", "SettingsOverrides", "check_thresholds", "comma_list", "load_model",
    "parse_thresholds", "settings_table", "table_for",
]
