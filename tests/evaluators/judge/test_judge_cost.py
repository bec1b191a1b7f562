"""Judge cost control and safety with the real ``openai`` client: budget, cache, concurrency, suppression, pipeline."""

from __future__ import annotations

import threading
from typing import Any

import httpx2
import pytest
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_agent_eval import AgentEvalProcessor
from otel_agent_eval.cli.scripted_agent import ScriptedAgent, Turn
from otel_agent_eval.evaluators import LoopDetection
from otel_agent_eval.evaluators.judge import (
    JudgeClient,
    JudgeMetrics,
    JudgeSettings,
    TaskCompletion,
    TrajectoryEfficiency,
)
from tests.evaluators.judge.test_judge_server import Judge, weather_trace
from tests.evaluators.judge.test_judge_units import big_trace
from tests.openai_server import FakeOpenAI, answer, slow, status


def test_token_budget_cuts_off_judge_evaluators_only(server: FakeOpenAI) -> None:
    judge = Judge(server, budget_tokens_per_hour=300)
    first = TaskCompletion(judge.client).evaluate(weather_trace())[0]
    assert first.score is not None and first.details["judge"]["input_tokens"] > 300
    second = TaskCompletion(judge.client).evaluate(weather_trace(final_output="Other answer."))[0]
    assert (second.label, second.details["reason"]) == ("skipped", "budget_exhausted")
    assert server.request_count == 1
    assert LoopDetection().evaluate(weather_trace())[0].label == "pass"  # deterministic ones go on
    assert judge.sample("agent_eval_judge_budget_remaining_ratio") == 0.0
    assert judge.sample("agent_eval_judge_budget_skips_total", evaluator="task_completion") == 1


def test_usd_budget_and_cost_counter(server: FakeOpenAI) -> None:
    judge = Judge(server, prices="judge-1=1000/2000", budget_usd_per_hour=10.0)
    result = TaskCompletion(judge.client).evaluate(weather_trace())[0]
    tokens_in = judge.sample("agent_eval_judge_tokens_total", evaluator="task_completion", model="judge-1", type="input")
    tokens_out = judge.sample("agent_eval_judge_tokens_total", evaluator="task_completion", model="judge-1", type="output")
    cost = (tokens_in * 1000 + tokens_out * 2000) / 1e6
    assert tokens_in == result.details["judge"]["input_tokens"] and tokens_out == result.details["judge"]["output_tokens"]
    assert judge.sample("agent_eval_judge_cost_usd_total", evaluator="task_completion", model="judge-1") == pytest.approx(cost)
    assert result.details["judge"]["cost_usd"] == pytest.approx(cost)
    assert judge.sample("agent_eval_judge_budget_remaining_ratio") == pytest.approx(1 - cost / 10.0)
    assert judge.sample("agent_eval_judge_request_duration_seconds_count", model="judge-1") == 1


def test_cache_hits_send_no_second_request(server: FakeOpenAI, tmp_path: Any) -> None:
    judge = Judge(server, cache_dir=str(tmp_path))
    first = TaskCompletion(judge.client).evaluate(weather_trace())[0]
    again = TaskCompletion(judge.client).evaluate(weather_trace(trace_id="c" * 32))[0]  # same content, other trace
    assert server.request_count == 1
    assert again.score == first.score and again.details["judge"]["cached"] is True
    assert judge.sample("agent_eval_judge_cache_hits_total", evaluator="task_completion") == 1
    # other evaluator or other prompt version: not served from the cache
    TrajectoryEfficiency(judge.client).evaluate(weather_trace())

    class TaskCompletionV2(TaskCompletion):
        PROMPT_VERSION = TaskCompletion.PROMPT_VERSION + ".next"

    TaskCompletionV2(judge.client).evaluate(weather_trace())
    assert server.request_count == 3
    # on disk: a fresh client (a new process) still needs no request
    fresh = Judge(server, cache_dir=str(tmp_path))
    assert TaskCompletion(fresh.client).evaluate(weather_trace())[0].details["judge"]["cached"] is True
    assert server.request_count == 3


def test_concurrency_limit_holds_across_threads(server: FakeOpenAI) -> None:
    judge = Judge(server, concurrency=2, cache_size=0)
    server.set_default(slow(0.15))
    evaluator = TaskCompletion(judge.client)
    threads = [threading.Thread(target=evaluator.evaluate, args=(weather_trace(final_output=f"answer {i}"),)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert server.request_count == 6 and server.max_in_flight == 2


def test_local_rpm_limit_beyond_the_deadline_is_an_error(server: FakeOpenAI) -> None:
    judge = Judge(server, requests_per_minute=1, deadline_seconds=20, cache_size=0)
    assert TaskCompletion(judge.client).evaluate(weather_trace())[0].score is not None
    result = TaskCompletion(judge.client).evaluate(weather_trace(final_output="x"))[0]
    assert result.details["reason"] == "rate_limited_exhausted" and result.details["limit"] == "requests per minute"
    assert server.request_count == 1


def test_large_trace_records_what_the_judge_saw(server: FakeOpenAI) -> None:
    judge = Judge(server, max_prompt_chars=6_000)
    result = TaskCompletion(judge.client).evaluate(big_trace(60))[0]
    view = result.details["judge_view"]
    assert view["steps_summarized"] or view["steps_aggregated"]
    assert sorted(view["steps_shown"] + view["steps_summarized"] + view["steps_aggregated"]) == list(range(60))
    sent = server.requests[0]["body"]["messages"][1]["content"]
    assert view["chars"] <= 6_000 and len(sent) < 6_000 + 1_000  # record + instructions and questions


# --- suppression ----------------------------------------------------------------------------------


class FakeHttpInstrumentation:
    """Behaves like opentelemetry-instrumentation-httpx: a client span per request unless suppressed."""

    def __init__(self, tracer_provider: TracerProvider) -> None:
        self.tracer = tracer_provider.get_tracer("opentelemetry.instrumentation.httpx")
        self.suppressed: list[bool] = []

    def on_request(self, request: httpx2.Request) -> None:
        key = otel_context._SUPPRESS_INSTRUMENTATION_KEY
        suppressed = bool(otel_context.get_value(key)) or bool(otel_context.get_value(otel_context._SUPPRESS_HTTP_INSTRUMENTATION_KEY))
        self.suppressed.append(suppressed)
        if not suppressed:
            self.tracer.start_span(f"{request.method} {request.url.path}", attributes={"http.request.method": request.method}).end()


def test_judge_calls_never_become_app_spans_nor_get_evaluated(server: FakeOpenAI) -> None:
    server.set_default(answer({"agent_failed": "no"}))
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    registry = CollectorRegistry()
    instrumentation = FakeHttpInstrumentation(provider)
    http = httpx2.Client(event_hooks={"request": [instrumentation.on_request]})
    settings = JudgeSettings.load(env={}, model="judge-1", base_url=server.base_url, api_key="sk-test")
    judge = JudgeClient(settings, metrics=JudgeMetrics(registry), http_client=http)
    processor = AgentEvalProcessor(
        evaluators=[TaskCompletion(judge), LoopDetection()], registry=registry, settle_delay_seconds=0.0,
        emit_spans=False, emit_logs=False,
    )
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("app")
    agent = ScriptedAgent("weather", tools={"get_weather": lambda city: {"temp_c": 20}})
    agent.run(tracer, "Weather in Paris?", [Turn(tool_calls=[("get_weather", {"city": "Paris"})]), Turn(text="20C in Paris.")])
    assert processor.force_flush(10_000)
    processor.shutdown()

    assert server.request_count == 1 and instrumentation.suppressed == [True]
    names = [span.name for span in exporter.get_finished_spans()]
    assert not [n for n in names if n.startswith("POST")], names
    run = {"agent": "weather", "service": "unknown"}  # the SDK default unknown_service:python
    assert registry.get_sample_value("agent_eval_results_total", {"evaluator": "task_completion", **run, "outcome": "pass", "reason": ""}) == 1
    assert registry.get_sample_value("agent_eval_traces_evaluated_total", run) == 1  # the judge call was not a trace
    # control: the same hook outside the judge does record a span
    http.post(server.base_url + "/chat/completions", json={"model": "x", "messages": []})
    assert instrumentation.suppressed[-1] is False
    assert [s.name for s in exporter.get_finished_spans()][-1] == "POST /v1/chat/completions"


def test_judge_down_never_takes_the_pipeline_down(server: FakeOpenAI) -> None:
    registry = CollectorRegistry()
    judge = Judge(server, max_retries=1)
    server.set_default(status(503))
    processor = AgentEvalProcessor(
        evaluators=[TaskCompletion(judge.client), LoopDetection()], registry=registry, settle_delay_seconds=0.0,
        emit_spans=False, emit_logs=False,
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    agent = ScriptedAgent("weather", tools={"get_weather": lambda city: {"temp_c": 20}})
    for _ in range(3):
        agent.run(provider.get_tracer("app"), "Weather?", [Turn(tool_calls=[("get_weather", {"city": "Paris"})]), Turn(text="20C")])
    assert processor.force_flush(10_000)
    processor.shutdown()
    sample = registry.get_sample_value
    run = {"agent": "weather", "service": "unknown"}
    assert sample("agent_eval_results_total", {"evaluator": "task_completion", **run, "outcome": "error", "reason": "judge_unavailable"}) == 3
    assert sample("agent_eval_results_total", {"evaluator": "loop_detection", **run, "outcome": "pass", "reason": ""}) == 3
    assert sample("agent_eval_evaluator_errors_total", {"evaluator": "task_completion", "reason": "exception"}) is None
    assert judge.sample("agent_eval_judge_errors_total", evaluator="task_completion", reason="judge_unavailable") == 3
