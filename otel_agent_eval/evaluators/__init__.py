"""Evaluators: pure functions of an AgentTrace. Built-ins are named for configuration."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .base import Evaluator
from .tool_calls import ExpectedCall, ToolCallAccuracy, ToolExpectation, ToolFailureRecovery, load_expectations
from .trajectory import LoopDetection, StepBudget

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from ..config import Settings
    from .judge import JudgeClient

BUILTIN_EVALUATORS = {
    cls.name: cls for cls in (ToolCallAccuracy, ToolFailureRecovery, LoopDetection, StepBudget)
}


def build_evaluators(settings: Settings, expectations: list[ToolExpectation] | None = None) -> list[Evaluator]:
    """Instantiate the built-in evaluators named in ``settings.evaluators``."""
    rules = list(expectations or [])
    if settings.expectations_file:
        rules.extend(load_expectations(settings.expectations_file))
    built: list[Evaluator] = []
    for name in settings.evaluators:
        if name == ToolCallAccuracy.name:
            built.append(ToolCallAccuracy(rules=rules))
        elif name == LoopDetection.name:
            built.append(LoopDetection(threshold_calls=settings.loop_threshold))
        elif name == StepBudget.name:
            built.append(StepBudget(max_steps=settings.max_steps))
        else:
            built.append(BUILTIN_EVALUATORS[name]())
    return built


def build_configured_evaluators(
    settings: Settings,
    expectations: list[ToolExpectation] | None = None,
    *,
    registry: CollectorRegistry | None = None,
    env: Mapping[str, str] | None = None,
    judge_tracer_provider: Any = None,
) -> tuple[list[Evaluator], JudgeClient | None]:
    """The deterministic evaluators, plus the judge evaluators when a judge is configured
    (``OTEL_AGENT_EVAL_JUDGE_*``, see docs/judge.md). Returns the judge to close on shutdown.
    ``judge_tracer_provider`` receives a span per judge request (``judge/spans.py``).
    """
    from ..config import ENV_PREFIX, ConfigError
    from .judge import JudgeSettings

    evaluators = build_evaluators(settings, expectations)
    judge_settings = JudgeSettings.load(env)
    if not judge_settings.enabled:
        return evaluators, None
    if judge_settings.deadline_seconds >= settings.evaluator_timeout_seconds:
        raise ConfigError(
            f"{ENV_PREFIX}JUDGE_DEADLINE_SECONDS ({judge_settings.deadline_seconds:g}) must be below "
            f"{ENV_PREFIX}EVALUATOR_TIMEOUT_SECONDS ({settings.evaluator_timeout_seconds:g})"
        )
    from .judge import JudgeClient, JudgeMetrics, build_judge_evaluators

    if importlib.util.find_spec("openai") is None:  # the judge extra
        raise ConfigError(
            f"{ENV_PREFIX}JUDGE_MODEL is set but the openai package is missing: "
            "pip install 'otel-agent-eval[judge]' (or unset the judge variables)"
        )
    judge = JudgeClient(judge_settings, metrics=JudgeMetrics(registry) if registry is not None else None,
                        tracer_provider=judge_tracer_provider)
    return evaluators + build_judge_evaluators(judge, judge_settings.evaluators), judge


def judge_status(env: Mapping[str, str] | None = None) -> str:
    """One line for humans: are judge evaluators on, and if not, how to turn them on."""
    from .judge import JudgeSettings

    settings = JudgeSettings.load(env)
    if settings.enabled:
        return f"judge evaluators: on ({', '.join(settings.evaluators)} with model {settings.model})"
    return (
        "judge evaluators: off (set OTEL_AGENT_EVAL_JUDGE_MODEL and OTEL_AGENT_EVAL_JUDGE_BASE_URL "
        "or an API key to enable them; see docs/judge.md)"
    )


__all__ = [
    "BUILTIN_EVALUATORS", "Evaluator", "ExpectedCall", "LoopDetection", "StepBudget", "ToolCallAccuracy",
    "ToolExpectation", "ToolFailureRecovery", "build_configured_evaluators", "build_evaluators", "judge_status",
    "load_expectations",
]
