"""Deterministic trajectory evaluators: loops and step budget."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..assembly.dialects.base import canonical_json
from ..model import AgentTrace, EvalResult, ToolCall
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
        calls = trace.tool_calls
        keys = scalar_identities(calls)
        if keys is None:
            keys = [(call.name, canonical_json(call.arguments)) for call in calls]
        loops: dict[str, int] = {}
        for key, n in Counter(keys).items():
            if n >= self.threshold_calls:
                call = calls[keys.index(key)]  # the first such call
                loops[f"{call.name}({canonical_json(call.arguments)})"] = n
        if not loops:
            return [self.scored(trace, 1.0, "no repeated identical tool call", {"threshold_calls": self.threshold_calls})]
        worst = max(loops, key=loops.__getitem__)
        return [
            self.scored(
                trace, 0.0, f"{worst} called {loops[worst]} times with identical arguments",
                {"repeated_calls": loops, "threshold_calls": self.threshold_calls},
            )
        ]


_SCALARS = (str, int, bool, type(None))
"""Exact types whose JSON text is one to one with (type, value): no float (``nan``, ``-0.0``)."""


def scalar_identities(calls: list[ToolCall]) -> list[tuple[str, tuple[Any, ...]]] | None:
    """Per call, (name, sorted (key, type, value) of its arguments), when every call's arguments are a
    dict of ``str`` keys to ``_SCALARS``; else None.

    For such dicts two identities are equal exactly when the canonical JSON texts are (keys are
    sorted there too; ``1`` and ``True`` differ by type), and they cost less to make. All or
    nothing: a call with other arguments (a JSON string, a float) may have the same canonical JSON
    as a dict, so then every call is counted by canonical JSON.
    """
    identities = []
    for call in calls:
        arguments = call.arguments
        if type(arguments) is not dict:
            return None
        identity = []
        for key, value in arguments.items():
            kind = type(value)
            if type(key) is not str or kind not in _SCALARS:
                return None
            identity.append((key, kind, value))
        identity.sort()  # keys are unique: the values are never compared
        identities.append((call.name, tuple(identity)))
    return identities


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
            return [self.skipped(trace, "no LLM turn recorded", details, reason="no_steps")]
        score = min(1.0, self.max_steps / steps)
        return [self.scored(trace, score, f"{steps} steps (budget {self.max_steps})", details)]
