"""Which traces get buffered, and which completed agent traces get evaluated.

Admission (hot path, first GenAI span of a trace): ``AdmissionRate`` adapts a
trace-id ratio so that about ``max_traces_per_second`` new traces are buffered
and assembled; the rest are rejected on arrival, at the cost of a dict look-up.

Head rule: the trace-id ratio of OpenTelemetry's ``TraceIdRatioBased`` sampler
(the low 64 bits of the trace id below ``round(rate * 2**64)``), so every
process, replica and the SDK itself agree on a trace. Tail rules keep errored,
tool-failing and slow traces whatever the ratio. A token bucket caps the rate.
Every decision carries a reason from a small fixed set, for metrics.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..model import AgentTrace

TRACE_ID_LIMIT = (1 << 64) - 1


def ratio_bound(rate: float) -> int:
    """The same bound as ``opentelemetry.sdk.trace.sampling.TraceIdRatioBased``."""
    return round(rate * (TRACE_ID_LIMIT + 1))


def trace_id_sampled(trace_id: int, rate: float) -> bool:
    return trace_id & TRACE_ID_LIMIT < ratio_bound(rate)


@dataclass(frozen=True)
class Decision:
    sampled: bool
    reason: str


class TokenBucket:
    """``rate`` tokens per second, up to ``burst``. Thread-safe."""

    def __init__(self, rate: float, burst: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.capacity = max(1.0, burst if burst is not None else rate)
        self._tokens = self.capacity
        self._clock = clock
        self._last = clock()
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            now = self._clock()
            self._tokens = min(self.capacity, self._tokens + (now - self._last) * self.rate)
            self._last = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False


class Sampler:
    def __init__(
        self,
        rate: float = 1.0,
        *,
        keep_errors: bool = True,
        keep_tool_failures: bool = True,
        slow_seconds: float | None = None,
        max_per_second: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self.keep_errors = keep_errors
        self.keep_tool_failures = keep_tool_failures
        self.slow_seconds = slow_seconds
        self.bucket = TokenBucket(max_per_second, clock=clock) if max_per_second > 0 else None

    def decide(self, trace: AgentTrace, *, rate_limit: bool = True) -> Decision:
        """``rate_limit=False`` skips the token bucket (the shutdown drain: the runs are already paid for)."""
        reason = self._tail_reason(trace)
        if reason is None:
            if not trace_id_sampled(int(trace.trace_id, 16), self.rate):
                return Decision(False, "ratio")
            reason = "ratio"
        if rate_limit and self.bucket is not None and not self.bucket.take():
            return Decision(False, "rate_limited")
        return Decision(True, reason)

    def _tail_reason(self, trace: AgentTrace) -> str | None:
        if self.keep_errors and trace.status == "error":
            return "error"
        if self.keep_tool_failures and trace.has_tool_failure:
            return "tool_failure"
        if self.slow_seconds is not None and trace.duration_s >= self.slow_seconds:
            return "slow"
        return None


class AdmissionRate:
    """The trace-id ratio that admits about ``target`` new traces per second (0: all).

    The collector thread feeds it the running count of new GenAI traces seen
    (admitted or not) every tick; the hot path compares a new trace's id with
    ``bound``, the same ``TraceIdRatioBased`` rule as sampling, so every span of
    a trace, every process and every replica decide alike while the ratio holds,
    and the admitted traces are the ones a lower ``sample_rate`` would pick. The
    rate seen is smoothed over a few ticks. Until the ratio has caught up with a
    burst (at start, or when traffic jumps), no more than ``BURST`` times the
    target is admitted per interval: first come, first admitted.
    """

    INTERVAL_SECONDS = 0.1
    SMOOTHING = 0.5
    """Weight of the newest interval in the smoothed rate (about 0.3 s of memory)."""
    BURST = 2.0

    def __init__(self, target: float, now: float) -> None:
        self.target = target
        self.ratio = 1.0
        self.bound = ratio_bound(1.0)
        self.rate: float | None = None
        """Smoothed new traces seen per second; None before the first interval."""
        self.cap = max(1.0, self.BURST * target * self.INTERVAL_SECONDS) if target > 0 else float("inf")
        """Most traces admitted per interval."""
        self.admitted = 0
        """Admitted in the current interval (approximate: app threads race on it, harmlessly)."""
        self._last_time = now
        self._last_seen = 0

    def update(self, seen: int, now: float) -> None:
        """``seen``: new traces seen so far (a running count)."""
        elapsed = now - self._last_time
        if self.target <= 0 or elapsed < self.INTERVAL_SECONDS:
            return
        current = (seen - self._last_seen) / elapsed
        self.rate = current if self.rate is None else self.SMOOTHING * current + (1 - self.SMOOTHING) * self.rate
        self._last_time, self._last_seen = now, seen
        self.ratio = 1.0 if self.rate <= self.target else self.target / self.rate
        self.bound = ratio_bound(self.ratio)
        self.admitted = 0

    def admits(self, trace_id: int) -> bool:
        """Admit a new trace: under the ratio, and within this interval's cap."""
        if trace_id & TRACE_ID_LIMIT >= self.bound or self.admitted >= self.cap:
            return False
        self.admitted += 1
        return True
