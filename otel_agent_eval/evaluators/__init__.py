"""Evaluators: pure functions of an AgentTrace. Built-ins are named for configuration."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..model import AgentTrace
from .arguments import ToolArgumentValidity
from .base import Evaluator
from .expectations import ExpectedCall, ToolExpectation, first_rule, load_expectations
from .tool_calls import ToolCallAccuracy, ToolFailureRecovery
from .trajectory import LoopDetection, StepBudget

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from ..config import Settings
    from .judge import JudgeClient

BUILTIN_EVALUATORS: dict[str, type[Evaluator]] = {
    cls.name: cls for cls in (ToolCallAccuracy, ToolFailureRecovery, LoopDetection, StepBudget, ToolArgumentValidity)
}


def known_evaluator_names() -> set[str]:
    """Built-in and judge evaluator names: what thresholds may be set for."""
    from .judge.evaluators import JUDGE_EVALUATORS

    return set(BUILTIN_EVALUATORS) | set(JUDGE_EVALUATORS)


def expectation_rules(settings: Settings, expectations: Sequence[ToolExpectation] | None = None) -> list[ToolExpectation]:
    """Rules given in code, then those of ``settings.expectations_file``."""
    rules = list(expectations or [])
    if settings.expectations_file:
        rules.extend(load_expectations(settings.expectations_file))
    return rules


def build_evaluators(
    settings: Settings,
    expectations: Sequence[ToolExpectation] | None = None,
    *,
    thresholds: Mapping[str, float] | None = None,
) -> list[Evaluator]:
    """Instantiate the built-in evaluators named in ``settings.evaluators``.

    Thresholds, most specific first: a matching expectation rule's, then ``thresholds``
    (constructor or CLI), then ``settings.thresholds`` (environment), then the default.
    """
    return _builtins(settings, expectation_rules(settings, expectations), {**settings.thresholds, **(thresholds or {})})


def _builtins(settings: Settings, rules: list[ToolExpectation], chosen: Mapping[str, float]) -> list[Evaluator]:
    built: list[Evaluator] = []
    for name in settings.evaluators:
        threshold = chosen.get(name)
        evaluator: Evaluator
        if name == LoopDetection.name:
            evaluator = LoopDetection(threshold_calls=settings.loop_threshold, threshold=threshold)
        elif name == StepBudget.name:
            evaluator = StepBudget(max_steps=settings.max_steps, threshold=threshold)
        else:
            evaluator = BUILTIN_EVALUATORS[name](threshold=threshold)
        evaluator.rules = rules
        built.append(evaluator)
    return built


def build_configured_evaluators(
    settings: Settings,
    expectations: Sequence[ToolExpectation] | None = None,
    *,
    registry: CollectorRegistry | None = None,
    env: Mapping[str, str] | None = None,
    thresholds: Mapping[str, float] | None = None,
    judge_tracer_provider: Any = None,
) -> tuple[list[Evaluator], JudgeClient | None]:
    """The deterministic evaluators, plus the judge evaluators when a judge is configured
    (``OTEL_AGENT_EVAL_JUDGE_*``, see docs/judge.md). Returns the judge to close on shutdown.
    ``judge_tracer_provider`` receives a span per judge request (``judge/spans.py``).

    Judge evaluators take their thresholds from the same places as the built-in ones, and
    response_facts its facts from the expectation rules (``facts``).
    """
    from ..config import ENV_PREFIX, ConfigError
    from .judge import JudgeSettings

    rules = expectation_rules(settings, expectations)
    chosen = {**settings.thresholds, **(thresholds or {})}
    evaluators = _builtins(settings, rules, chosen)
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
    judged = build_judge_evaluators(
        judge, judge_settings.evaluators, thresholds=chosen, facts_for=lambda trace: facts_for(rules, trace)
    )
    for evaluator in judged:
        evaluator.rules = rules
    return evaluators + list(judged), judge


def facts_for(rules: Sequence[ToolExpectation], trace: AgentTrace) -> list[str] | None:
    """The facts of the first matching rule that names facts (response_facts)."""
    rule = first_rule(rules, trace, lambda r: r.facts is not None)
    return rule.facts if rule is not None else None


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
    "BUILTIN_EVALUATORS", "Evaluator", "ExpectedCall", "LoopDetection", "StepBudget", "ToolArgumentValidity",
    "ToolCallAccuracy", "ToolExpectation", "ToolFailureRecovery", "build_configured_evaluators", "build_evaluators",
    "expectation_rules", "facts_for", "judge_status", "known_evaluator_names", "load_expectations",
]
