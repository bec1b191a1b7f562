"""Sampling agrees with the SDK, the buffer completes traces as documented, config fails fast."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace.sampling import Decision as SdkDecision
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

from otel_agent_eval import AgentTrace, ConfigError, Settings, ToolCall
from otel_agent_eval.config import settings_table
from otel_agent_eval.model import AgentStep
from otel_agent_eval.pipeline.buffer import TraceBuffer
from otel_agent_eval.pipeline.sampling import Sampler, TokenBucket, trace_id_sampled
from otel_agent_eval.records import SpanRecord


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("rate", [0.0, 0.01, 0.25, 0.5, 0.999, 1.0])
def test_ratio_rule_is_the_sdk_trace_id_ratio_rule(rate: float) -> None:
    sdk = TraceIdRatioBased(rate)
    for i in range(2000):
        trace_id = (i * 0x9E3779B97F4A7C15_9E3779B97F4A7C15) & ((1 << 128) - 1)
        expected = sdk.should_sample(None, trace_id, "x").decision == SdkDecision.RECORD_AND_SAMPLE
        assert trace_id_sampled(trace_id, rate) == expected


def agent_trace(trace_id: int, *, error: bool = False, failed_tool: bool = False, seconds: float = 1.0) -> AgentTrace:
    calls = [ToolCall(name="t", error="boom" if failed_tool else None)]
    return AgentTrace(
        trace_id=format(trace_id, "032x"), status="error" if error else "ok",
        steps=[AgentStep(index=0, tool_calls=calls)], start_time_unix_nano=0, end_time_unix_nano=int(seconds * 1e9),
    )


def test_tail_rules_keep_errors_tool_failures_and_slow_traces_whatever_the_ratio() -> None:
    sampler = Sampler(0.0, slow_seconds=10)
    assert sampler.decide(agent_trace(5)).reason == "ratio" and not sampler.decide(agent_trace(5)).sampled
    assert (sampler.decide(agent_trace(5, error=True)).sampled, sampler.decide(agent_trace(5, error=True)).reason) == (True, "error")
    assert sampler.decide(agent_trace(5, failed_tool=True)).reason == "tool_failure"
    assert sampler.decide(agent_trace(5, seconds=11)).reason == "slow"


def test_token_bucket_limits_rate() -> None:
    clock = FakeClock()
    sampler = Sampler(1.0, max_per_second=2, clock=clock)
    decisions = [sampler.decide(agent_trace(i)) for i in range(5)]
    assert [d.sampled for d in decisions] == [True, True, False, False, False]
    assert decisions[-1].reason == "rate_limited"
    clock.now = 1.0
    assert sampler.decide(agent_trace(9)).sampled
    bucket = TokenBucket(10, clock=clock)
    assert sum(bucket.take() for _ in range(100)) == 10


def record(trace_id: int, span_id: int, parent: int | None = None) -> SpanRecord:
    return SpanRecord(trace_id, span_id, parent, "s", 0, 1)


def put(buf: TraceBuffer, r: SpanRecord, now: float) -> None:
    buf.add(r, r.trace_id, r.is_local_root, now)


def make_buffer(drops: list[tuple[str, int]], **kw: float) -> TraceBuffer:
    args = dict(settle_delay=2.0, idle_timeout=30.0, max_age=300.0, max_traces=3, max_spans_per_trace=2)
    args.update(kw)
    return TraceBuffer(on_drop=lambda reason, n: drops.append((reason, n)), **args)  # type: ignore[arg-type]


def test_root_end_plus_settle_delay_completes() -> None:
    drops: list[tuple[str, int]] = []
    buf = make_buffer(drops)
    put(buf, record(1, 2, parent=1), 0.0)
    put(buf, record(1, 1), 1.0)  # local root
    assert buf.pop_complete(2.9) == []
    (done,) = buf.pop_complete(3.0)
    assert (done.trace_id, done.reason, len(done.spans)) == (1, "root_ended", 2)


def test_idle_timeout_and_max_age() -> None:
    buf = make_buffer([], idle_timeout=5.0, max_age=8.0, max_spans_per_trace=100)
    put(buf, record(1, 2, parent=99), 0.0)  # no root in this process
    assert [c.reason for c in buf.pop_complete(5.0)] == ["idle_timeout"]
    for t in range(8):
        put(buf, record(3, 10 + t, parent=99), 5.0 + t)  # keeps arriving: never idle
    assert buf.pop_complete(12.9) == []
    assert [c.reason for c in buf.pop_complete(13.0)] == ["max_age"]


def test_bounds_and_late_spans_are_counted() -> None:
    drops: list[tuple[str, int]] = []
    buf = make_buffer(drops)
    for trace_id in (1, 2, 3, 4):  # max 3 traces: trace 1 is evicted
        put(buf, record(trace_id, 1), 0.0)
    assert drops == [("buffer_full", 1)] and 1 not in buf
    put(buf, record(2, 2, parent=1), 0.0)
    put(buf, record(2, 3, parent=1), 0.0)  # third span > max 2 per trace
    assert drops[-1] == ("trace_too_large", 1)
    buf.pop_all("flush")
    put(buf, record(3, 9, parent=1), 0.0)
    assert drops[-1] == ("late_span", 1) and len(buf) == 0


def test_config_error_names_the_variable_and_allowed_values() -> None:
    with pytest.raises(ConfigError, match="OTEL_AGENT_EVAL_SAMPLE_RATE"):
        Settings.load(env={"OTEL_AGENT_EVAL_SAMPLE_RATE": "1.5"})
    with pytest.raises(ConfigError, match="OTEL_AGENT_EVAL_WORKERS.*valid integer"):
        Settings.load(env={"OTEL_AGENT_EVAL_WORKERS": "many"})
    with pytest.raises(ConfigError, match="OTEL_AGENT_EVAL_EVALUATORS: unknown evaluator .nope.; allowed: .*loop_detection"):
        Settings.load(env={"OTEL_AGENT_EVAL_EVALUATORS": "tool_call_accuracy,nope"})
    with pytest.raises(ConfigError, match="argument max_steps"):
        Settings.load(env={}, max_steps=0)
    with pytest.raises(ConfigError, match="unknown setting"):
        Settings.load(env={}, sample_ratio=0.5)


def test_arguments_override_environment() -> None:
    env = {"OTEL_AGENT_EVAL_SAMPLE_RATE": "0.5", "OTEL_AGENT_EVAL_EVALUATORS": "loop_detection, step_budget"}
    s = Settings.load(env=env, sample_rate=0.25)
    assert (s.sample_rate, s.evaluators) == (0.25, ("loop_detection", "step_budget"))


def test_readme_configuration_table_is_current() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert settings_table() in readme, "README configuration table is stale: paste otel_agent_eval.config.settings_table()"
