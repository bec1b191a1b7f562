"""Admission on arrival: an adaptive trace-id ratio caps the new traces buffered per second.

Above ``max_traces_per_second`` the hot path rejects new traces at the cost of a dict
look-up instead of buffering and assembling every one. What must hold: the rate admitted
follows the setting, every admitted trace stays whole (its later spans are kept whatever
the ratio does), a rejected trace stays rejected, and every decision is counted.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from otel_agent_eval.config import Settings
from otel_agent_eval.evaluators import LoopDetection
from otel_agent_eval.pipeline.core import Pipeline
from otel_agent_eval.pipeline.sampling import AdmissionRate, ratio_bound, trace_id_sampled
from otel_agent_eval.records import SpanRecord
from otel_agent_eval.sinks.prometheus import PrometheusSink
from tests.pipeline.test_reliability import make_processor, run_agent


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def agent_run(trace_id: int) -> list[SpanRecord]:
    """An agent span, a chat span asking for one tool call, the tool span: children end first."""
    base = (trace_id & 0xFFFF_FFFF) << 8
    agent, chat, tool = base + 1, base + 2, base + 3

    def record(span_id: int, parent: int | None, name: str, start: int, attributes: dict[str, Any]) -> SpanRecord:
        return SpanRecord(trace_id=trace_id, span_id=span_id, parent_span_id=parent, name=name,
                          start_time_unix_nano=start, end_time_unix_nano=start + 10, attributes=attributes)

    return [
        record(chat, agent, "chat m", 10, {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
            "gen_ai.output.messages": '[{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "add", "arguments": {"a": 1}}]}]',
        }),
        record(tool, agent, "execute_tool add", 30, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "add", "gen_ai.tool.call.id": "c1",
        }),
        record(agent, None, "invoke_agent calc", 0, {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "calc"}),
    ]


def test_admission_rate_follows_the_rate_seen_and_uses_the_trace_id_ratio_rule() -> None:
    admission = AdmissionRate(100.0, now=0.0)
    assert admission.ratio == 1.0 and admission.admits((1 << 64) - 1)
    seen = 0
    for tick in range(1, 21):  # 1,000 new traces per second for 2 s
        seen += 100
        admission.update(seen, now=tick * 0.1)
    assert abs(admission.ratio - 0.1) < 1e-9
    assert admission.bound == ratio_bound(0.1)
    rng = random.Random(3)
    ids = [rng.getrandbits(128) for _ in range(150)]  # fewer than the cap of 20 per interval would admit
    assert [admission.admits(t) for t in ids] == [trace_id_sampled(t, 0.1) for t in ids]
    for tick in range(21, 41):  # traffic falls to 50/s: everything is admitted again
        seen += 5
        admission.update(seen, now=tick * 0.1)
    assert admission.ratio == 1.0
    disabled = AdmissionRate(0.0, now=0.0)
    disabled.update(1_000_000, now=1.0)
    assert disabled.ratio == 1.0 and all(disabled.admits(t) for t in range(10_000))


def test_a_burst_is_capped_until_the_ratio_catches_up() -> None:
    """At start (or when traffic jumps) the ratio is still 1: at most twice the target per interval gets in."""
    admission = AdmissionRate(100.0, now=0.0)
    assert sum(admission.admits(t) for t in range(1_000)) == 20  # 2 x 100/s x 0.1 s
    admission.update(1_000, now=0.1)  # the burst was seen: the ratio drops and the cap resets
    assert admission.ratio < 0.2 and admission.admitted == 0


def test_pipeline_admits_about_the_configured_rate_and_keeps_admitted_traces_whole() -> None:
    clock = Clock()
    settings = Settings.load(env={}, max_traces_per_second=100, settle_delay_seconds=0,
                             max_evaluations_per_second=0, max_queued_evaluations=100_000)
    pipeline = Pipeline(settings, [LoopDetection()], clock=clock)  # not started: the test drives the collector
    registry = CollectorRegistry()
    PrometheusSink(registry, pipeline.stats, pipeline.run_labels)
    rng = random.Random(11)
    sent = 0
    admitted_per_second: Counter[int] = Counter()
    for second in range(5):  # 1,000 new agent traces per second, in ticks of 0.1 s
        for _ in range(10):
            before = pipeline.stats.traces_admitted.value
            for _ in range(100):
                pipeline.intake.offer_records(agent_run(rng.getrandbits(128)))
                sent += 1
            admitted_per_second[second] += pipeline.stats.traces_admitted.value - before
            clock.now += 0.1
            pipeline._collect_once()
    stats = pipeline.stats
    assert stats.traces_admitted.value + stats.traces_rejected.value == sent
    # the first interval admits up to its cap, then the ratio settles at target / rate seen
    for second in range(5):
        assert 50 <= admitted_per_second[second] <= 200, admitted_per_second
    assert abs(stats.admission_ratio - 0.1) < 0.02
    # every admitted trace was buffered whole and assembled into one agent run with its tool call
    assert stats.spans_kept.value == 3 * stats.traces_admitted.value
    assert stats.agent_traces.total() == stats.traces_admitted.value
    jobs = list(pipeline._queue)
    assert len(jobs) == stats.traces_admitted.value
    assert all(len(j.trace.steps) == 1 and [c.name for c in j.trace.tool_calls] == ["add"] for j in jobs)

    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(generate_latest(registry).decode()) for s in family.samples
    }
    assert samples[("agent_eval_admission_decisions_total", (("decision", "admitted"),))] == stats.traces_admitted.value
    assert samples[("agent_eval_admission_decisions_total", (("decision", "rejected"),))] == stats.traces_rejected.value
    assert abs(samples[("agent_eval_admission_ratio", ())] - stats.admission_ratio) < 1e-9


def test_decisions_hold_for_the_whole_trace_when_the_ratio_changes() -> None:
    pipeline = Pipeline(Settings.load(env={}, max_traces_per_second=100), [LoopDetection()])
    admitted_run, rejected_run = agent_run(0xA << 64), agent_run((0xB << 64) | (1 << 63))
    pipeline.intake.admission.bound = ratio_bound(0.5)  # admits low 64 bits < 2**63
    pipeline.intake.offer_records(admitted_run[:1])
    pipeline.intake.offer_records(rejected_run[:1])
    assert len(pipeline.intake) == 1
    # the ratio falls to nothing: the admitted trace keeps its later spans
    pipeline.intake.admission.bound = 0
    pipeline.intake.offer_records(admitted_run[1:])
    # the ratio rises to all: the rejected trace does not come back half way through
    pipeline.intake.admission.bound = ratio_bound(1.0)
    pipeline.intake.offer_records(rejected_run[1:])
    assert [r.span_id for r in pipeline.intake] == [r.span_id for r in admitted_run]
    assert (pipeline.stats.traces_admitted.value, pipeline.stats.traces_rejected.value) == (1, 1)


def test_rejected_ids_are_forgotten_in_generations() -> None:
    pipeline = Pipeline(Settings.load(env={}, max_traces_per_second=100, max_buffered_traces=10), [LoopDetection()])
    pipeline.intake.admission.bound = 0
    for trace_id in range(1, 101):  # 10 x max_buffered_traces: one generation
        assert not pipeline.intake.admit(trace_id)
    pipeline._collect_once()
    assert len(pipeline.intake.rejected) == 0 and len(pipeline.intake.rejected_earlier) == 100
    assert not pipeline.intake.admit(5)  # still remembered for one more generation
    for trace_id in range(101, 201):
        pipeline.intake.admit(trace_id)
    pipeline._collect_once()
    assert 5 not in pipeline.intake.rejected_earlier and 5 not in pipeline.intake.rejected


def test_app_burst_through_the_sdk_is_admitted_at_the_cap_and_admitted_runs_are_whole() -> None:
    """A real TracerProvider: a burst of agent runs far above the cap. Every run is decided
    once (admitted + rejected == runs) and every evaluated run has both of its steps."""
    provider, processor, sink = make_processor([LoopDetection()], max_traces_per_second=50, max_queued_evaluations=100_000)
    tracer = provider.get_tracer("app")
    runs = 0
    while runs < 2_000 or (processor.stats.traces_rejected.value == 0 and runs < 100_000):
        run_agent(tracer)  # as fast as the app can: far above 50 runs/s
        runs += 1
    assert processor.force_flush(30_000)
    provider.shutdown()
    stats = processor.stats
    assert stats.traces_admitted.value + stats.traces_rejected.value == runs
    assert stats.traces_rejected.value > 0 and stats.admission_ratio < 1.0
    evaluated = sink.evaluated
    assert len(evaluated) == stats.traces_admitted.value
    for e in evaluated:
        assert [len(s.tool_calls) for s in e.trace.steps] == [1, 0]
        assert e.trace.steps[0].tool_calls[0].result is not None
