"""A label means the expectation was met (issue 14): the deterministic rows, recovery, thresholds.

Partial credit stays in the score; pass/fail says whether the agent did what was expected.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_agent_eval import AgentStep, AgentTrace, ConfigError, Settings, ToolCall, ToolCallAccuracy, ToolExpectation
from otel_agent_eval.evaluators import ToolFailureRecovery, build_evaluators

README_RULE = ToolExpectation(  # the README's own rule
    agent="support-agent", input_pattern="refund", expected_tools=["lookup_order", "refund_order"],
    require_order=True, forbidden_tools=["delete_account"],
)


def run(*calls: ToolCall | str, agent: str = "support-agent", task: str = "refund order 42", answer: bool = True) -> AgentTrace:
    """One step per call, then (``answer``) a final answer: a run with recorded LLM turns."""
    tool_calls = [ToolCall(name=c) if isinstance(c, str) else c for c in calls]
    steps = [AgentStep(index=i, tool_calls=[call]) for i, call in enumerate(tool_calls)]
    if answer:
        steps.append(AgentStep(index=len(steps), output="done"))
    return AgentTrace(trace_id="0" * 31 + "1", agent_span_id="0" * 15 + "2", agent_name=agent, input=task, steps=steps)


def one(evaluator, trace: AgentTrace):  # type: ignore[no-untyped-def]
    (result,) = evaluator.evaluate(trace)
    return result


# --- the deterministic rows ---------------------------------------------------------------


@pytest.mark.parametrize(("calls", "score"), [
    (["refund_order", "lookup_order"], 0.5),  # reverse order
    (["refund_order"], 0.5),  # only refund_order
])
def test_readme_rule_partial_runs_fail_with_partial_credit(calls: list[str], score: float) -> None:
    result = one(ToolCallAccuracy(rules=[README_RULE]), run(*calls))
    assert (result.label, result.score) == ("fail", score)


def test_readme_rule_met_passes() -> None:
    result = one(ToolCallAccuracy(rules=[README_RULE]), run("lookup_order", "refund_order"))
    assert (result.label, result.score) == ("pass", 1.0)


def test_one_of_two_expected_calls_fails() -> None:
    result = one(ToolCallAccuracy(expected=["search_web", "visit_website"]), run("search_web"))
    assert (result.label, result.score, result.details["matched"]) == ("fail", 0.5, 1)


def test_unrelated_success_does_not_recover_a_failure() -> None:
    trace = run(ToolCall(name="refund_order", arguments={"order": 42}, error="503"),
                ToolCall(name="send_email", arguments={"to": "a@b.c"}, result="sent"))
    result = one(ToolFailureRecovery(), trace)
    assert (result.label, result.score, result.details["unrecovered_tools"]) == ("fail", 0.0, ["refund_order"])


# --- recovery: a retry of that call, or a named fallback -----------------------------------------


def test_same_tool_for_something_else_does_not_recover() -> None:
    trace = run(ToolCall(name="book", arguments={"item_id": "AF276"}, error="sold out"),
                ToolCall(name="book", arguments={"item_id": "hotel-gracery"}, result="ok"))
    assert one(ToolFailureRecovery(), trace).label == "fail"


def test_retry_with_the_same_arguments_recovers_whatever_their_order_or_encoding() -> None:
    trace = run(ToolCall(name="book", arguments={"item_id": "AF276", "seats": 1}, error="timeout"),
                ToolCall(name="book", arguments='{"seats": 1, "item_id": "AF276"}', result="ok"))
    result = one(ToolFailureRecovery(), trace)
    assert (result.label, result.score, result.details["recovered"]) == ("pass", 1.0, 1)


def test_a_retry_before_the_failure_does_not_recover_it() -> None:
    trace = run(ToolCall(name="book", arguments={"item_id": "AF276"}, result="ok"),
                ToolCall(name="book", arguments={"item_id": "AF276"}, error="timeout"))
    assert one(ToolFailureRecovery(), trace).label == "fail"


def test_a_corrected_argument_counts_as_a_retry_only_with_retry_keys() -> None:
    trace = run(ToolCall(name="book", arguments={"item_id": "AF276", "date": "2025-13-01"}, error="bad date"),
                ToolCall(name="book", arguments={"item_id": "AF276", "date": "2025-12-01"}, result="ok"))
    assert one(ToolFailureRecovery(), trace).label == "fail"  # the default: all arguments identify the call
    rule = ToolExpectation(agent="support-agent", retry_keys={"book": ["item_id"]})
    assert one(ToolFailureRecovery(rules=[rule]), trace).label == "pass"
    assert one(ToolFailureRecovery(retry_keys={"*": ["item_id"]}), trace).label == "pass"
    other = run(ToolCall(name="book", arguments={"item_id": "AF276"}, error="x"),
                ToolCall(name="book", arguments={"item_id": "hotel-gracery"}, result="ok"))
    assert one(ToolFailureRecovery(rules=[rule]), other).label == "fail"


def test_a_named_fallback_recovers_an_unnamed_one_does_not() -> None:
    trace = run(ToolCall(name="refund_order", arguments={"order": 42}, error="503"),
                ToolCall(name="refund_order_v2", arguments={"order_id": 42}, result="ok"))
    assert one(ToolFailureRecovery(), trace).label == "fail"
    rule = ToolExpectation(agent="*", fallback_tools={"refund_order": ["refund_order_v2"]})
    result = one(ToolFailureRecovery(rules=[rule]), trace)
    assert (result.label, result.score) == ("pass", 1.0)
    failed_fallback = run(ToolCall(name="refund_order", error="503"), ToolCall(name="refund_order_v2", error="503"))
    assert one(ToolFailureRecovery(rules=[rule]), failed_fallback).details["unrecovered_tools"] == [
        "refund_order", "refund_order_v2"]


def test_recovery_score_keeps_partial_credit() -> None:
    trace = run(ToolCall(name="a", error="x"), ToolCall(name="a", result="ok"), ToolCall(name="b", error="y"))
    result = one(ToolFailureRecovery(), trace)
    assert (result.label, result.score, result.details["recovered"]) == ("fail", 0.5, 1)


# --- nothing observable vs nothing done ------------------------------------------------------------


def test_no_llm_turn_is_skipped_no_steps() -> None:
    empty = run(answer=False)
    for evaluator in (ToolCallAccuracy(rules=[README_RULE]), ToolFailureRecovery()):
        result = one(evaluator, empty)
        assert (result.label, result.reason, result.score) == ("skipped", "no_steps", None)


def test_turns_without_any_expected_call_fail() -> None:
    result = one(ToolCallAccuracy(rules=[README_RULE]), run())
    assert (result.label, result.score) == ("fail", 0.0)


def test_forbidden_tool_fails_whatever_the_threshold() -> None:
    result = one(ToolCallAccuracy(rules=[README_RULE], threshold=0.0), run("lookup_order", "refund_order", "delete_account"))
    assert (result.label, result.score) == ("fail", 0.0)


def test_unexpected_calls_fail_only_under_penalize_unexpected() -> None:
    trace = run("a", "b", "c")
    assert one(ToolCallAccuracy(expected=["a", "b"]), trace).label == "pass"
    penalized = one(ToolCallAccuracy(expected=["a", "b"], penalize_unexpected=True), trace)
    assert (penalized.label, penalized.score) == ("fail", pytest.approx(2 / 3))


def test_versions_bumped_so_result_ids_change() -> None:
    assert (ToolCallAccuracy.version, ToolFailureRecovery.version) == ("2", "2")


# --- properties ------------------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "c", "d", "e"])
ARGS = st.one_of(st.none(), st.dictionaries(st.sampled_from(["x", "y"]), st.integers(0, 2), max_size=2))
EXPECTED = st.lists(st.tuples(NAMES, st.booleans(), ARGS), min_size=1, max_size=5)


@st.composite
def expectation_and_meeting_run(draw: st.DrawFn) -> tuple[ToolExpectation, list[ToolCall]]:
    """A rule and a run that meets it: its expected calls (in order, with their arguments when
    named), plus, unless unexpected calls are penalized, other calls anywhere."""
    expected = draw(EXPECTED)
    require_order = draw(st.booleans())
    penalize = draw(st.booleans())
    calls = [ToolCall(name=name, arguments=args) for name, _, args in expected]
    if not require_order:
        calls = draw(st.permutations(calls))
    if not penalize:
        for extra in draw(st.lists(st.tuples(NAMES, ARGS), max_size=3)):
            calls.insert(draw(st.integers(0, len(calls))), ToolCall(name=extra[0], arguments=extra[1]))
    rule = ToolExpectation(
        expected_tools=[{"name": name, "arguments": args} if named else name for name, named, args in expected],
        require_order=require_order, penalize_unexpected=penalize, forbidden_tools=["forbidden"],
    )
    return rule, calls


@settings(max_examples=300, deadline=None)
@given(expectation_and_meeting_run())
def test_a_run_that_meets_its_expectation_always_passes(case: tuple[ToolExpectation, list[ToolCall]]) -> None:
    rule, calls = case
    result = one(ToolCallAccuracy(rules=[rule]), run(*calls, agent="x", task="t"))
    assert (result.label, result.score) == ("pass", 1.0), result.explanation


@settings(max_examples=300, deadline=None)
@given(expectation_and_meeting_run(), st.data())
def test_removing_any_expected_call_always_fails(case: tuple[ToolExpectation, list[ToolCall]], data: st.DataObject) -> None:
    rule, calls = case
    assert rule.expected_tools is not None
    target = data.draw(st.sampled_from(rule.expected_tools))
    # Remove every call that could stand for it, so that no other call meets that expectation.
    remaining = [call for call in calls if not target.matches(call)]
    result = one(ToolCallAccuracy(rules=[rule]), run(*remaining, agent="x", task="t"))
    assert result.label == "fail" and result.score < 1.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(NAMES, ARGS, st.booleans()), min_size=1, max_size=8))
def test_recovery_passes_exactly_when_every_failure_is_retried_later(calls: list[tuple[str, object, bool]]) -> None:
    tool_calls = [ToolCall(name=n, arguments=a, error="boom" if failed else None, result=None if failed else "ok")
                  for n, a, failed in calls]
    expected = all(
        any(not later.failed and later.name == call.name and later.arguments == call.arguments for later in tool_calls[i + 1:])
        for i, call in enumerate(tool_calls) if call.failed
    )
    result = one(ToolFailureRecovery(), run(*tool_calls))
    assert (result.label == "pass") == expected


# --- thresholds are configuration ------------------------------------------------------------------


def test_threshold_precedence_rule_then_constructor_then_env_then_default(tmp_path: Path) -> None:
    partial = run("lookup_order", agent="support-agent", task="refund please")  # score 0.5
    expectations = tmp_path / "expectations.json"
    expectations.write_text(json.dumps([
        {"agent": "support-agent", "input_pattern": "refund", "expected_tools": ["lookup_order", "refund_order"],
         "thresholds": {"tool_call_accuracy": 0.5}},
        {"agent": "*", "expected_tools": ["lookup_order", "refund_order"]},
    ]))
    env = {"OTEL_AGENT_EVAL_THRESHOLDS": "tool_call_accuracy=0.4", "OTEL_AGENT_EVAL_EXPECTATIONS_FILE": str(expectations)}
    settings_ = Settings.load(env, evaluators="tool_call_accuracy")
    other = run("lookup_order", agent="support-agent", task="where is my order")  # the second rule

    def label(trace: AgentTrace, **kwargs: float) -> tuple[str, float]:
        (evaluator,) = build_evaluators(settings_, thresholds=kwargs or None)
        result = one(evaluator, trace)
        return result.label, result.details["threshold"]

    assert label(other) == ("pass", 0.4)  # env over default
    assert label(other, tool_call_accuracy=0.9) == ("fail", 0.9)  # constructor / CLI over env
    assert label(partial, tool_call_accuracy=0.9) == ("pass", 0.5)  # the matching rule over everything
    assert one(build_evaluators(Settings.load({}, evaluators="tool_call_accuracy", expectations_file=str(expectations)))[0],
               other).details["threshold"] == 1.0  # the default


@pytest.mark.parametrize(("value", "message"), [
    ("nope=0.5", "unknown evaluator 'nope'"),
    ("tool_call_accuracy=2", "outside [0, 1]"),
    ("plan_quality=high", "not a number"),
    ("tool_call_accuracy", "EVALUATOR=VALUE"),
])
def test_thresholds_variable_fails_fast_naming_it(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match="OTEL_AGENT_EVAL_THRESHOLDS") as caught:
        Settings.load({"OTEL_AGENT_EVAL_THRESHOLDS": value})
    assert message in str(caught.value)


def test_thresholds_variable_accepts_judge_evaluators_and_json() -> None:
    assert Settings.load({"OTEL_AGENT_EVAL_THRESHOLDS": "tool_call_accuracy=1.0, plan_quality=0.8"}).thresholds == {
        "tool_call_accuracy": 1.0, "plan_quality": 0.8}
    assert Settings.load({"OTEL_AGENT_EVAL_THRESHOLDS": '{"step_budget": 0.5}'}).thresholds == {"step_budget": 0.5}


def test_rule_thresholds_are_checked() -> None:
    with pytest.raises(ValueError, match="outside"):
        ToolExpectation(thresholds={"tool_call_accuracy": 1.5})
