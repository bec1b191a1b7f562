"""Judge labels mean "the expectation was met" (issue 14): the judge rows of the issue's table, critical
questions, and ``unknown`` answers, each driven by the real ``openai`` client against the local fake
judge server answering per question id."""

from __future__ import annotations

from typing import Any

import pytest

from otel_agent_eval.evaluators.judge import (
    AgentMemoryEval,
    JudgeEvaluator,
    PlanQuality,
    PriorTurn,
    ResponseFacts,
    StepFaithfulness,
    TaskCompletion,
    ToolArgumentAccuracy,
    ToolCallNecessity,
    TrajectoryEfficiency,
)
from otel_agent_eval.evaluators.judge.render import render_trace
from otel_agent_eval.model import AgentStep, AgentTrace, ConversationTurn, ToolCall
from tests.evaluators.judge.test_judge_server import Judge, weather_trace
from tests.openai_server import FakeOpenAI, answer

# ``server``: the fake OpenAI server of tests/conftest.py, reset to answer every question "yes".


def as_expected(evaluator: JudgeEvaluator, trace: AgentTrace, **overrides: str) -> dict[str, str]:
    """Every question answered as expected (a good run), except ``overrides``."""
    s = evaluator.judge.settings
    view = render_trace(trace, max_chars=s.max_prompt_chars, max_field_chars=s.max_field_chars)
    return {**{q.id: q.expected for q in evaluator.questions(trace, view)}, **overrides}


def run(server: FakeOpenAI, evaluator: JudgeEvaluator, trace: AgentTrace, **answers: str) -> Any:
    server.script(answer(as_expected(evaluator, trace, **answers)))
    return evaluator.evaluate(trace)[0]


def client(server: FakeOpenAI) -> Any:
    return Judge(server, cache_size=0).client


# --- the table: each was a pass before -----------------------------------------------------


def test_task_not_completed_and_agent_failed_fails(server: FakeOpenAI) -> None:
    result = run(server, TaskCompletion(client(server)), weather_trace(), task_completed="no", agent_failed="yes")
    assert (result.score, result.label) == (0.5, "fail")  # was 0.5 pass
    assert result.details["critical_misses"] == ["task_completed", "agent_failed"]


def test_plan_with_illogical_order_and_redundant_steps_fails(server: FakeOpenAI) -> None:
    result = run(server, PlanQuality(client(server)), weather_trace(), logical_order="no", redundant_steps="yes")
    assert (result.score, result.label) == (pytest.approx(0.6), "fail")  # was 0.6 pass


def test_ignored_failure_and_disproportionate_trajectory_fails(server: FakeOpenAI) -> None:
    result = run(server, TrajectoryEfficiency(client(server)), weather_trace(), recovered_0_0="no", proportionate="no")
    assert (result.score, result.label) == (0.5, "fail")  # was 0.5 pass


def test_one_of_two_required_facts_missing_fails(server: FakeOpenAI) -> None:
    evaluator = ResponseFacts(client(server), facts=["it is 20C", "it is sunny"])
    result = run(server, evaluator, weather_trace(), fact_2="no")
    assert (result.score, result.label) == (0.5, "fail")  # was 0.5 pass
    assert result.details["critical_misses"] == ["fact_2"]


# --- critical questions: the label follows the expectation, the score keeps partial credit ---------


@pytest.mark.parametrize(("make", "trace", "answers"), [
    (TaskCompletion, weather_trace(), {"agent_failed": "yes"}),
    (TrajectoryEfficiency, weather_trace(), {"recovered_0_0": "no"}),  # an ignored failure, all else fine
    (StepFaithfulness, weather_trace(), {"step_2_contradicts": "yes"}),  # the answer contradicts a tool result
    (ToolArgumentAccuracy, weather_trace(steps=[AgentStep(index=0, tool_calls=[
        ToolCall(name="get_weather", arguments={"city": city}, result="20C") for city in ("Paris", "Lyon", "Nice")])]),
     {"call_0_2_conflicts": "yes"}),  # an argument contradicting the task, 5/6 otherwise
    (PlanQuality, weather_trace(), {"addresses_task": "no"}),
    (AgentMemoryEval, weather_trace(prior_turns=[ConversationTurn(trace_id="f" * 32, input="I live in Paris.", final_output="Noted.")]),
     {"contradicts_prior": "yes"}),
])
def test_one_critical_miss_fails_a_run_otherwise_above_threshold(server: FakeOpenAI, make: Any, trace: AgentTrace,
                                                                  answers: dict[str, str]) -> None:
    evaluator = make(client(server))
    result = run(server, evaluator, trace, **answers)
    assert result.score >= evaluator.threshold and result.label == "fail", result.explanation
    assert result.details["critical_misses"] == list(answers) and "critical: " in result.explanation


@pytest.mark.parametrize("make", [TaskCompletion, PlanQuality, StepFaithfulness, ToolArgumentAccuracy, ToolCallNecessity,
                                  TrajectoryEfficiency, AgentMemoryEval])
def test_a_run_answered_as_expected_passes_and_every_default_rejects_half(server: FakeOpenAI, make: Any) -> None:
    trace = weather_trace(prior_turns=[ConversationTurn(trace_id="f" * 32, input="I live in Paris.", final_output="Noted.")])
    evaluator = make(client(server))
    result = run(server, evaluator, trace)
    assert (result.score, result.label) == (1.0, "pass")
    assert 0.5 < evaluator.threshold <= 1.0 and evaluator.version == "2" and evaluator.PROMPT_VERSION.endswith(".v2")


def test_a_non_critical_miss_within_the_threshold_still_passes(server: FakeOpenAI) -> None:
    result = run(server, TaskCompletion(client(server)), weather_trace(), supported_by_steps="no")
    assert (result.score, result.label) == (0.75, "pass")
    result = run(server, TrajectoryEfficiency(client(server)), weather_trace(), detours="yes")
    assert (result.score, result.label) == (0.75, "pass")


def test_a_lowered_threshold_does_not_override_a_critical_miss(server: FakeOpenAI) -> None:
    result = run(server, TaskCompletion(client(server), threshold=0.1), weather_trace(), agent_failed="yes")
    assert result.label == "fail"


# --- unknown: not evidence either way -------------------------------------------------------------


def test_unknown_answers_are_left_out_of_the_score_and_reported(server: FakeOpenAI) -> None:
    result = run(server, TaskCompletion(client(server)), weather_trace(), supported_by_steps="unknown")
    assert (result.score, result.label) == (1.0, "pass") and result.details["unknown"] == ["supported_by_steps"]
    assert {a["id"]: a["answer"] for a in result.details["answers"]}["supported_by_steps"] == "unknown"
    assert "3/3 checks passed, 1 unknown" in result.explanation


@pytest.mark.parametrize("answers", [
    {"task_completed": "unknown", "agent_failed": "unknown"},  # every critical question
    {"task_completed": "unknown", "agent_failed": "unknown", "addresses_request": "unknown", "supported_by_steps": "unknown"},
])
def test_without_enough_evidence_the_run_is_skipped(server: FakeOpenAI, answers: dict[str, str]) -> None:
    result = run(server, TaskCompletion(client(server)), weather_trace(), **answers)
    assert (result.label, result.score, result.reason) == ("skipped", None, "insufficient_evidence")
    assert result.details["reason"] == "insufficient_evidence" and result.details["unknown"]
    assert result.explanation.startswith("not enough evidence")


def test_all_unknown_without_critical_questions_is_skipped(server: FakeOpenAI) -> None:
    evaluator = ToolCallNecessity(client(server))
    server.script(answer(default="unknown"))
    result = evaluator.evaluate(weather_trace())[0]
    assert (result.label, result.reason) == ("skipped", "insufficient_evidence")


def test_memory_with_no_relevant_earlier_turn_is_not_a_fail(server: FakeOpenAI) -> None:
    evaluator = AgentMemoryEval(client(server))
    turns = [PriorTurn("Tell me a joke.", "Why did the chicken...")]  # nothing relevant to the weather
    server.script(answer(as_expected(evaluator, weather_trace(), uses_prior="unknown")))
    result = evaluator.evaluate_with_history(weather_trace(), turns)[0]
    assert (result.score, result.label) == (1.0, "pass") and result.details["unknown"] == ["uses_prior"]


def test_the_judge_is_told_unknown_not_no_when_evidence_is_lacking(server: FakeOpenAI) -> None:
    run(server, TaskCompletion(client(server)), weather_trace())
    body = server.requests[-1]["body"]
    system = body["messages"][0]["content"]
    assert 'answer "no"' not in system and '"unknown"' in system
    item = body["response_format"]["json_schema"]["schema"]["properties"]["task_completed"]
    assert item["properties"]["answer"]["enum"] == ["yes", "no", "unknown"]


# --- the unsound questions, fixed ---------------------------------------------------------------


def test_step_faithfulness_asks_one_condition_per_question_and_answers_the_first_step(server: FakeOpenAI) -> None:
    trace = weather_trace()
    evaluator = StepFaithfulness(client(server))
    s = evaluator.judge.settings
    questions = evaluator.questions(trace, render_trace(trace, max_chars=s.max_prompt_chars, max_field_chars=s.max_field_chars))
    first = {q.id: q for q in questions if q.id.startswith("step_0_")}
    assert set(first) == {"step_0_follows", "step_0_contradicts", "step_0_invents"}
    assert "first step" in first["step_0_follows"].text
    assert [q.id for q in questions if q.critical] == ["step_0_contradicts", "step_1_contradicts", "step_2_contradicts"]
    plan = PlanQuality(client(server)).questions(trace, render_trace(trace, max_chars=s.max_prompt_chars, max_field_chars=s.max_field_chars))
    assert "first step" in {q.id: q.text for q in plan}["steps_follow"]


def test_step_faithfulness_asks_at_most_40_questions_whole_steps_only(server: FakeOpenAI) -> None:
    trace = AgentTrace(trace_id="d" * 32, input="task", final_output="done",
                       steps=[AgentStep(index=i, tool_calls=[ToolCall(name="t", arguments={"i": i}, result="r")]) for i in range(20)])
    run(server, StepFaithfulness(client(server)), trace)
    asked = list(server.requests[-1]["body"]["response_format"]["json_schema"]["schema"]["properties"])
    assert len(asked) <= 40 and len(asked) % 3 == 0
