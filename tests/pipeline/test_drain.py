"""Shutdown drain and the records intake's waiting spans, on the real Pipeline (no threads mocked).

- The drain feeds thousands of buffered traces to a small evaluation queue at the workers'
  pace, with the evaluation rate cap lifted: nothing is dropped as ``queue_full``, and every
  trace is either evaluated or counted as ``dropped{reason="shutdown"}``.
- A non-GenAI root that arrives before its trace's GenAI spans waits and is adopted: the
  trace completes on its root (``root_ended``), not on the idle timeout.
"""

from __future__ import annotations

import json
import threading
import time

from otel_agent_eval.config import Settings
from otel_agent_eval.evaluators.base import Evaluator
from otel_agent_eval.model import AgentTrace, EvalResult, EvaluatedTrace
from otel_agent_eval.pipeline.core import Pipeline
from otel_agent_eval.records import SpanRecord


class Counting:
    name = "counting"

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.trace_ids: list[str] = []

    def emit(self, evaluated: EvaluatedTrace) -> None:
        with self.lock:
            self.trace_ids.append(evaluated.trace.trace_id)


class Slow(Evaluator):
    """A deterministic evaluator that takes ``seconds`` per run (a stand-in for a heavy one)."""

    name = "slow"

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        time.sleep(self.seconds)
        return [self.scored(trace, 1.0, "ok")]


def agent_run(trace_id: int) -> tuple[SpanRecord, list[SpanRecord]]:
    """One agent run under an HTTP root: (root, [agent span, chat span]); one AgentTrace when assembled."""
    base = trace_id << 8
    start = 1_700_000_000_000_000_000
    root = SpanRecord(trace_id, base + 1, None, "POST /agent", start, start + 3_000_000, {"http.route": "/agent"},
                      kind="SERVER", scope_name="app")
    agent = SpanRecord(trace_id, base + 2, base + 1, "invoke_agent calc", start + 1, start + 2_000_000, {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "calc",
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "add 1 and 2"}]}]),
    }, scope_name="app")
    chat = SpanRecord(trace_id, base + 3, base + 2, "chat m", start + 2, start + 1_000_000, {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "3"}]}]),
    }, scope_name="app")
    return root, [agent, chat]


def wait_for(predicate, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def buffered_pipeline(traces: int, evaluators: list[Evaluator], **settings: object) -> tuple[Pipeline, Counting]:
    """A started pipeline holding ``traces`` complete-but-unsettled traces (settle delay of an hour)."""
    s = Settings.load(env={}, settle_delay_seconds=3600, idle_timeout_seconds=3600, max_trace_age_seconds=3600,
                      max_buffered_traces=traces, max_intake_spans=10 * traces, max_traces_per_second=0, **settings)
    sink = Counting()
    pipeline = Pipeline(s, evaluators, [sink])
    pipeline.start()
    for t in range(1, traces + 1):
        root, genai = agent_run(t)
        pipeline.intake.offer_records([*genai, root])
    wait_for(lambda: pipeline.stats.buffered_traces == traces)
    return pipeline, sink


def test_drain_paces_thousands_of_buffered_traces_through_a_small_queue_despite_the_rate_cap() -> None:
    traces = 3000
    pipeline, sink = buffered_pipeline(traces, [Slow(0.0)], max_queued_evaluations=20, max_evaluations_per_second=5)
    assert pipeline.shutdown(timeout=120)
    stats = pipeline.stats
    assert stats.dropped.snapshot() == {}  # no queue_full, no shutdown loss
    assert len(sink.trace_ids) == len(set(sink.trace_ids)) == traces
    assert stats.sampling.get("not_sampled", "rate_limited") == 0  # the cap does not apply while draining
    assert stats.traces_completed.get("shutdown") == traces


def test_drain_past_its_deadline_counts_every_trace_it_could_not_evaluate() -> None:
    traces = 2000
    pipeline, sink = buffered_pipeline(traces, [Slow(0.002)], max_queued_evaluations=50)
    assert not pipeline.shutdown(timeout=1.0)  # ~2 ms a run: about a quarter fits
    stats = pipeline.stats
    evaluated = stats.traces_evaluated.total()
    lost = stats.dropped.get("shutdown")
    assert 0 < evaluated < traces and lost > 0
    assert evaluated + lost == traces, (evaluated, lost)
    assert set(stats.dropped.snapshot()) == {("shutdown",)}
    assert len(sink.trace_ids) == evaluated


def test_a_root_that_arrives_before_its_genai_spans_is_adopted_and_completes_the_trace() -> None:
    s = Settings.load(env={}, settle_delay_seconds=0.05, idle_timeout_seconds=3600, max_trace_age_seconds=3600,
                      max_traces_per_second=0, max_evaluations_per_second=0, wait_for_trace_seconds=3600)
    sink = Counting()
    pipeline = Pipeline(s, [Slow(0.0)], [sink])
    pipeline.start()
    try:
        root, genai = agent_run(7)
        pipeline.intake.offer_records([root])  # the HTTP handler's batch first
        wait_for(lambda: pipeline.stats.waiting_spans.total() == 0 and len(pipeline.intake.waiting) == 1)
        pipeline.intake.offer_records(genai)  # then the agent's
        wait_for(lambda: len(sink.trace_ids) == 1)
        assert pipeline.stats.traces_completed.snapshot() == {("root_ended",): 1}
        assert pipeline.stats.waiting_spans.snapshot() == {("adopted",): 1}
    finally:
        pipeline.shutdown(timeout=5)


def test_waiting_spans_expire_and_are_evicted_by_their_bounds_and_counted() -> None:
    now = [0.0]
    s = Settings.load(env={}, max_traces_per_second=0, wait_for_trace_seconds=2, max_waiting_spans=3)
    pipeline = Pipeline(s, [], clock=lambda: now[0])  # not started: the intake alone
    for t in range(1, 6):
        pipeline.intake.offer_records([agent_run(t)[0]])  # five roots of unknown traces, one span each
    assert len(pipeline.intake.waiting) == 3
    assert pipeline.stats.waiting_spans.snapshot() == {("evicted",): 2}
    now[0] = 2.5
    pipeline.intake.offer_records([agent_run(9)[0]])
    assert pipeline.stats.waiting_spans.snapshot() == {("evicted",): 2, ("expired",): 3}
    assert len(pipeline.intake.waiting) == 1


def test_spans_offered_after_shutdown_are_counted_not_left_in_the_intake() -> None:
    s = Settings.load(env={}, max_traces_per_second=0)
    pipeline = Pipeline(s, [Slow(0.0)])
    pipeline.start()
    assert pipeline.shutdown(timeout=5)
    root, genai = agent_run(3)
    pipeline.intake.offer_records([*genai, root])  # a request that was still being read when the drain ended
    assert len(pipeline.intake) == 0
    assert pipeline.stats.spans_dropped_snapshot()[("already_shutdown",)] == 3
