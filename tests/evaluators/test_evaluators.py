"""The deterministic evaluators' formulas, on hand-built AgentTraces."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from typing import Any

import pytest

from otel_agent_eval import (
    AgentStep,
    AgentTrace,
    ToolCall,
    ToolCallAccuracy,
    ToolExpectation,
)
from otel_agent_eval.assembly.dialects.base import canonical_json
from otel_agent_eval.evaluators import LoopDetection, StepBudget, ToolFailureRecovery


def trace(*calls: ToolCall | str, agent: str = "a", task: str = "task", steps: int | None = None) -> AgentTrace:
    tool_calls = [ToolCall(name=c) if isinstance(c, str) else c for c in calls]
    step_list = [AgentStep(index=i, tool_calls=[call]) for i, call in enumerate(tool_calls)]
    step_list.append(AgentStep(index=len(step_list), output="done"))  # the final answer
    if steps is not None:
        step_list = [AgentStep(index=i) for i in range(steps)]
    return AgentTrace(trace_id="0" * 31 + "1", agent_span_id="0" * 15 + "2", agent_name=agent, input=task, steps=step_list)


def score(evaluator: ToolCallAccuracy, t: AgentTrace) -> float | None:
    (result,) = evaluator.evaluate(t)
    return result.score


def test_no_expectation_is_skipped_not_pass_or_fail() -> None:
    (result,) = ToolCallAccuracy().evaluate(trace("x"))
    assert result.label == "skipped" and result.score is None


def test_empty_expectation_scores_one_only_without_calls() -> None:
    assert score(ToolCallAccuracy(expected=[]), trace()) == 1.0
    assert score(ToolCallAccuracy(expected=[]), trace("x")) == 0.0


def test_unordered_is_matched_multiset_over_expected() -> None:
    ev = ToolCallAccuracy(expected=["a", "b", "b"])
    assert score(ev, trace("b", "a")) == pytest.approx(2 / 3)
    assert score(ev, trace("b", "b", "a", "c")) == 1.0  # extra calls do not count without penalize_unexpected


def test_require_order_uses_longest_common_subsequence() -> None:
    ev = ToolCallAccuracy(expected=["a", "b", "c"], require_order=True)
    assert score(ev, trace("a", "b", "c")) == 1.0
    assert score(ev, trace("c", "a", "b")) == pytest.approx(2 / 3)
    assert score(ev, trace("c", "b", "a")) == pytest.approx(1 / 3)


def test_penalize_unexpected_never_exceeds_one() -> None:
    ev = ToolCallAccuracy(expected=["a", "b"], penalize_unexpected=True)
    assert score(ev, trace("a", "b")) == 1.0
    assert score(ev, trace("a", "b", "c")) == pytest.approx(2 / 3)
    assert score(ev, trace("a", "x", "y")) == pytest.approx(1 / 4)


def test_expected_arguments_must_match_exactly_when_given() -> None:
    ev = ToolCallAccuracy(expected=[{"name": "get", "arguments": {"city": "Paris"}}])
    assert score(ev, trace(ToolCall(name="get", arguments={"city": "Paris"}))) == 1.0
    assert score(ev, trace(ToolCall(name="get", arguments='{"city": "Paris"}'))) == 1.0  # JSON text is canonicalised
    assert score(ev, trace(ToolCall(name="get", arguments={"city": "Rome"}))) == 0.0


def test_forbidden_tool_scores_zero() -> None:
    ev = ToolCallAccuracy(expected=["a"], forbidden_tools=["rm"])
    (result,) = ev.evaluate(trace("a", "rm"))
    assert (result.score, result.label, result.details["forbidden_called"]) == (0.0, "fail", ["rm"])


def test_rules_match_by_agent_and_input_first_rule_wins() -> None:
    rules = [
        ToolExpectation(agent="support", input_pattern="refund", expected_tools=["lookup", "refund"]),
        ToolExpectation(agent="support", expected_tools=["lookup"]),
    ]
    ev = ToolCallAccuracy(rules=rules)
    assert score(ev, trace("lookup", agent="support", task="please refund 1")) == 0.5
    assert score(ev, trace("lookup", agent="support", task="where is my order")) == 1.0
    (other,) = ev.evaluate(trace("lookup", agent="weather"))
    assert other.label == "skipped"


def test_threshold_decides_label() -> None:
    ev = ToolCallAccuracy(expected=["a", "b"], threshold=0.75)
    (result,) = ev.evaluate(trace("a"))
    assert (result.score, result.label, result.details["threshold"]) == (0.5, "fail", 0.75)
    (lowered,) = ToolCallAccuracy(expected=["a", "b"], threshold=0.5).evaluate(trace("a"))
    assert (lowered.score, lowered.label) == (0.5, "pass")  # a lowered threshold gives partial credit back


def test_result_ids_are_stable_and_distinct_per_evaluator() -> None:
    t = trace("a")
    first = ToolCallAccuracy(expected=["a"]).evaluate(t)[0].result_id
    assert first == ToolCallAccuracy(expected=["a"]).evaluate(t)[0].result_id
    assert first != LoopDetection().evaluate(t)[0].result_id


def test_failure_recovered_by_later_success() -> None:
    t = trace(ToolCall(name="fetch", error="403"), ToolCall(name="fetch", result="ok"))
    (result,) = ToolFailureRecovery().evaluate(t)
    assert (result.score, result.label) == (1.0, "pass")


def test_unrecovered_failure_fails() -> None:
    t = trace(ToolCall(name="search", result="r"), ToolCall(name="fetch", error="403"))
    (result,) = ToolFailureRecovery().evaluate(t)
    assert (result.score, result.label, result.details["unrecovered_tools"]) == (0.0, "fail", ["fetch"])


def test_requested_but_not_executed_calls_are_not_failures() -> None:
    t = trace(ToolCall(name="fetch", executed=False))
    (result,) = ToolFailureRecovery().evaluate(t)
    assert result.label == "pass"


def test_a_call_the_framework_refused_to_run_is_a_failure() -> None:
    refused = ToolCall(name="book", arguments={"restaurant": "X"}, error="Invalid input for tool book", executed=False)
    for later, label in (((), "fail"), ((ToolCall(name="book", arguments={"restaurant": "X"}, result="booked"),), "pass")):
        (result,) = ToolFailureRecovery().evaluate(trace(refused, *later))
        assert result.label == label


def test_loop_detection_counts_identical_arguments_only() -> None:
    same = [ToolCall(name="s", arguments={"q": "x"}) for _ in range(3)]
    (looping,) = LoopDetection(threshold_calls=3).evaluate(trace(*same))
    assert (looping.score, looping.label) == (0.0, "fail")
    varied = [ToolCall(name="s", arguments={"q": q}) for q in "xyz"]
    (fine,) = LoopDetection(threshold_calls=3).evaluate(trace(*varied))
    assert fine.label == "pass"


def canonical_loops(t: AgentTrace, threshold_calls: int) -> dict[str, int]:
    """The documented counting: calls are the same when their name and canonical JSON arguments are."""
    counts = Counter((call.name, canonical_json(call.arguments)) for call in t.tool_calls)
    return {f"{name}({args})": n for (name, args), n in counts.items() if n >= threshold_calls}


def test_loop_detection_counts_calls_as_canonical_json_does() -> None:
    """Whatever the arguments (dicts of scalars it counts by identity, JSON text, lists, NaN, -0.0, bools
    against numbers), the repeated calls, their order and the label are those of canonical JSON."""
    values: list[Any] = [
        {"a": 1}, {"a": True}, {"a": 1.0}, {"a": "1"}, {"a": None}, {"a": 0}, {"a": False}, {"b": 1, "a": 2},
        {"a": 2, "b": 1}, '{"a": 1}', '{"a":2,"b":1}', "not json", {"a": [1]}, {"a": {"b": 1}}, None, [1], {1: "x"},
        {"1": "x"}, {"a": float("nan")}, {"a": -0.0}, {"a": 0.0}, 1, "1", True,
    ]
    rng = random.Random(3)
    evaluators = [LoopDetection(threshold_calls=2), LoopDetection(threshold_calls=3)]
    cases = [list(pair) * 2 for pair in itertools.combinations_with_replacement(values, 2)]
    cases += [[rng.choice(values) for _ in range(rng.randint(0, 9))] for _ in range(400)]
    for arguments in cases:
        calls = [ToolCall(name=rng.choice("xy") if len(arguments) > 6 else "x", arguments=a) for a in arguments]
        t = AgentTrace(trace_id="t", steps=[AgentStep(index=0, tool_calls=calls)])
        for evaluator in evaluators:
            (result,) = evaluator.evaluate(t)
            expected = canonical_loops(t, evaluator.threshold_calls)
            assert result.details.get("repeated_calls", {}) == expected, arguments
            assert list(result.details.get("repeated_calls", {})) == list(expected), arguments
            assert result.label == ("fail" if expected else "pass")


def test_step_budget() -> None:
    (within,) = StepBudget(max_steps=4).evaluate(trace(steps=4))
    (over,) = StepBudget(max_steps=4).evaluate(trace(steps=8))
    (empty,) = StepBudget(max_steps=4).evaluate(trace(steps=0))
    assert (within.label, over.label, over.score, empty.label) == ("pass", "fail", 0.5, "skipped")
