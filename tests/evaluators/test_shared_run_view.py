"""The evaluators of one run share one view of it (``evaluators/view.py``), and what they compute from it
is what the documented definitions say: identities are canonical JSON's, LCS is the textbook one."""

from __future__ import annotations

import random
from typing import Any

from otel_agent_eval import (
    AgentStep,
    AgentTrace,
    EvalResult,
    Evaluator,
    ToolCall,
    ToolExpectation,
)
from otel_agent_eval.assembly.dialects.base import canonical_json
from otel_agent_eval.evaluators import ToolFailureRecovery
from otel_agent_eval.evaluators.base import evaluate_run, safe_evaluate
from otel_agent_eval.evaluators.expectations import ExpectedCall
from otel_agent_eval.evaluators.tool_calls import _matched_in_order, call_identity
from otel_agent_eval.evaluators.view import RunView, call_identities, run_view

VALUES: list[Any] = [
    {"a": 1}, {"a": True}, {"a": 1.0}, {"a": "1"}, {"a": None}, {"a": 0}, {"a": False}, {"b": 1, "a": 2},
    {"a": 2, "b": 1}, '{"a": 1}', '{"a":2,"b":1}', "not json", {"a": [1]}, {"a": {"b": 1}}, None, [1], {1: "x"},
    {"1": "x"}, {"a": float("nan")}, {"a": -0.0}, {"a": 0.0}, 1, "1", True, {}, "{}", "null", {"a": "null"},
]
SCALAR_DICTS_OR_NONE: list[Any] = [*VALUES[:9], {}, {"a": "null"}, None]
"""Arguments of runs whose identities take ``scalar_identities``'s path (no canonical JSON)."""


def run_of(calls: list[ToolCall]) -> AgentTrace:
    return AgentTrace(trace_id="t", agent_span_id="s", agent_name="a", steps=[AgentStep(index=0, tool_calls=calls)])


class Peek(Evaluator):
    """Records the view it was given and the identities it read."""

    name = "peek"

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[RunView, object]] = []

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        view = run_view(trace)
        self.seen.append((view, view.identities))
        return [self.scored(trace, 1.0, "seen")]


def test_one_view_per_run_shared_by_its_evaluators_and_dropped_after() -> None:
    run = run_of([ToolCall(name="x", arguments={"q": 1})])
    first, second = Peek(), Peek()
    evaluate_run([first, second], run)
    (view, identities), = first.seen
    assert second.seen == [(view, identities)] and second.seen[0][1] is identities  # computed once
    assert run_view(run) is not view  # outside a run's evaluation: a fresh view each time
    evaluate_run([first], run)
    assert first.seen[1][0] is not view  # the next evaluation of the run has a view of its own
    safe_evaluate(first, run)
    safe_evaluate(second, run)
    assert first.seen[2][0] is not second.seen[1][0]


class Nested(Evaluator):
    """Evaluates a child run inside its own evaluation, then reads its run's view again."""

    name = "nested"

    def __init__(self, child: AgentTrace) -> None:
        super().__init__()
        self.child, self.peek = child, Peek()

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        before = run_view(trace)
        evaluate_run([self.peek], self.child)
        assert self.peek.seen[0][0].trace is self.child
        assert run_view(trace) is before
        return [self.scored(trace, 1.0, "nested")]


def test_a_nested_evaluation_gets_its_own_view_and_gives_the_outer_one_back() -> None:
    (result,) = evaluate_run([Nested(run_of([ToolCall(name="c")]))], run_of([ToolCall(name="p")]))
    assert result.label == "pass", result.explanation


def test_identities_are_equal_exactly_when_names_and_canonical_json_are() -> None:
    rng = random.Random(7)
    cases = [[a, b] for a in VALUES for b in VALUES]  # every pair, all dicts of scalars or not
    cases += [[rng.choice(VALUES[:9]) for _ in range(rng.randint(0, 8))] for _ in range(300)]
    cases += [[rng.choice(SCALAR_DICTS_OR_NONE) for _ in range(rng.randint(0, 8))] for _ in range(300)]
    cases += [[rng.choice(VALUES) for _ in range(rng.randint(0, 8))] for _ in range(300)]
    for arguments in cases:
        names = [rng.choice("xy") for _ in arguments]
        identities = call_identities(names, arguments)
        texts = [(name, canonical_json(value)) for name, value in zip(names, arguments)]
        for i in range(len(arguments)):
            for j in range(len(arguments)):
                assert (identities[i] == identities[j]) == (texts[i] == texts[j]), (arguments[i], arguments[j])


def reference_lcs(expected: list[ExpectedCall], calls: list[ToolCall]) -> int:
    previous = [0] * (len(calls) + 1)
    for exp in expected:
        current = [0] * (len(calls) + 1)
        for j, call in enumerate(calls):
            current[j + 1] = previous[j] + 1 if exp.matches(call) else max(previous[j + 1], current[j])
        previous = current
    return previous[-1]


def test_in_order_matching_is_the_longest_common_subsequence() -> None:
    rng = random.Random(11)
    for _ in range(2000):
        calls = [ToolCall(name=rng.choice("abcde"), arguments=rng.choice([{"q": 1}, {"q": 2}, None]))
                 for _ in range(rng.randint(0, 14))]
        expected = [ExpectedCall(name=rng.choice("abcd"), arguments=rng.choice([None, None, {"q": 1}]))
                    for _ in range(rng.randint(0, 6))]
        assert _matched_in_order(expected, calls, [c.name for c in calls]) == reference_lcs(expected, calls)


def reference_recovery(trace: AgentTrace, rule: ToolExpectation) -> tuple[int, list[str]]:
    """The documented rule, call by call: a failure is recovered by a later success of the same call
    (canonical JSON of its identifying arguments) or of a named fallback."""
    calls = [c for c in trace.tool_calls if c.executed or c.failed]
    unrecovered = []
    for i, call in enumerate(calls):
        if not call.failed:
            continue
        later = [c for c in calls[i + 1:] if not c.failed]
        same = any(call_identity(c, rule.retry_keys) == call_identity(call, rule.retry_keys) for c in later)
        fallback = any(c.name in rule.fallback_tools.get(call.name, ()) for c in later)
        if not (same or fallback):
            unrecovered.append(call.name)
    return sum(c.failed for c in calls), unrecovered


def test_failure_recovery_is_the_documented_rule() -> None:
    rng = random.Random(5)
    rules = [ToolExpectation(), ToolExpectation(retry_keys={"x": ["a"]}), ToolExpectation(fallback_tools={"x": ["y"]})]
    for _ in range(600):
        values = VALUES[:12] if rng.random() < 0.5 else SCALAR_DICTS_OR_NONE
        calls = [ToolCall(name=rng.choice("xyz"), arguments=rng.choice(values), error=rng.choice([None, None, "boom"]),
                          executed=rng.random() < 0.8) for _ in range(rng.randint(1, 8))]
        rule = rng.choice(rules)
        run = run_of(calls)
        evaluator = ToolFailureRecovery(retry_keys=rule.retry_keys, fallback_tools=rule.fallback_tools)
        (result,) = evaluate_run([evaluator], run)
        failed, unrecovered = reference_recovery(run, rule)
        assert result.details.get("failed", 0) == failed
        assert result.details.get("unrecovered_tools", []) == unrecovered
