"""Evaluators: pure functions of an AgentTrace. Built-ins are named for configuration."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config_base import threshold_values
from ..model import AgentTrace
from .arguments import ToolArgumentValidity
from .base import Evaluator
from .expectations import ExpectedCall, ToolExpectation, first_rule, load_expectations
from .registry import BUILTIN_EVALUATORS, known_evaluator_names
from .tool_calls import ToolCallAccuracy, ToolFailureRecovery
from .trajectory import LoopDetection, StepBudget

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from ..config import Settings
    from .judge import JudgeClient

def expectation_rules(settings: Settings, expectations: Sequence[ToolExpectation] | None = None) -> list[ToolExpectation]:
    """Rules given in code, then those of ``settings.expectations_file``; their thresholds name known evaluators."""
    rules = list(expectations or [])
    if settings.expectations_file:
        rules.extend(load_expectations(settings.expectations_file))
    known = known_evaluator_names() if any(rule.thresholds for rule in rules) else ()
    for rule in rules:
        threshold_values(rule.thresholds, known)
    return rules


def build_evaluators(
    settings: Settings,
    expectations: Sequence[ToolExpectation] | None = None,
    *,
    thresholds: Mapping[str, float] | None = None,
) -> list[Evaluator]:
    """Instantiate the built-in deterministic evaluators named in ``settings.evaluators`` (others
    are left out: ``build_configured_evaluators`` builds every kind).

    Thresholds, most specific first: a matching expectation rule's, then ``thresholds``
    (constructor or CLI), then ``settings.thresholds`` (environment), then the default.
    """
    rules = expectation_rules(settings, expectations)
    chosen = {**settings.thresholds, **(thresholds or {})}
    return [_builtin(name, settings, rules, chosen) for name in settings.evaluators if name in BUILTIN_EVALUATORS]


def _builtin(name: str, settings: Settings, rules: list[ToolExpectation], chosen: Mapping[str, float]) -> Evaluator:
    threshold = chosen.get(name)
    evaluator: Evaluator
    if name == LoopDetection.name:
        evaluator = LoopDetection(threshold_calls=settings.loop_threshold, threshold=threshold)
    elif name == StepBudget.name:
        evaluator = StepBudget(max_steps=settings.max_steps, threshold=threshold)
    else:
        evaluator = BUILTIN_EVALUATORS[name](threshold=threshold)
    evaluator.rules = rules
    return evaluator


def judge_evaluator_names(settings: Settings, judge_settings: Any) -> list[str]:
    """The judge evaluators to run: those named in ``settings.evaluators`` and in
    ``OTEL_AGENT_EVAL_JUDGE_EVALUATORS`` (its alias). Its default applies only when neither names one."""
    from .judge.evaluators import JUDGE_EVALUATORS

    named = [n for n in settings.evaluators if n in JUDGE_EVALUATORS]
    if named and "evaluators" not in judge_settings.model_fields_set:
        return named
    return list(dict.fromkeys([*named, *judge_settings.evaluators]))


@dataclass
class EvaluatorFactory:
    """Builds the configured evaluators, as often as needed (once for a pipeline, once per case
    for an experiment), sharing one judge client (budget, cache, concurrency).

    Every name or spec of ``settings.evaluators`` goes through the registry (built-in,
    judge, entry point, ``module:Class`` / ``module:function``); built-ins get the
    settings, the expectation rules and thresholds; user evaluators get the rules too
    (unless they set their own) and the threshold chosen for their name.
    """

    settings: Settings
    rules: list[ToolExpectation]
    thresholds: dict[str, float]
    judge: JudgeClient | None = None
    judge_names: list[str] = field(default_factory=list)

    def build(self, rules: Sequence[ToolExpectation] = (), *, reference: str | None = None) -> list[Evaluator]:
        """The evaluators, with ``rules`` ahead of the configured ones (a dataset case's rule) and
        ``reference``, an expected output, for task_completion."""
        from ..config_base import ENV_PREFIX, ConfigError
        from .registry import UnknownEvaluator, entry_point_names, resolve

        entry_points = entry_point_names()
        all_rules = [*rules, *self.rules]
        specs = list(dict.fromkeys([*self.settings.evaluators, *self.judge_names]))
        built: list[Evaluator] = []
        for spec in specs:
            try:
                made = resolve(spec, allow_import=True, build_builtin=lambda name: self._builtin(name, all_rules, reference))
            except UnknownEvaluator as exc:
                raise ConfigError(f"{ENV_PREFIX}EVALUATORS (or --evaluators): {exc}") from None
            for evaluator in made:
                if not evaluator.rules:
                    evaluator.rules = all_rules
                if (":" in spec or spec in entry_points) and evaluator.name in self.thresholds:
                    evaluator.threshold = self.thresholds[evaluator.name]  # built-ins got theirs when built
            built.extend(made)
        return built

    def _builtin(self, name: str, rules: list[ToolExpectation], reference: str | None) -> list[Evaluator]:
        if name in BUILTIN_EVALUATORS:
            return [_builtin(name, self.settings, rules, self.thresholds)]
        from ..config_base import ENV_PREFIX
        from .judge import build_judge_evaluators
        from .registry import UnknownEvaluator

        if self.judge is None:
            raise UnknownEvaluator(f"{name!r} is a judge evaluator and no judge is configured "
                                   f"(set {ENV_PREFIX}JUDGE_MODEL, see docs/judge.md)")
        return list(build_judge_evaluators(self.judge, [name], thresholds=self.thresholds, reference=reference,
                                           facts_for=lambda trace: facts_for(rules, trace)))

    def close(self) -> None:
        if self.judge is not None:
            self.judge.close()


def configure_evaluators(
    settings: Settings,
    expectations: Sequence[ToolExpectation] | None = None,
    *,
    registry: CollectorRegistry | None = None,
    env: Mapping[str, str] | None = None,
    thresholds: Mapping[str, float] | None = None,
    judge_tracer_provider: Any = None,
) -> EvaluatorFactory:
    """The one place that turns settings into an ``EvaluatorFactory``: rules, thresholds and,
    when a judge is configured (``OTEL_AGENT_EVAL_JUDGE_*``, see docs/judge.md), its client."""
    from ..config_base import ENV_PREFIX, ConfigError
    from .judge.settings import JudgeSettings

    factory = EvaluatorFactory(settings, expectation_rules(settings, expectations), {**settings.thresholds, **(thresholds or {})})
    judge_settings = JudgeSettings.load(env)
    if not judge_settings.enabled:
        return factory
    if judge_settings.deadline_seconds >= settings.evaluator_timeout_seconds:
        raise ConfigError(
            f"{ENV_PREFIX}JUDGE_DEADLINE_SECONDS ({judge_settings.deadline_seconds:g}) must be below "
            f"{ENV_PREFIX}EVALUATOR_TIMEOUT_SECONDS ({settings.evaluator_timeout_seconds:g})"
        )
    from .judge import JudgeClient, JudgeMetrics

    if importlib.util.find_spec("openai") is None:  # the judge extra
        raise ConfigError(
            f"{ENV_PREFIX}JUDGE_MODEL is set but the openai package is missing: "
            "pip install 'otel-agent-eval[judge]' (or unset the judge variables)"
        )
    from ..sinks.prometheus_multiprocess import metric_objects_fail  # a missing multiprocess directory: no metrics

    metrics = JudgeMetrics(registry) if registry is not None and not metric_objects_fail() else None
    factory.judge = JudgeClient(judge_settings, metrics=metrics, tracer_provider=judge_tracer_provider)
    factory.judge_names = judge_evaluator_names(settings, judge_settings)
    return factory


def build_configured_evaluators(
    settings: Settings, expectations: Sequence[ToolExpectation] | None = None, **options: Any
) -> tuple[list[Evaluator], JudgeClient | None]:
    """Every configured evaluator, built once (``options``: those of ``configure_evaluators``:
    ``registry``, ``env``, ``thresholds``, ``judge_tracer_provider``, which receives a span per
    judge request). Returns the judge to close on shutdown.

    Judge evaluators take their thresholds from the same places as the built-in ones, and
    response_facts its facts from the expectation rules (``facts``).
    """
    factory = configure_evaluators(settings, expectations, **options)
    try:
        return factory.build(), factory.judge
    except BaseException:
        factory.close()
        raise


def facts_for(rules: Sequence[ToolExpectation], trace: AgentTrace) -> list[str] | None:
    """The facts of the first matching rule that names facts (response_facts)."""
    rule = first_rule(rules, trace, lambda r: r.facts is not None)
    return rule.facts if rule is not None else None


def judge_status(env: Mapping[str, str] | None = None) -> str:
    """One line for humans: are judge evaluators on, and if not, how to turn them on."""
    from .judge.settings import JudgeSettings

    settings = JudgeSettings.load(env)
    if settings.enabled:
        return f"judge evaluators: on ({', '.join(settings.evaluators)} with model {settings.model})"
    return (
        "judge evaluators: off (set OTEL_AGENT_EVAL_JUDGE_MODEL and OTEL_AGENT_EVAL_JUDGE_BASE_URL "
        "or an API key to enable them; see docs/judge.md)"
    )


__all__ = [
    "BUILTIN_EVALUATORS", "Evaluator", "EvaluatorFactory", "ExpectedCall", "LoopDetection", "StepBudget", "ToolArgumentValidity",
    "ToolCallAccuracy", "ToolExpectation", "ToolFailureRecovery", "build_configured_evaluators", "build_evaluators", "configure_evaluators",
    "expectation_rules", "facts_for", "judge_evaluator_names", "judge_status", "known_evaluator_names", "load_expectations",
]
