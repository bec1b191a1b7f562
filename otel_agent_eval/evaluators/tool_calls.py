"""Deterministic tool-call evaluators: accuracy against expectations, failure recovery."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..assembly.dialects.base import canonical_json
from ..model import AgentTrace, EvalResult, ToolCall
from .base import Evaluator


class ExpectedCall(BaseModel):
    """An expected tool call: a name, optionally with exact arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    arguments: Any = None

    def matches(self, call: ToolCall) -> bool:
        if call.name != self.name:
            return False
        return self.arguments is None or canonical_json(self.arguments) == canonical_json(call.arguments)


class ToolExpectation(BaseModel):
    """A rule: for runs of ``agent`` (``*`` for any) whose input matches ``input_pattern``."""

    model_config = ConfigDict(extra="forbid")
    agent: str = "*"
    input_pattern: str | None = None
    expected_tools: list[ExpectedCall] | None = None
    require_order: bool = False
    penalize_unexpected: bool = False
    forbidden_tools: list[str] = Field(default_factory=list)

    @field_validator("expected_tools", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("input_pattern")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            re.compile(value)
        return value

    def applies_to(self, trace: AgentTrace) -> bool:
        if self.agent not in ("*", trace.agent_name):
            return False
        return self.input_pattern is None or re.search(self.input_pattern, trace.input or "") is not None


def load_expectations(path: str | Path) -> list[ToolExpectation]:
    """Read expectation rules from a JSON file: a list of ToolExpectation objects."""
    data = json.loads(Path(path).read_text())
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of expectation rules")
    return [ToolExpectation.model_validate(item) for item in data]


def _matched_unordered(expected: Sequence[ExpectedCall], actual: Sequence[ToolCall]) -> int:
    """Size of the multiset intersection (each actual call matches at most one expectation)."""
    used = [False] * len(actual)
    matched = 0
    # Exact-argument expectations first, so that a bare name does not steal their call.
    for exp in sorted(expected, key=lambda e: e.arguments is None):
        for i, call in enumerate(actual):
            if not used[i] and exp.matches(call):
                used[i] = True
                matched += 1
                break
    return matched


def _matched_in_order(expected: Sequence[ExpectedCall], actual: Sequence[ToolCall]) -> int:
    """Longest common subsequence of expected and actual calls."""
    previous = [0] * (len(actual) + 1)
    for exp in expected:
        if exp.arguments is None:  # what ``matches`` checks then, without a call per cell
            hits = [call.name == exp.name for call in actual]
        else:
            hits = [exp.matches(call) for call in actual]
        current = [0] * (len(actual) + 1)
        for j, hit in enumerate(hits):
            current[j + 1] = previous[j] + 1 if hit else max(previous[j + 1], current[j])
        previous = current
    return previous[-1]


def tool_call_accuracy_score(
    expected: Sequence[ExpectedCall], actual: Sequence[ToolCall], require_order: bool, penalize_unexpected: bool
) -> tuple[float, int, int]:
    """Return (score, matched, unexpected). See ToolCallAccuracy for the formulas."""
    if not expected:
        return (1.0 if not actual else 0.0), 0, len(actual)
    matched = _matched_in_order(expected, actual) if require_order else _matched_unordered(expected, actual)
    unexpected = len(actual) - matched
    if penalize_unexpected:
        return matched / (len(expected) + unexpected), matched, unexpected
    return matched / len(expected), matched, unexpected


class ToolCallAccuracy(Evaluator):
    """Did the agent call the expected tools?

    - no expectation (``None``): skipped;
    - expected ``[]``: 1.0 only if no tool was called, else 0.0;
    - unordered: matched multiset / len(expected);
    - ``require_order``: longest common subsequence / len(expected);
    - ``penalize_unexpected``: matched / (len(expected) + unexpected calls), never above 1.0;
    - a forbidden tool called: 0.0, whatever the rest.

    Expectations come from ``expected=`` (offline) or from rules matched by agent
    name and input (online); the first matching rule wins.
    """

    name = "tool_call_accuracy"
    version = "1"

    def __init__(
        self,
        expected: Sequence[str | ExpectedCall | dict[str, Any]] | None = None,
        *,
        require_order: bool = False,
        penalize_unexpected: bool = False,
        forbidden_tools: Sequence[str] = (),
        rules: Sequence[ToolExpectation] = (),
        threshold: float | None = None,
    ) -> None:
        super().__init__(threshold)
        self.default_rule: ToolExpectation | None = None
        if expected is not None or forbidden_tools:
            self.default_rule = ToolExpectation(
                expected_tools=list(expected) if expected is not None else None,
                require_order=require_order,
                penalize_unexpected=penalize_unexpected,
                forbidden_tools=list(forbidden_tools),
            )
        self.rules = list(rules)

    def rule_for(self, trace: AgentTrace) -> ToolExpectation | None:
        for rule in self.rules:
            if rule.applies_to(trace):
                return rule
        return self.default_rule

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        rule = self.rule_for(trace)
        if rule is None or (rule.expected_tools is None and not rule.forbidden_tools):
            return [self.skipped(trace, f"no tool-call expectation for agent {trace.agent_name!r}", reason="no_expectation")]
        actual = trace.tool_calls
        names = [call.name for call in actual]
        forbidden = sorted({n for n in names if n in rule.forbidden_tools})
        details: dict[str, Any] = {"actual": names}
        if rule.expected_tools is not None:
            score, matched, unexpected = tool_call_accuracy_score(
                rule.expected_tools, actual, rule.require_order, rule.penalize_unexpected
            )
            details.update(
                expected=[e.name for e in rule.expected_tools], matched=matched, unexpected=unexpected,
                require_order=rule.require_order, penalize_unexpected=rule.penalize_unexpected,
            )
            explanation = f"{matched} of {len(rule.expected_tools)} expected tool calls made"
            if unexpected:
                explanation += f", {unexpected} unexpected"
        else:
            score, explanation = 1.0, "no forbidden tool called"
        if forbidden:
            details["forbidden_called"] = forbidden
            return [self.scored(trace, 0.0, f"forbidden tool(s) called: {', '.join(forbidden)}", details)]
        return [self.scored(trace, score, explanation, details)]


class ToolFailureRecovery(Evaluator):
    """Did every failed tool call get recovered by a later successful call?

    A failure is recovered when any later tool call in the run succeeded (a retry
    of the same tool or an alternative). Score: recovered failures / failures
    (1.0 when no call failed). Any unrecovered failure fails (threshold 1.0).
    """

    name = "tool_failure_recovery"
    version = "1"
    default_threshold = 1.0

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        calls = [c for c in trace.tool_calls if c.executed]
        failures = [i for i, call in enumerate(calls) if call.failed]
        if not failures:
            return [self.scored(trace, 1.0, "no tool call failed", {"failed": 0})]
        unrecovered = [i for i in failures if not any(not c.failed for c in calls[i + 1 :])]
        recovered = len(failures) - len(unrecovered)
        details = {
            "failed": len(failures),
            "recovered": recovered,
            "unrecovered_tools": [calls[i].name for i in unrecovered],
        }
        if unrecovered:
            names = ", ".join(sorted({calls[i].name for i in unrecovered}))
            explanation = f"{len(unrecovered)} of {len(failures)} failed tool calls never recovered ({names})"
        else:
            explanation = f"all {len(failures)} failed tool calls were recovered"
        return [self.scored(trace, recovered / len(failures), explanation, details)]
