"""Judge evaluators with the real ``openai`` client against a local fake OpenAI server (127.0.0.1 only)."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from otel_agent_eval.evaluators.judge import (
    AgentMemoryEval,
    JudgeClient,
    JudgeMetrics,
    JudgeSettings,
    PlanQuality,
    PriorTurn,
    ResponseFacts,
    StepFaithfulness,
    TaskCompletion,
    ToolArgumentAccuracy,
    ToolCallNecessity,
    TrajectoryEfficiency,
    build_judge_evaluators,
)
from otel_agent_eval.model import AgentStep, AgentTrace, ToolCall
from tests.openai_server import Behaviour, FakeOpenAI, answer, empty, raw, refusal, slow, status

# ``server``: the fake OpenAI server of tests/conftest.py, reset to answer every question "yes".


class Judge:
    """A JudgeClient on the fake server, its registry, and the waits it slept."""

    def __init__(self, server: FakeOpenAI, http_client: Any = None, **overrides: Any) -> None:
        settings = {"model": "judge-1", "base_url": server.base_url, "api_key": "sk-test", "backoff_seconds": 0.01, **overrides}
        self.settings = JudgeSettings.load(env={}, **settings)
        self.registry = CollectorRegistry()
        self.waits: list[float] = []
        self.client = JudgeClient(self.settings, metrics=JudgeMetrics(self.registry), http_client=http_client, sleep=self._sleep)

    def _sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        time.sleep(seconds)

    def sample(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)


def weather_trace(**changes: Any) -> AgentTrace:
    base: dict[str, Any] = dict(
        trace_id="a" * 32, agent_span_id="b" * 16, agent_name="weather", conversation_id="conv-1",
        input="What is the weather in Paris? Reply to bob@example.com",
        final_output="It is 20C and sunny in Paris.",
        steps=[
            AgentStep(index=0, thought="I need the weather.", tool_calls=[
                ToolCall(name="get_weather", arguments={"city": "Paris"}, error="ServiceUnavailable: upstream 503"),
            ]),
            AgentStep(index=1, thought="Retry once.", tool_calls=[
                ToolCall(name="get_weather", arguments={"city": "Paris"}, result={"temp_c": 20, "sky": "sunny", "note": "error budget ok"}),
            ]),
            AgentStep(index=2, output="It is 20C and sunny in Paris."),
        ],
    )
    base.update(changes)
    return AgentTrace(**base)


def ids_asked(server: FakeOpenAI, n: int = -1) -> list[str]:
    return list(server.requests[n]["body"]["response_format"]["json_schema"]["schema"]["properties"])


# --- scores -----------------------------------------------------------------------------------------


def test_task_completion_scores_with_the_negated_check(server: FakeOpenAI) -> None:
    judge = Judge(server)
    server.script(answer({"agent_failed": "no"}), answer({"agent_failed": "yes", "task_completed": "no"}))
    good = TaskCompletion(judge.client).evaluate(weather_trace())[0]
    bad = TaskCompletion(judge.client).evaluate(weather_trace(final_output="Sorry, I could not get it."))[0]
    assert (good.score, good.label) == (1.0, "pass")
    assert (bad.score, bad.label) == (0.5, "fail") and "critical: task_completed, agent_failed" in bad.explanation
    body = server.requests[0]["body"]
    assert body["model"] == "judge-1" and body["response_format"]["json_schema"]["strict"] is True
    assert good.details["prompt_version"] == "task_completion.v2" and good.details["judge_model"] == "judge-1"
    assert good.details["judge_view"]["steps_shown"] == [0, 1, 2]
    assert {a["id"]: a["answer"] for a in good.details["answers"]}["agent_failed"] == "no"
    assert good.details["judge"]["input_tokens"] > 0 and good.details["judge"]["attempts"] == 1


def test_all_questions_go_in_one_call_per_evaluator(server: FakeOpenAI) -> None:
    judge = Judge(server)
    trace = weather_trace()
    for cls, expected_ids in [
        (PlanQuality, ["addresses_task", "logical_order", "redundant_steps", "steps_follow", "expert_efficient"]),
        (StepFaithfulness, [f"step_{n}_{part}" for n in range(3) for part in ("follows", "contradicts", "invents")]),
        (ToolCallNecessity, ["call_0_0", "call_1_0"]),
        (TrajectoryEfficiency, ["detours", "repeats", "proportionate", "recovered_0_0"]),
    ]:
        before = server.request_count
        result = cls(judge.client).evaluate(trace)[0]
        assert server.request_count == before + 1, cls.name
        assert ids_asked(server) == expected_ids
        assert result.label in ("pass", "fail") and result.score is not None


def test_default_yes_answers_score_negated_questions_as_misses(server: FakeOpenAI) -> None:
    result = PlanQuality(Judge(server).client).evaluate(weather_trace())[0]
    assert result.score == pytest.approx(4 / 5)  # "redundant_steps: yes" is the one miss


def test_recovery_questions_come_from_structured_errors_only(server: FakeOpenAI) -> None:
    trace = weather_trace()  # step 1's result mentions "error" but is not a failure
    TrajectoryEfficiency(Judge(server).client).evaluate(trace)
    assert [i for i in ids_asked(server) if i.startswith("recovered")] == ["recovered_0_0"]
    no_failures = weather_trace(steps=[trace.steps[1], trace.steps[2]])
    TrajectoryEfficiency(Judge(server).client).evaluate(no_failures)
    assert not [i for i in ids_asked(server) if i.startswith("recovered")]


def test_tool_argument_accuracy_combines_schema_check_and_judge(server: FakeOpenAI) -> None:
    definitions = [{"type": "function", "name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}}]
    trace = weather_trace(steps=[
        AgentStep(index=0, tool_calls=[ToolCall(name="get_weather", arguments={"city": "Paris"}, result="20C"),
                                       ToolCall(name="get_weather", arguments={"town": "Paris"}, error="bad args")]),
    ])
    judge = Judge(server)
    server.set_default(answer({"call_0_0_conflicts": "no", "call_0_1_conflicts": "no"}))
    with_defs = ToolArgumentAccuracy(judge.client, tool_definitions=definitions).evaluate(trace)[0]
    # the judge saw no conflict, the schema check did: a critical miss, whatever the share
    assert (with_defs.score, with_defs.label) == (0.75, "fail")
    assert "critical: call_0_1_conflicts" in with_defs.explanation and "missing required 'city'" in with_defs.explanation
    assert "missing required 'city'" in with_defs.details["schema_check"]["call_0_1"][0]
    flagged = {a["id"]: a for a in with_defs.details["answers"]}["call_0_1_conflicts"]
    assert (flagged["answer"], flagged["judge_answer"]) == ("yes", "no")
    prompt = server.requests[-1]["body"]["messages"][1]["content"]
    # appropriateness judged against them; the definitions are data in the record, encoded like agent text
    assert "TOOL DEFINITIONS" in prompt and '\\"required\\": [\\"city\\"]' in prompt
    assert with_defs.details["tool_definitions_shown"] == ["get_weather"]
    server.script(answer({"call_0_0": "no", "call_0_0_conflicts": "no", "call_0_1_conflicts": "no"}))
    judge2 = Judge(server, cache_size=0)
    without = ToolArgumentAccuracy(judge2.client).evaluate(trace)[0]
    assert (without.score, without.label) == (0.75, "fail") and without.details["schema_check"] == "no tool definitions in the trace"
    assert "TOOL DEFINITIONS (" not in server.requests[-1]["body"]["messages"][1]["content"]


def test_agent_memory_uses_prior_turns(server: FakeOpenAI) -> None:
    judge = Judge(server)
    evaluator = AgentMemoryEval(judge.client)
    assert evaluator.evaluate(weather_trace())[0].label == "skipped"
    assert server.request_count == 0
    turns = [PriorTurn("I live in Paris.", "Noted."), PriorTurn("Use Celsius.", "Sure.")]
    server.script(answer({"contradicts_prior": "no", "invented_memory": "no", "stale_facts": "no"}))
    result = evaluator.evaluate_with_history(weather_trace(), turns)[0]
    assert result.score == 1.0 and result.details["prior_turns_shown"] == 2
    prompt = server.requests[0]["body"]["messages"][1]["content"]
    assert "CONVERSATION SO FAR" in prompt and "Use Celsius." in prompt


def test_response_facts(server: FakeOpenAI) -> None:
    judge = Judge(server)
    evaluator = ResponseFacts(judge.client, facts_for={"a" * 32: ["it is 20C", "it is sunny", "wind is 10 km/h"]})
    server.script(answer({"fact_3": "no"}))
    result = evaluator.evaluate(weather_trace())[0]
    assert result.score == pytest.approx(2 / 3) and ids_asked(server) == ["fact_1", "fact_2", "fact_3"]
    assert "STEP" not in server.requests[0]["body"]["messages"][1]["content"]  # only the final response is judged
    assert evaluator.evaluate(weather_trace(final_output=None))[0].score == 0.0
    assert evaluator.evaluate(weather_trace(trace_id="c" * 32))[0].label == "skipped"
    assert server.request_count == 1


def test_not_applicable_and_no_content_are_skipped_without_a_request(server: FakeOpenAI) -> None:
    client = Judge(server).client
    assert ToolCallNecessity(client).evaluate(weather_trace(steps=[]))[0].label == "skipped"
    assert TaskCompletion(client).evaluate(weather_trace(content_captured=False))[0].label == "skipped"
    assert server.request_count == 0


def test_result_ids_depend_on_model_and_prompt_version(server: FakeOpenAI) -> None:
    a = TaskCompletion(Judge(server).client).evaluate(weather_trace())[0]
    b = TaskCompletion(Judge(server, model="judge-2").client).evaluate(weather_trace())[0]

    class TaskCompletionV2(TaskCompletion):
        PROMPT_VERSION = TaskCompletion.PROMPT_VERSION + ".next"

    c = TaskCompletionV2(Judge(server).client).evaluate(weather_trace())[0]
    assert len({a.result_id, b.result_id, c.result_id}) == 3
    assert a.result_id == TaskCompletion(Judge(server).client).evaluate(weather_trace())[0].result_id


def test_redaction_applies_to_everything_sent(server: FakeOpenAI) -> None:
    judge = Judge(server)
    judge.client.redactor = type(judge.client.redactor)(user=lambda t: t.replace("Paris", "[CITY]"))
    TaskCompletion(judge.client).evaluate(weather_trace(final_output="Sent to bob@example.com with key sk-abcdefghijklmnopqrstuvwxyz"))
    sent = " ".join(m["content"] for m in server.requests[0]["body"]["messages"])
    assert "bob@example.com" not in sent and "sk-abcdefghij" not in sent and "Paris" not in sent
    assert "[EMAIL]" in sent and "[API_KEY]" in sent and "[CITY]" in sent


# --- retries and failures -----------------------------------------------------------------------------


def test_429_retries_honour_retry_after(server: FakeOpenAI) -> None:
    judge = Judge(server)
    server.script(status(429, retry_after="0.2"), answer())
    result = TaskCompletion(judge.client).evaluate(weather_trace())[0]
    assert result.label in ("pass", "fail") and server.request_count == 2
    assert judge.waits == [0.2]
    assert server.requests[1]["time"] - server.requests[0]["time"] >= 0.2
    assert judge.sample("agent_eval_judge_requests_total", model="judge-1", outcome="retry") == 1
    assert judge.sample("agent_eval_judge_requests_total", model="judge-1", outcome="ok") == 1


def test_5xx_retries_with_backoff_then_succeed(server: FakeOpenAI) -> None:
    judge = Judge(server, max_retries=3)
    server.script(status(500), status(503), answer())
    result = TaskCompletion(judge.client).evaluate(weather_trace())[0]
    assert result.score is not None and server.request_count == 3
    assert len(judge.waits) == 2 and judge.waits[1] > judge.waits[0] * 0.99 / 2  # exponential with jitter
    assert result.details["judge"]["attempts"] == 3


@pytest.mark.parametrize(("behaviours", "reason"), [
    ([status(500)] * 3, "judge_unavailable"),
    ([status(429, retry_after="0")] * 3, "rate_limited_exhausted"),
])
def test_retries_exhausted_become_error_results(server: FakeOpenAI, behaviours: list[Behaviour], reason: str) -> None:
    judge = Judge(server, max_retries=2)
    server.script(*behaviours)
    result = TaskCompletion(judge.client).evaluate(weather_trace())[0]
    assert (result.label, result.details["reason"]) == ("error", reason)
    assert server.request_count == 3
    assert judge.sample("agent_eval_judge_requests_total", model="judge-1", outcome="retry") == 2
    assert judge.sample("agent_eval_judge_requests_total", model="judge-1", outcome=reason) == 1
    assert judge.sample("agent_eval_judge_errors_total", evaluator="task_completion", reason=reason) == 1


def test_retry_after_beyond_max_backoff_gives_up_at_once(server: FakeOpenAI) -> None:
    judge = Judge(server, max_backoff_seconds=1.0)
    server.script(status(429, retry_after="30"))
    result = TaskCompletion(judge.client).evaluate(weather_trace())[0]
    assert result.details["reason"] == "rate_limited_exhausted" and server.request_count == 1 and judge.waits == []


def test_slow_judge_times_out(server: FakeOpenAI) -> None:
    judge = Judge(server, timeout_seconds=0.3, deadline_seconds=5, max_retries=1)
    server.script(slow(1.0), slow(1.0))
    started = time.monotonic()
    result = TaskCompletion(judge.client).evaluate(weather_trace())[0]
    assert result.details["reason"] == "judge_timeout" and server.request_count == 2
    assert time.monotonic() - started < 2.0


def test_judge_down_is_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = JudgeSettings.load(env={}, model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, backoff_seconds=0.01)
    result = TaskCompletion(JudgeClient(settings)).evaluate(weather_trace())[0]
    assert (result.label, result.details["reason"]) == ("error", "judge_unavailable")


def test_4xx_is_rejected_without_retry(server: FakeOpenAI) -> None:
    server.script(status(401))
    result = TaskCompletion(Judge(server).client).evaluate(weather_trace())[0]
    assert result.details["reason"] == "judge_rejected" and server.request_count == 1


@pytest.mark.parametrize(("behaviour", "reason"), [
    (raw("The agent did a great job!"), "malformed_response"),
    (raw("{not json"), "malformed_response"),
    (refusal(), "refusal"),
    (empty(), "empty_response"),
    (Behaviour("no_choices"), "empty_response"),
    (answer({"task_completed": "partially"}), "ambiguous_answer"),
])
def test_bad_answers_become_error_results_never_passes(server: FakeOpenAI, behaviour: Behaviour, reason: str) -> None:
    judge = Judge(server)
    server.script(behaviour)
    result = TaskCompletion(judge.client).evaluate(weather_trace())[0]
    assert (result.label, result.score, result.details["reason"]) == ("error", None, reason)
    assert judge.sample("agent_eval_judge_requests_total", model="judge-1", outcome=reason) == 1
    assert judge.sample("agent_eval_judge_errors_total", evaluator="task_completion", reason=reason) == 1
    # a failed answer is not cached: the next evaluation asks again
    TaskCompletion(judge.client).evaluate(weather_trace())
    assert server.request_count == 2


def test_strict_parser_fallback_when_the_schema_is_ignored(server: FakeOpenAI) -> None:
    judge = Judge(server, response_format="none")
    server.script(raw('Sure! ```json\n{"addresses_request": "yes", "task_completed": "yes", "supported_by_steps": "yes", '
                      '"agent_failed": "no"}\n``` Anything else?'))
    result = TaskCompletion(judge.client).evaluate(weather_trace())[0]
    assert "response_format" not in server.requests[0]["body"]
    assert result.score == 1.0
    server.script(raw('{"addresses_request": "yes"} and also {"agent_failed": "no"}'))
    other = TaskCompletion(judge.client).evaluate(weather_trace(final_output="Other."))[0]
    assert other.details["reason"] == "malformed_response"


def test_build_judge_evaluators_by_name(server: FakeOpenAI) -> None:
    client = Judge(server).client
    built = build_judge_evaluators(client, ["task_completion", "response_facts"], facts=["x"], history=None)
    assert [e.name for e in built] == ["task_completion", "response_facts"] and built[1].facts == ["x"]
    assert all(e.result_key() == "judge-1|" + e.PROMPT_VERSION for e in built)
    with pytest.raises(ValueError, match="unknown judge evaluator"):
        build_judge_evaluators(client, ["nope"])
