"""The judge stage: a sick judge never starves deterministic results; breaker, budget, judge sample rate.

Real components throughout: the real SDK, the real ``openai`` client, a local fake
OpenAI server (``tests/openai_server.py``) that hangs, fails or answers; time
for the breaker comes from an injectable clock, never from sleeps.
"""

from __future__ import annotations

import socket
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, TraceIdRatioBased
from prometheus_client import CollectorRegistry

from otel_agent_eval.config import ConfigError
from otel_agent_eval.evaluators import Evaluator, LoopDetection, ToolFailureRecovery
from otel_agent_eval.evaluators.judge import JudgeClient, JudgeMetrics, JudgeSettings, PlanQuality, TaskCompletion
from otel_agent_eval.evaluators.judge.limits import CircuitBreaker, HourlyBudget
from otel_agent_eval.model import AgentTrace, EvalResult
from tests.evaluators.judge.test_judge_server import weather_trace
from tests.intake.test_processor import wait_for
from tests.openai_server import FakeOpenAI, answer, slow, status
from tests.pipeline.test_reliability import HANG_GUARD, make_processor, run_agent

pytest.importorskip("openai")

DETERMINISTIC = {"loop_detection", "tool_failure_recovery"}


class ManualClock:
    """Time that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def closed_port_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens: connections are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def judge_client(base_url: str, registry: CollectorRegistry, **overrides: Any) -> JudgeClient:
    clock = overrides.pop("clock", None)
    settings = JudgeSettings.load(env={}, model="judge-1", base_url=base_url, api_key="sk-test", max_retries=0,
                                  backoff_seconds=0.01, cache_size=0, **overrides)
    return JudgeClient(settings, metrics=JudgeMetrics(registry), **({"clock": clock} if clock else {}))


def phases(sink: Any, phase: str) -> list[Any]:
    with sink.lock:
        return [e for e in sink.evaluated if e.phase == phase]


# --- a sick judge starves nothing ---------------------------------------------------------------


def test_a_judge_that_never_answers_holds_back_no_deterministic_result(server: FakeOpenAI) -> None:
    server.set_default(slow(600))  # accepts the connection, never answers within the test
    registry = CollectorRegistry()
    judge = judge_client(server.base_url, registry, timeout_seconds=20, deadline_seconds=25, concurrency=2, max_queued=3)
    provider, processor, sink = make_processor(
        [TaskCompletion(judge), PlanQuality(judge), LoopDetection(), ToolFailureRecovery()], evaluator_timeout_seconds=30,
    )
    tracer = provider.get_tracer("app")
    try:
        runs = {run_agent(tracer) for _ in range(12)}
        assert wait_for(lambda: len(phases(sink, "deterministic")) == 12, HANG_GUARD), "deterministic results held back"
        assert wait_for(lambda: server.in_flight == 2, HANG_GUARD)  # both judge workers hang on the judge
        deterministic = phases(sink, "deterministic")
        assert {e.trace.trace_id for e in deterministic} == runs
        assert all({r.evaluator for r in e.results} == DETERMINISTIC for e in deterministic)
        assert all(r.label == "pass" for e in deterministic for r in e.results)
        assert phases(sink, "judge") == []
        assert processor.pipeline.shutdown(timeout=0.2) is False  # the judge is still hanging
    finally:
        provider.shutdown()
        judge.close()
    stats = processor.stats
    assert stats.judge_sampling.snapshot() == {("sampled",): 12}
    # every judge evaluation is counted by reason: hung in flight or queued at shutdown, or pushed out of the full queue
    dropped = stats.dropped.snapshot()
    assert set(dropped) == {("judge_shutdown",), ("judge_queue_full",)}
    assert dropped[("judge_shutdown",)] + dropped[("judge_queue_full",)] == 12
    assert 2 <= dropped[("judge_shutdown",)] <= 2 + 3  # the two hung workers, plus at most a full queue
    assert stats.traces_evaluated.total() == 12 and stats.traces_judged.total() == 0


@pytest.mark.parametrize("failure", ["connection_refused", "http_500"])
def test_a_failing_judge_opens_the_breaker_and_every_run_still_gets_its_results(server: FakeOpenAI, failure: str) -> None:
    registry = CollectorRegistry()
    if failure == "http_500":
        server.set_default(status(500))
        base_url = server.base_url
    else:
        base_url = closed_port_url()
    # the cool-down never ends: the clock does not move
    judge = judge_client(base_url, registry, concurrency=1, breaker_failures=3, breaker_cooldown_seconds=60, clock=ManualClock())
    provider, processor, sink = make_processor([LoopDetection(), TaskCompletion(judge)])
    tracer = provider.get_tracer("app")
    try:
        runs = {run_agent(tracer) for _ in range(10)}
        assert processor.force_flush(HANG_GUARD * 1000)
    finally:
        provider.shutdown()
        judge.close()
    assert {e.trace.trace_id for e in phases(sink, "deterministic")} == runs
    assert Counter(r.label for e in phases(sink, "deterministic") for r in e.results) == {"pass": 10}
    judged = [r for e in phases(sink, "judge") for r in e.results]
    assert len(judged) == 10 and {r.label for r in judged} == {"error"}
    assert {r.details["reason"] for r in judged} == {"judge_unavailable"}
    assert Counter(r.details.get("breaker") for r in judged) == {None: 3, "open": 7}
    sample = registry.get_sample_value
    assert sample("agent_eval_judge_errors_total", {"evaluator": "task_completion", "reason": "judge_unavailable"}) == 10
    assert sample("agent_eval_judge_breaker_rejections_total", {"evaluator": "task_completion"}) == 7
    assert sample("agent_eval_judge_requests_total", {"model": "judge-1", "outcome": "judge_unavailable"}) == 3
    assert sample("agent_eval_judge_breaker_state") == 1
    if failure == "http_500":
        assert server.request_count == 3


def test_the_breaker_recovers_through_a_single_probe(server: FakeOpenAI) -> None:
    registry = CollectorRegistry()
    clock = ManualClock()
    judge = judge_client(server.base_url, registry, breaker_failures=2, breaker_cooldown_seconds=30, clock=clock)
    evaluator = TaskCompletion(judge)

    def judge_once(i: int) -> Any:
        return evaluator.evaluate(weather_trace(final_output=f"answer {i}"))[0]

    def state() -> float | None:
        return registry.get_sample_value("agent_eval_judge_breaker_state")

    server.set_default(status(500))
    assert [judge_once(i).details.get("breaker") for i in range(4)] == [None, None, "open", "open"]
    assert server.request_count == 2 and state() == 1
    clock.advance(29.9)
    assert judge_once(4).details.get("breaker") == "open" and server.request_count == 2
    clock.advance(0.1)
    assert state() == 2  # half-open: the next call is the probe
    assert judge_once(5).details["reason"] == "judge_unavailable" and server.request_count == 3  # the probe fails
    assert state() == 1 and judge_once(6).details.get("breaker") == "open" and server.request_count == 3
    clock.advance(30)
    server.set_default(answer({"agent_failed": "no"}))
    assert judge_once(7).label == "pass" and state() == 0  # the probe succeeds: closed
    assert [judge_once(i).label for i in range(8, 11)] == ["pass"] * 3 and server.request_count == 7
    judge.close()


def test_half_open_lets_one_probe_through_at_a_time() -> None:
    clock = ManualClock()
    breaker = CircuitBreaker(failures=1, cooldown=5, clock=clock)
    assert breaker.allow()
    breaker.record(False)
    assert not breaker.allow()
    clock.advance(5)
    assert breaker.allow()  # the probe
    assert not breaker.allow() and not breaker.allow()  # everyone else while it is out
    breaker.record(None)  # the probe was never sent (a local rate limit): the next caller probes
    assert breaker.allow() and not breaker.allow()
    breaker.record(True)
    assert breaker.current() == CircuitBreaker.CLOSED and breaker.allow() and breaker.allow()
    assert CircuitBreaker(failures=0, cooldown=5).allow()  # disabled


def test_breaker_and_judge_stage_settings_name_their_variables() -> None:
    for variable, value in [("SAMPLE_RATE", "1.5"), ("BREAKER_FAILURES", "-1"), ("BREAKER_COOLDOWN_SECONDS", "0"),
                            ("MAX_QUEUED", "0")]:
        with pytest.raises(ConfigError, match=f"OTEL_AGENT_EVAL_JUDGE_{variable}"):
            JudgeSettings.load(env={f"OTEL_AGENT_EVAL_JUDGE_{variable}": value})


# --- budget ---------------------------------------------------------------------------------------


def test_budget_overshoot_is_at_most_one_call_at_concurrency_8(server: FakeOpenAI) -> None:
    server.set_default(slow(0.2, {"agent_failed": "no"}))  # slow enough for all 12 callers to overlap
    registry = CollectorRegistry()
    judge = judge_client(server.base_url, registry, concurrency=8, budget_tokens_per_hour=2000)
    evaluator = TaskCompletion(judge)
    start = threading.Barrier(12)
    results: list[Any] = []

    def call(i: int) -> None:
        start.wait()
        results.append(evaluator.evaluate(weather_trace(final_output=f"answer {i}", trace_id=f"{i + 1:032x}"))[0])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_GUARD)
    judge.close()
    sent = [r for r in results if r.label == "pass"]
    per_call = [r.details["judge"]["input_tokens"] + r.details["judge"]["output_tokens"] for r in sent]
    spent = sum(per_call)
    assert server.request_count == len(sent) and 1 < len(sent) < 12
    # reserved estimates stopped new calls at the budget: it is overshot by at most one call
    assert spent - max(per_call) < 2000 and spent < 2000 + max(per_call), (spent, per_call)
    assert Counter(r.details["reason"] for r in results if r.label == "skipped") == {"budget_exhausted": 12 - len(sent)}
    assert registry.get_sample_value("agent_eval_judge_budget_skips_total", {"evaluator": "task_completion"}) == 12 - len(sent)


# --- judge sample rate, second evaluation span ----------------------------------------------------------


def test_judge_sample_rate_picks_runs_by_trace_id_and_judge_results_get_their_own_span(server: FakeOpenAI) -> None:
    server.set_default(answer({"agent_failed": "no"}))
    registry = CollectorRegistry()
    judge = judge_client(server.base_url, registry, sample_rate=0.5)
    exporter = InMemorySpanExporter()
    results_provider = TracerProvider()
    results_provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider, processor, sink = make_processor([LoopDetection(), TaskCompletion(judge)], emit_spans=True,
                                               tracer_provider=results_provider)
    tracer = provider.get_tracer("app")
    try:
        runs = {run_agent(tracer) for _ in range(24)}
        assert processor.force_flush(HANG_GUARD * 1000)
    finally:
        provider.shutdown()
        judge.close()
    sampler = TraceIdRatioBased(0.5)
    expected = {t for t in runs if sampler.should_sample(None, int(t, 16), "x").decision == Decision.RECORD_AND_SAMPLE}
    assert 0 < len(expected) < 24
    assert {e.trace.trace_id for e in phases(sink, "deterministic")} == runs
    assert {e.trace.trace_id for e in phases(sink, "judge")} == expected
    assert processor.stats.judge_sampling.snapshot() == {("sampled",): len(expected), ("not_sampled",): 24 - len(expected)}
    assert server.request_count == len(expected)

    spans = exporter.get_finished_spans()
    assert Counter(s.name for s in spans) == {"evaluate_agent calc": 24, "judge_agent calc": len(expected)}
    by_trace: dict[int, list[Any]] = {}
    for span in spans:
        by_trace.setdefault(span.context.trace_id, []).append(span)
    for group in by_trace.values():
        assert len({s.parent.span_id for s in group}) == 1  # both phases are children of the agent span
        for span in group:
            judged = span.attributes["agent_eval.phase"] == "judge"
            assert ("agent_eval.task_completion.label" in span.attributes) is judged
            assert ("agent_eval.loop_detection.label" in span.attributes) is not judged


def test_budget_reservations_hold_until_settled_and_release_unused_estimates() -> None:
    clock = ManualClock()
    budget = HourlyBudget(max_tokens=300, clock=clock)
    first, second = budget.reserve(200, 0.0), budget.reserve(200, 0.0)
    assert first is not None and second is not None  # 200 reserved was under 300: the second may go (one call over)
    assert budget.reserve(10, 0.0) is None and budget.exhausted()  # 400 reserved: nothing more goes out
    budget.settle(first, 120)  # the real usage replaces the estimate
    budget.settle(second)  # a call that failed before an answer spent nothing
    budget.settle(second, 500)  # settling twice changes nothing
    assert budget.spent() == (120, 0.0) and budget.remaining_ratio() == pytest.approx(0.6)
    third = budget.reserve(200, 0.0)
    assert third is not None and budget.reserve(1, 0.0) is None
    clock.advance(3600)  # the hour slides: spent tokens expire, reservations stay until settled
    assert budget.reserve(100, 0.0) is not None and budget.reserve(1, 0.0) is None  # 200 + 100 reserved


def test_a_custom_evaluator_that_needs_a_judge_runs_in_the_judge_stage() -> None:
    class Tone(Evaluator):
        name = "tone"
        needs_judge = True  # it would call an LLM: it must not hold back the deterministic results

        def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
            return [self.scored(trace, 1.0, "polite")]

    provider, processor, sink = make_processor([Tone(), LoopDetection()])
    try:
        runs = {run_agent(provider.get_tracer("app")) for _ in range(2)}
        assert processor.force_flush(HANG_GUARD * 1000)
    finally:
        provider.shutdown()
    assert processor.pipeline.judge_settings == JudgeSettings()  # no judge client: the default stage size and rate
    assert {(e.trace.trace_id, r.evaluator) for e in phases(sink, "judge") for r in e.results} == {(t, "tone") for t in runs}
    assert {(e.trace.trace_id, r.evaluator) for e in phases(sink, "deterministic") for r in e.results} == {
        (t, "loop_detection") for t in runs
    }
