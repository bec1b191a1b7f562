"""The TraceBuffer's byte bound: estimated sizes, eviction by bytes, oversize traces.

The estimate is checked against tracemalloc (a ratio, not a timing): for realistic
GenAI spans it must neither miss the real cost (the bound would not hold) nor
overshoot it by much (the buffer would keep needlessly few traces).
"""

from __future__ import annotations

import gc
import json
import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

from otel_agent_eval.config import Settings
from otel_agent_eval.evaluators import LoopDetection
from otel_agent_eval.pipeline.buffer import (
    ATTRIBUTE_COST,
    LOG_COST,
    RECORD_COST,
    SDK_SPAN_COST,
    TraceBuffer,
    estimate_size,
)
from otel_agent_eval.pipeline.core import Pipeline
from otel_agent_eval.records import LogRecordData, SpanEvent, SpanRecord, from_readable_span

Drops = list[tuple[str, int]]


def make_buffer(drops: Drops, max_bytes: int, max_traces: int = 1000) -> TraceBuffer:
    return TraceBuffer(
        settle_delay=2.0, idle_timeout=30.0, max_age=300.0, max_traces=max_traces, max_spans_per_trace=1000,
        max_bytes=max_bytes, on_drop=lambda reason, n: drops.append((reason, n)),
    )


def record(trace_id: int, span_id: int, content: str = "", parent: int | None = 1) -> SpanRecord:
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": content} if content else {}
    return SpanRecord(trace_id, span_id, parent, "chat", 0, 1, attributes=attributes)


def put(buf: TraceBuffer, r: SpanRecord, now: float = 0.0) -> None:
    buf.add(r, r.trace_id, r.is_local_root, now)


class Holder(SpanProcessor):
    """Keeps every ended SDK span, as the intake does."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


@pytest.fixture()
def sdk() -> tuple[trace.Tracer, Holder]:
    holder = Holder()
    provider = TracerProvider()
    provider.add_span_processor(holder)
    return provider.get_tracer("app"), holder


# --- eviction by bytes ---------------------------------------------------------------------------


def test_over_max_bytes_evicts_oldest_traces_and_counts_them() -> None:
    drops: Drops = []
    one = estimate_size(record(1, 10, "x" * 1000))
    buf = make_buffer(drops, max_bytes=3 * 2 * one)  # room for three traces of two spans
    for trace_id in range(1, 6):
        for span_id in (10, 11):
            put(buf, record(trace_id, span_id, "x" * 1000))
    assert buf.trace_ids() == [3, 4, 5]
    assert drops == [("buffer_full", 2), ("buffer_full", 2)]
    assert buf.bytes == 6 * one <= buf.max_bytes
    put(buf, record(1, 12, "x" * 1000))  # an evicted trace's later span is late, not a new trace
    assert drops[-1] == ("late_span", 1) and 1 not in buf


def test_the_trace_being_added_to_is_never_the_one_evicted() -> None:
    drops: Drops = []
    one = estimate_size(record(1, 10, "x" * 1000))
    buf = make_buffer(drops, max_bytes=4 * one)
    put(buf, record(1, 10, "x" * 1000))  # trace 1 is the oldest ...
    put(buf, record(2, 20, "x" * 1000))
    for span_id in range(11, 14):  # ... and keeps growing: trace 2 goes, not trace 1
        put(buf, record(1, span_id, "x" * 1000))
    assert buf.trace_ids() == [1] and drops == [("buffer_full", 1)]
    assert buf.bytes == 4 * one


def test_count_and_byte_bounds_both_apply() -> None:
    drops: Drops = []
    buf = make_buffer(drops, max_bytes=10**9, max_traces=2)
    for trace_id in (1, 2, 3):
        put(buf, record(trace_id, 10, "x"))
    assert buf.trace_ids() == [2, 3] and drops == [("buffer_full", 1)]
    assert buf.bytes == 2 * estimate_size(record(2, 10, "x"))


def test_max_bytes_zero_disables_the_bound_but_still_sums() -> None:
    drops: Drops = []
    buf = make_buffer(drops, max_bytes=0)
    for trace_id in range(1, 51):
        put(buf, record(trace_id, 10, "x" * 100_000))
    assert len(buf) == 50 and not drops
    assert buf.bytes == 50 * estimate_size(record(1, 10, "x" * 100_000))


# --- a trace bigger than the budget --------------------------------------------------------------


def test_a_trace_bigger_than_the_budget_keeps_its_prefix_and_drops_further_spans() -> None:
    drops: Drops = []
    one = estimate_size(record(1, 10, "x" * 1000))
    buf = make_buffer(drops, max_bytes=3 * one + one // 2)
    put(buf, record(9, 90, "x" * 1000))  # an older trace: evicted to make room first
    for span_id in range(10, 20):
        put(buf, record(1, span_id, "x" * 1000))
    assert buf.trace_ids() == [1]
    assert drops == [("buffer_full", 1)] + [("trace_too_large", 1)] * 7
    assert buf.bytes == 3 * one <= buf.max_bytes
    assert [r.span_id for r in buf._entries[1].spans] == [10, 11, 12]  # evaluated on its prefix when complete
    assert buf._entries[1].dropped == 7  # and the completed trace says so (CompletedTrace.dropped)
    put(buf, record(2, 20, "x" * 10))  # other traces still get in
    assert buf.trace_ids() == [1, 2]
    put(buf, record(2, 21, "x" * 1000))  # and when they need the room, the big (oldest) trace goes
    assert buf.trace_ids() == [2] and drops[-1] == ("buffer_full", 3)
    assert buf.bytes == sum(estimate_size(r) for r in buf._entries[2].spans)


def test_a_completed_trace_says_how_many_of_its_spans_were_dropped() -> None:
    drops: Drops = []
    buf = TraceBuffer(settle_delay=0.0, idle_timeout=30.0, max_age=300.0, max_traces=10, max_spans_per_trace=3,
                      on_drop=lambda reason, n: drops.append((reason, n)))
    for span_id in range(10, 15):
        put(buf, record(1, span_id))
    put(buf, record(2, 20))
    done = {c.trace_id: c for c in buf.pop_all("flush")}
    assert (len(done[1].spans), done[1].dropped) == (3, 2) and done[2].dropped == 0
    assert drops == [("trace_too_large", 1)] * 2


def test_a_single_span_bigger_than_the_budget_is_dropped_without_an_entry() -> None:
    drops: Drops = []
    buf = make_buffer(drops, max_bytes=10_000)
    put(buf, record(1, 10, "x" * 5_000))
    put(buf, record(2, 20, "x" * 20_000))
    assert buf.trace_ids() == [1] and drops == [("trace_too_large", 1)]
    put(buf, record(2, 21, "x" * 100))  # its smaller spans still open an entry: not a late span
    assert buf.trace_ids() == [1, 2]


# --- sizes return to zero ------------------------------------------------------------------------


def test_bytes_return_to_zero_after_completion_eviction_and_flush() -> None:
    drops: Drops = []
    buf = make_buffer(drops, max_bytes=50_000)
    for trace_id in range(1, 30):
        put(buf, record(trace_id, 10, "x" * 3000, parent=None), now=float(trace_id))
        put(buf, record(trace_id, 11, "y" * 500), now=float(trace_id))
        buf.add_log(LogRecordData(trace_id, 11, 0, "gen_ai.choice", {"k": "v"}, {"content": "z" * 800}), float(trace_id))
    assert drops and all(reason == "buffer_full" for reason, _ in drops)
    assert 0 < buf.bytes <= 50_000
    assert buf.bytes == sum(e.bytes for e in buf._entries.values())
    done = buf.pop_complete(now=31.5)  # root ended + settle delay for the older half
    assert done and buf.bytes == sum(e.bytes for e in buf._entries.values())
    buf.pop_all("flush")
    assert buf.bytes == 0 and len(buf) == 0


# --- estimates of each kind of item --------------------------------------------------------------


def test_sdk_span_estimate_counts_fixed_cost_attributes_events_and_sequences(sdk: tuple[trace.Tracer, Holder]) -> None:
    tracer, holder = sdk
    tracer.start_span("chat").end()
    bare = estimate_size(holder.spans[-1])
    assert SDK_SPAN_COST <= bare < SDK_SPAN_COST + 200
    span = tracer.start_span("chat", attributes={"gen_ai.input.messages": "m" * 10_000})
    span.end()
    assert estimate_size(holder.spans[-1]) - bare >= 10_000 + ATTRIBUTE_COST
    span = tracer.start_span("chat", attributes={"gen_ai.response.finish_reasons": tuple(["r" * 1000] * 5)})
    span.end()
    assert estimate_size(holder.spans[-1]) - bare >= 5_000
    span = tracer.start_span("chat")
    span.add_event("gen_ai.choice", {"message": "e" * 4_000})
    span.end()
    assert estimate_size(holder.spans[-1]) - bare >= 4_000


def test_span_record_and_log_estimates_count_content() -> None:
    bare = estimate_size(SpanRecord(1, 2, None, "chat", 0, 1))
    assert RECORD_COST <= bare < RECORD_COST + 200
    content = SpanRecord(1, 2, None, "chat", 0, 1, attributes={"a": "m" * 10_000},
                         events=(SpanEvent("gen_ai.choice", 0, {"message": "e" * 3_000}),))
    assert estimate_size(content) - bare >= 13_000
    log = LogRecordData(1, 2, 0, "gen_ai.user.message", {"gen_ai.system": "openai"},
                        {"content": "c" * 2_000, "parts": [{"text": "p" * 1_000}] * 3})
    assert estimate_size(log) >= LOG_COST + 2_000 + 3_000
    assert estimate_size(LogRecordData(1, 2, 0, None, {}, None)) == LOG_COST


def test_long_sequences_are_sized_from_a_sample_with_the_right_total() -> None:
    many = SpanRecord(1, 2, None, "s", 0, 1, attributes={"ids": tuple(f"{i:010d}" for i in range(10_000))})
    per_item = sys.getsizeof("0000000000") + 8  # the string and its tuple slot
    assert 0.9 < (estimate_size(many) - estimate_size(SpanRecord(1, 2, None, "s", 0, 1))) / (10_000 * per_item) < 1.2
    body = {f"key{i:06d}": "v" * 100 for i in range(10_000)}
    log = LogRecordData(1, 2, 0, "gen_ai.choice", {}, body)
    per_entry = sys.getsizeof("key000000") + sys.getsizeof("v" * 100) + ATTRIBUTE_COST
    assert 0.9 < (estimate_size(log) - LOG_COST) / (10_000 * per_entry) < 1.2


# --- estimate vs tracemalloc ---------------------------------------------------------------------


def agent_run(tracer: trace.Tracer, seed: int, turns: int = 3) -> None:
    """A GenAI agent run as an instrumentation makes one: content serialised per call (its own strings)."""
    system = "You are a support agent. Use the tools to look up orders and refund them. " * 20
    history = [{"role": "user", "content": f"Order #{seed}: the kettle arrived broken, refund it."}]
    root = tracer.start_span("invoke_agent support", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support",
        "gen_ai.input.messages": json.dumps(history)})
    ctx = trace.set_span_in_context(root)
    for turn in range(turns):
        call_id = f"call_{seed}_{turn}"
        chat = tracer.start_span("chat gpt-4o-mini", context=ctx, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.input.messages": json.dumps([{"role": "system", "content": system}] + history),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "tool_calls": [{"id": call_id, "name": "lookup_order"}]}]),
            "gen_ai.response.finish_reasons": ("tool_call",),
            "gen_ai.usage.input_tokens": 600 + 40 * turn, "gen_ai.usage.output_tokens": 60})
        chat.add_event("gen_ai.choice", {"index": 0, "finish_reason": "tool_call"})
        chat.end()
        result = json.dumps({"order_id": seed, "status": "delivered", "items": [{"sku": f"kettle-{turn}", "price": 39.9}]})
        tool = tracer.start_span("execute_tool lookup_order", context=ctx, attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order", "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.call.arguments": json.dumps({"order_id": seed}), "gen_ai.tool.call.result": result})
        tool.end()
        history += [{"role": "assistant", "content": f"calling lookup_order {call_id}"}, {"role": "tool", "content": result}]
    root.end()


def measured_and_estimated(build: Callable[[], list[Any]]) -> tuple[int, int]:
    """Heap bytes (tracemalloc) that ``build``'s items keep alive, and their summed estimate."""
    build()  # warm caches (interned names, type caches) so that they are not counted
    gc.collect()
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        items = build()
        gc.collect()
        measured = tracemalloc.get_traced_memory()[0] - before - sys.getsizeof(items)
    finally:
        if started:
            tracemalloc.stop()
    return measured, sum(estimate_size(item) for item in items)


def test_estimate_is_close_to_tracemalloc_for_realistic_sdk_spans(sdk: tuple[trace.Tracer, Holder]) -> None:
    tracer, holder = sdk

    def build() -> list[Any]:
        holder.spans = []
        for seed in range(100):
            agent_run(tracer, seed)
        return holder.spans

    measured, estimated = measured_and_estimated(build)
    assert 1.0 <= estimated / measured <= 1.25, (estimated, measured)  # never under: the bound must hold


def test_estimate_is_close_to_tracemalloc_for_span_records(sdk: tuple[trace.Tracer, Holder]) -> None:
    tracer, holder = sdk

    def build() -> list[Any]:
        holder.spans = []
        for seed in range(100):
            agent_run(tracer, seed)
        spans, holder.spans = holder.spans, []
        # Records own their content, as records decoded from OTLP do (copies of every string).
        return [from_readable_span(s) for s in _with_own_strings(spans)]

    measured, estimated = measured_and_estimated(build)
    assert 0.95 <= estimated / measured <= 1.3, (estimated, measured)


def test_estimate_is_close_to_tracemalloc_for_log_records() -> None:
    def own(text: str) -> str:
        return (text + ".")[:-1]  # a string of its own, as a decoder or the SDK's log record makes

    def build() -> list[Any]:
        return [
            LogRecordData((1 << 100) + i, (1 << 60) + i, 1_700_000_000_000_000_000 + i, own("gen_ai.choice"),
                          {own("gen_ai.system"): own("openai"), own("event.name"): own("gen_ai.choice")},
                          {own("index"): 0, own("finish_reason"): own("stop"),
                           own("message"): {own("role"): own("assistant"), own("content"): own(f"answer {i} " * 40)}})
            for i in range(1000)
        ]

    measured, estimated = measured_and_estimated(build)
    assert 1.0 <= estimated / measured <= 1.25, (estimated, measured)


def _with_own_strings(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    """Give every span's attribute keys and string values their own copies (as a decoder would)."""
    for span in spans:
        raw = span._attributes._dict  # type: ignore[attr-defined]
        copied = {(k + ".")[:-1]: ((v + ".")[:-1] if isinstance(v, str) else v) for k, v in raw.items()}
        raw.clear()
        raw.update(copied)
    return spans


# --- the pipeline applies the bound ----------------------------------------------------------------


def test_pipeline_evicts_by_bytes_and_counts_buffer_full(sdk: tuple[trace.Tracer, Holder]) -> None:
    tracer, holder = sdk
    settings = Settings.load(env={}, max_buffered_bytes=200_000, max_traces_per_second=0,
                             settle_delay_seconds=3600, idle_timeout_seconds=3600, max_trace_age_seconds=3600)
    pipeline = Pipeline(settings, [LoopDetection()])  # not started: the test drives the collector
    for seed in range(40):
        agent_run(tracer, seed)
    for span in holder.spans:
        pipeline.intake.offer_span(span)
    pipeline._collect_once()
    assert 0 < pipeline.buffer.bytes <= 200_000
    assert 0 < len(pipeline.buffer) < 40
    assert pipeline.stats.dropped.snapshot().get(("buffer_full",)) == 40 - len(pipeline.buffer)
