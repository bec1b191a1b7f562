"""Evaluators: pure functions of an AgentTrace. Built-ins are named for configuration."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Evaluator
from .tool_calls import ExpectedCall, ToolCallAccuracy, ToolExpectation, ToolFailureRecovery, load_expectations
from .trajectory import LoopDetection, StepBudget

if TYPE_CHECKING:
    from ..config import Settings

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


__all__ = [
    "BUILTIN_EVALUATORS", "Evaluator", "ExpectedCall", "LoopDetection", "StepBudget", "ToolCallAccuracy",
    "ToolExpectation", "ToolFailureRecovery", "build_evaluators", "load_expectations",
]
