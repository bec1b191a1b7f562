"""Deterministic trajectory evaluators: loops and step budget."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence

from ..assembly.dialects.base import canonical_json
from ..model import AgentTrace, EvalResult
from .base import Evaluator
from .view import run_view


class LoopDetection(Evaluator):
    """Fails when the same tool is called with identical arguments ``threshold_calls`` times."""

    name = "loop_detection"
    version = "1"
    default_threshold = 1.0
    telemetry_free = True

    def __init__(self, threshold_calls: int = 3, threshold: float | None = None) -> None:
        super().__init__(threshold)
        if threshold_calls < 2:
            raise ValueError("loop_detection: threshold_calls must be at least 2")
        self.threshold_calls = threshold_calls

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        view = run_view(trace)
        times = self.threshold_calls
        loops: dict[str, int] = {}
        if _may_repeat(view.names, times):  # identical calls have one name: else no identity is needed
            keys = view.identities
            if _may_repeat(keys, times):
                for key, n in Counter(keys).items():
                    if n >= times:
                        first = keys.index(key)  # the first such call
                        loops[f"{view.names[first]}({canonical_json(view.arguments[first])})"] = n
        if not loops:
            return [self.scored(trace, 1.0, "no repeated identical tool call", {"threshold_calls": self.threshold_calls})]
        worst = max(loops, key=loops.__getitem__)
        return [
            self.scored(
                trace, 0.0, f"{worst} called {loops[worst]} times with identical arguments",
                {"repeated_calls": loops, "threshold_calls": self.threshold_calls},
            )
        ]


def _may_repeat(items: Sequence[Hashable], times: int) -> bool:
    """False when no item can occur ``times`` times: that takes ``times - 1`` duplicates at least.
    One set, no count: most runs repeat no call, many call no tool twice."""
    return len(set(items)) <= len(items) - (times - 1)


class StepBudget(Evaluator):
    """Fails when the agent needed more LLM turns than ``max_steps``. Score: min(1, max_steps / steps)."""

    name = "step_budget"
    version = "1"
    default_threshold = 1.0
    telemetry_free = True

    def __init__(self, max_steps: int = 20, threshold: float | None = None) -> None:
        super().__init__(threshold)
        if max_steps < 1:
            raise ValueError("step_budget: max_steps must be at least 1")
        self.max_steps = max_steps

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        steps = len(trace.steps)
        details = {"steps": steps, "max_steps": self.max_steps}
        if steps == 0:
            return [self.skipped(trace, "no LLM turn recorded", details, reason="no_steps")]
        score = min(1.0, self.max_steps / steps)
        return [self.scored(trace, score, f"{steps} steps (budget {self.max_steps})", details)]
