"""Deterministic trajectory evaluators: loops and step budget."""

from __future__ import annotations

from collections import Counter

from ..dialects.base import canonical_json
from ..model import AgentTrace, EvalResult
from .base import Evaluator


class LoopDetection(Evaluator):
    """Fails when the same tool is called with identical arguments ``threshold_calls`` times."""

    name = "loop_detection"
    version = "1"
    default_threshold = 1.0

    def __init__(self, threshold_calls: int = 3, threshold: float | None = None) -> None:
        super().__init__(threshold)
        if threshold_calls < 2:
            raise ValueError("loop_detection: threshold_calls must be at least 2")
        self.threshold_calls = threshold_calls

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        counts = Counter((call.name, canonical_json(call.arguments)) for call in trace.tool_calls)
        loops = {f"{name}({args})": n for (name, args), n in counts.items() if n >= self.threshold_calls}
        if not loops:
            return [self.scored(trace, 1.0, "no repeated identical tool call", {"threshold_calls": self.threshold_calls})]
        worst = max(loops, key=loops.__getitem__)
        return [
            self.scored(
                trace, 0.0, f"{worst} called {loops[worst]} times with identical arguments",
                {"repeated_calls": loops, "threshold_calls": self.threshold_calls},
            )
        ]


class StepBudget(Evaluator):
    """Fails when the agent needed more LLM turns than ``max_steps``. Score: min(1, max_steps / steps)."""

    name = "step_budget"
    version = "1"
    default_threshold = 1.0

    def __init__(self, max_steps: int = 20, threshold: float | None = None) -> None:
        super().__init__(threshold)
        if max_steps < 1:
            raise ValueError("step_budget: max_steps must be at least 1")
        self.max_steps = max_steps

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        steps = len(trace.steps)
        details = {"steps": steps, "max_steps": self.max_steps}
        if steps == 0:
            return [self.skipped(trace, "no LLM turn recorded", details)]
        score = min(1.0, self.max_steps / steps)
        return [self.scored(trace, score, f"{steps} steps (budget {self.max_steps})", details)]
