"""``TraceBuffer.pop_complete`` finds complete traces through deadline-ordered queues; it must complete
exactly the traces, with exactly the reasons and in exactly the order, that a scan of every buffered trace
would (the rule in the module doc), whatever the interleaving of spans, roots, evictions and ticks."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_agent_eval.pipeline.buffer import (
    IDLE_TIMEOUT,
    MAX_AGE,
    ROOT_ENDED,
    TraceBuffer,
)

SETTLE, IDLE, MAX_AGE_SECONDS = 2.0, 5.0, 12.0


@dataclass
class Span:
    name: str = "span"
    attributes: dict = field(default_factory=dict)
    events: tuple = ()


class ScanReference:
    """The rule, checked trace by trace on every tick (what the buffer did before its queues)."""

    def __init__(self, max_traces: int) -> None:
        self.max_traces = max_traces
        self.entries: dict[int, dict] = {}  # insertion order
        self.completed: set[int] = set()

    def add(self, trace_id: int, root: bool, now: float) -> None:
        entry = self.entries.get(trace_id)
        if entry is None:
            if trace_id in self.completed:
                return
            if len(self.entries) >= self.max_traces:
                oldest = next(iter(self.entries))
                del self.entries[oldest]
                self.completed.add(oldest)
            entry = self.entries[trace_id] = {"first": now, "last": now, "root": None}
        entry["last"] = now
        if root:
            entry["root"] = now

    def pop_complete(self, now: float) -> list[tuple[int, str]]:
        done = []
        for trace_id, entry in list(self.entries.items()):
            if entry["root"] is not None and now - entry["root"] >= SETTLE:
                reason = ROOT_ENDED
            elif now - entry["last"] >= IDLE:
                reason = IDLE_TIMEOUT
            elif now - entry["first"] >= MAX_AGE_SECONDS:
                reason = MAX_AGE
            else:
                continue
            del self.entries[trace_id]
            self.completed.add(trace_id)
            done.append((trace_id, reason))
        return done


steps = st.lists(
    st.tuples(
        st.sampled_from(["span", "span", "root", "tick"]),
        st.integers(min_value=1, max_value=8),  # trace id
        st.floats(min_value=0.0, max_value=4.0),  # time passing before the step
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(steps, st.integers(min_value=2, max_value=6))
def test_pop_complete_matches_a_scan_of_every_trace(script: list[tuple[str, int, float]], max_traces: int) -> None:
    buffer = TraceBuffer(settle_delay=SETTLE, idle_timeout=IDLE, max_age=MAX_AGE_SECONDS, max_traces=max_traces,
                         max_spans_per_trace=1_000, on_drop=lambda reason, n: None)
    reference = ScanReference(max_traces)
    now = 0.0
    for action, trace_id, elapsed in script:
        now += elapsed
        if action == "tick":
            got = [(done.trace_id, done.reason) for done in buffer.pop_complete(now)]
            assert got == reference.pop_complete(now), (now, got)
        else:
            buffer.add(Span(), trace_id, action == "root", now)
            reference.add(trace_id, action == "root", now)
        assert buffer.trace_ids() == list(reference.entries)
    now += MAX_AGE_SECONDS
    assert [(d.trace_id, d.reason) for d in buffer.pop_complete(now)] == reference.pop_complete(now)
    assert len(buffer) == 0


def test_a_tick_reads_only_what_completes() -> None:
    """Many buffered traces, none due: a tick completes nothing and leaves every trace buffered; the one whose
    root ended completes on its settle deadline, not before."""
    buffer = TraceBuffer(settle_delay=SETTLE, idle_timeout=IDLE, max_age=MAX_AGE_SECONDS, max_traces=50_000,
                         max_spans_per_trace=10, on_drop=lambda reason, n: None)
    for trace_id in range(1, 20_001):
        buffer.add(Span(), trace_id, False, 1.0)
    buffer.add(Span(), 7, True, 1.5)
    assert buffer.pop_complete(3.4) == []
    (done,) = buffer.pop_complete(3.5)
    assert (done.trace_id, done.reason, len(done.spans)) == (7, ROOT_ENDED, 2)
    assert len(buffer) == 19_999
    assert [d.reason for d in buffer.pop_complete(6.0)] == [IDLE_TIMEOUT] * 19_999
