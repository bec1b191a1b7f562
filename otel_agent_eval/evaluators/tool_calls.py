"""Deterministic tool-call evaluators: accuracy against expectations, failure recovery."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Any

from ..assembly.dialects.base import canonical_json
from ..model import AgentTrace, EvalResult, ToolCall
from .base import Evaluator
from .expectations import ExpectedCall, ToolExpectation, first_rule, load_expectations
from .view import Identity, run_view

_ABOUT_TOOL_CALLS = attrgetter("about_tool_calls")
_ABOUT_RECOVERY = attrgetter("about_recovery")
"""``first_rule``'s tests, as C calls (a lambda was a function object and a frame per run)."""

__all__ = ["ExpectedCall", "ToolCallAccuracy", "ToolExpectation", "ToolFailureRecovery", "load_expectations"]


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


def _matched_in_order(expected: Sequence[ExpectedCall], actual: Sequence[ToolCall], names: Sequence[str]) -> int:
    """Longest common subsequence of expected and actual calls (``names``: the actual calls' names).

    Bit-parallel (Allison and Dix 1986, in Hyyrö's form, 2004): bit j of ``rows`` stands for actual
    call j, and each expected call updates all of them in a few big-integer operations instead of
    one Python step per (expected, actual) pair; the LCS length is the number of zero bits left.
    """
    positions: dict[str, int] = {}  # name -> the bits of the calls of that name
    bit = 1
    for name in names:
        positions[name] = positions.get(name, 0) | bit
        bit <<= 1
    every = rows = bit - 1
    for exp in expected:
        if exp.arguments is None:  # what ``matches`` checks then, without a call per actual call
            hits = positions.get(exp.name, 0)
        else:
            hits = sum(1 << j for j, call in enumerate(actual) if exp.matches(call))
        matched = rows & hits
        rows = ((rows + matched) | (rows - matched)) & every
    return len(names) - rows.bit_count()


def tool_call_accuracy_score(
    expected: Sequence[ExpectedCall], actual: Sequence[ToolCall], require_order: bool, penalize_unexpected: bool,
    names: Sequence[str] | None = None,
) -> tuple[float, int, int]:
    """Return (score, matched, unexpected). See ToolCallAccuracy for the formulas. ``names``: the
    actual calls' names, when the caller has them."""
    if not expected:
        return (1.0 if not actual else 0.0), 0, len(actual)
    if require_order:
        matched = _matched_in_order(expected, actual, names if names is not None else [call.name for call in actual])
    else:
        matched = _matched_unordered(expected, actual)
    unexpected = len(actual) - matched
    if penalize_unexpected:
        return matched / (len(expected) + unexpected), matched, unexpected
    return matched / len(expected), matched, unexpected


class ToolCallAccuracy(Evaluator):
    """Did the agent make the expected tool calls? The label says whether the expectation was met.

    Score (partial credit, for dashboards):

    - no expectation (``None``): skipped; no LLM turn recorded: skipped (``no_steps``);
    - expected ``[]``: 1.0 only if no tool was called, else 0.0;
    - unordered: matched multiset / len(expected);
    - ``require_order``: longest common subsequence / len(expected);
    - ``penalize_unexpected``: matched / (len(expected) + unexpected calls), never above 1.0;
    - a forbidden tool called: 0.0, whatever the rest.

    Label: the default threshold 1.0 passes exactly when every expected call was
    made (in order under ``require_order``) and, under ``penalize_unexpected``, no
    other call was; a forbidden tool fails whatever the threshold. A lower
    threshold gives partial-credit passes back, on purpose.

    Expectations come from ``expected=`` (offline) or from rules matched by agent
    name and input (online): the first matching rule with expected or forbidden tools wins.
    """

    name = "tool_call_accuracy"
    version = "2"
    default_threshold = 1.0
    telemetry_free = True

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
                expected_tools=list(expected) if expected is not None else None,  # type: ignore[arg-type]
                require_order=require_order,
                penalize_unexpected=penalize_unexpected,
                forbidden_tools=list(forbidden_tools),
            )
        self.rules = list(rules)

    def rule_for(self, trace: AgentTrace) -> ToolExpectation | None:
        return first_rule(self.rules, trace, _ABOUT_TOOL_CALLS) or self.default_rule

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        rule = self.rule_for(trace)
        if rule is None:
            return [self.skipped(trace, f"no tool-call expectation for agent {trace.agent_name!r}", reason="no_expectation")]
        if not trace.steps:
            return [self.skipped(trace, "no LLM turn recorded: nothing to compare", reason="no_steps")]
        view = run_view(trace)
        names = view.names
        forbidden_tools, expected = rule.forbidden_tools, rule.expected_tools
        forbidden = sorted(set(names).intersection(forbidden_tools)) if forbidden_tools else []
        details: dict[str, Any]
        if expected is not None:
            require_order, penalize_unexpected = rule.require_order, rule.penalize_unexpected
            score, matched, unexpected = tool_call_accuracy_score(
                expected, view.calls, require_order, penalize_unexpected, names
            )
            details = {
                "actual": list(names),  # the result's own list, not the view's
                "expected": [e.name for e in expected], "matched": matched, "unexpected": unexpected,
                "require_order": require_order, "penalize_unexpected": penalize_unexpected,
            }
            explanation = f"{matched} of {len(expected)} expected tool calls made"
            if require_order and matched < len(expected):
                explanation += " in order"
            if unexpected:
                explanation += f", {unexpected} unexpected"
        else:
            score, explanation, details = 1.0, "no forbidden tool called", {"actual": list(names)}
        if forbidden:
            details["forbidden_called"] = forbidden
            return [self.scored(trace, 0.0, f"forbidden tool(s) called: {', '.join(forbidden)}", details, passed=False)]
        return [self.scored(trace, score, explanation, details)]


class ToolFailureRecovery(Evaluator):
    """Was every failed tool call recovered?

    A failed call (an executed one with an error, or one the framework refused to run) is
    recovered only by a later successful retry of that call (the
    same tool with the same identifying arguments) or a later successful call of a
    fallback tool the matching rule names (``fallback_tools: {"refund_order":
    ["refund_order_v2"]}``). An unrelated success does not recover it, and neither
    does the same tool called for something else. Identifying arguments: all of
    them, compared as canonical JSON, unless the rule names ``retry_keys`` for the
    tool (``{"book": ["item_id"]}``; ``"*"`` for any tool), so that a retry that
    corrects another argument counts.

    Score: recovered failures / failures (1.0 when no call failed); any
    unrecovered failure fails (threshold 1.0). No LLM turn recorded: skipped (``no_steps``).
    """

    name = "tool_failure_recovery"
    version = "2"
    default_threshold = 1.0
    telemetry_free = True

    def __init__(
        self,
        *,
        retry_keys: Mapping[str, Sequence[str]] | None = None,
        fallback_tools: Mapping[str, Sequence[str]] | None = None,
        rules: Sequence[ToolExpectation] = (),
        threshold: float | None = None,
    ) -> None:
        super().__init__(threshold)
        self.default_rule = ToolExpectation(
            retry_keys={k: list(v) for k, v in (retry_keys or {}).items()},
            fallback_tools={k: list(v) for k, v in (fallback_tools or {}).items()},
        )
        self.rules = list(rules)

    def rule_for(self, trace: AgentTrace) -> ToolExpectation:
        return first_rule(self.rules, trace, _ABOUT_RECOVERY) or self.default_rule

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        if not trace.steps:
            return [self.skipped(trace, "no LLM turn recorded: nothing to check", reason="no_steps")]
        view = run_view(trace)
        if not view.any_failed:
            return [self.scored(trace, 1.0, "no tool call failed", {"failed": 0})]
        rule = self.rule_for(trace)
        names, errors, calls = view.names, view.errors, view.calls
        # The calls that count: executed ones, and those the framework refused to run (input its
        # schema rejected: no tool span, an error), which failed too. Their identifying arguments:
        # all of them (``view.identities``), or the rule's retry keys.
        identities: list[Identity | None]  # compiled (mypyc), each item's type is checked as it is read
        if rule.retry_keys:
            retry_keys = rule.retry_keys
            identities = [
                call_identity(call, retry_keys) if error is not None or call.executed else None
                for call, error in zip(calls, errors)
            ]
        else:
            identities = view.identities  # type: ignore[assignment]  # list is invariant
        # One pass from the end: what succeeded later, by identity and by name; a call that neither
        # failed nor ran does not count.
        later_ids: set[Any] = set()
        later_names: set[str] = set()
        fallback_tools = rule.fallback_tools
        failures = 0
        unrecovered: list[str] = []
        for i in range(len(calls) - 1, -1, -1):
            if errors[i] is None:
                if calls[i].executed:
                    later_ids.add(identities[i])
                    later_names.add(names[i])
                continue
            failures += 1
            if identities[i] not in later_ids:
                fallbacks = fallback_tools.get(names[i])
                if not fallbacks or later_names.isdisjoint(fallbacks):
                    unrecovered.append(names[i])
        unrecovered.reverse()
        recovered = failures - len(unrecovered)
        details = {"failed": failures, "recovered": recovered, "unrecovered_tools": unrecovered}
        if unrecovered:
            explanation = (
                f"{len(unrecovered)} of {failures} failed tool calls never recovered by a retry or a named fallback "
                f"({', '.join(sorted(set(unrecovered)))})"
            )
        else:
            explanation = f"all {failures} failed tool calls were recovered"
        return [self.scored(trace, recovered / failures, explanation, details)]


def call_identity(call: ToolCall, retry_keys: Mapping[str, Sequence[str]]) -> tuple[str, str]:
    """(tool, canonical identifying arguments): all arguments, or the tool's ``retry_keys``."""
    keys = retry_keys.get(call.name, retry_keys.get("*"))
    if keys is None:
        return call.name, canonical_json(call.arguments)
    arguments = call.arguments
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            arguments = None
    if not isinstance(arguments, dict):
        arguments = {}
    return call.name, canonical_json({key: arguments.get(key) for key in keys})
