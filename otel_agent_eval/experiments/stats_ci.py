"""Confidence intervals and tests for pass rates: Wilson score interval, two-proportion z-test.

Pure functions of counts; used by experiments and the offline gates. (The Prometheus
recording rules compute the same Wilson bounds in PromQL, see deploy/prometheus.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

Z_95 = 1.959963984540054
"""The two-sided 95% normal quantile."""


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


def wilson_interval(passed: int, total: int, z: float = Z_95) -> Interval | None:
    """Wilson score interval of ``passed / total``; None when ``total`` is 0 (no evidence).

    Unlike the normal approximation it stays inside [0, 1] and is honest at small n and
    at rates near 0 or 1, which is where agent pass rates live.
    """
    if total <= 0:
        return None
    if not 0 <= passed <= total:
        raise ValueError(f"passed ({passed}) must be within [0, total ({total})]")
    p = passed / total
    z2 = z * z
    denominator = 1 + z2 / total
    center = (p + z2 / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total)) / denominator
    return Interval(max(0.0, center - half), min(1.0, center + half))


@dataclass(frozen=True)
class ProportionTest:
    difference: float
    """``p_b - p_a``."""
    z: float
    p_value: float
    """Two-sided."""


def two_proportion_test(passed_a: int, total_a: int, passed_b: int, total_b: int) -> ProportionTest | None:
    """Pooled two-proportion z-test of ``b`` against ``a``; None when either side has no results."""
    if total_a <= 0 or total_b <= 0:
        return None
    pa, pb = passed_a / total_a, passed_b / total_b
    pooled = (passed_a + passed_b) / (total_a + total_b)
    variance = pooled * (1 - pooled) * (1 / total_a + 1 / total_b)
    if variance == 0:
        return ProportionTest(pb - pa, 0.0, 1.0)  # both all-pass or all-fail: no evidence of a difference
    z = (pb - pa) / math.sqrt(variance)
    return ProportionTest(pb - pa, z, math.erfc(abs(z) / math.sqrt(2)))


@dataclass(frozen=True)
class Gate:
    """Fail a run when ``evaluator``'s pass rate (or, with ``lower_bound``, the lower bound of its
    Wilson 95% interval) is below ``minimum``. ``--gate`` and ``--gate-lower-bound`` of
    ``evaluate`` and ``experiment``."""

    evaluator: str
    minimum: float
    lower_bound: bool = False

    FLAGS: ClassVar[dict[bool, str]] = {False: "--gate", True: "--gate-lower-bound"}

    @classmethod
    def parse(cls, text: str, *, lower_bound: bool = False) -> Gate:
        """``EVALUATOR=MIN`` (``EVALUATOR`` alone: 1.0); the error names the flag."""
        name, _, rate = text.partition("=")
        flag = cls.FLAGS[lower_bound]
        try:
            value = float(rate) if rate else 1.0
        except ValueError:
            raise ValueError(f"{flag} {text!r}: expected EVALUATOR=MIN_PASS_RATE, e.g. tool_call_accuracy=0.9") from None
        if not name.strip() or not 0.0 <= value <= 1.0:
            raise ValueError(f"{flag} {text!r}: expected EVALUATOR=MIN_PASS_RATE with a rate within [0, 1]")
        return cls(name.strip(), value, lower_bound)

    def failure(self, passed: int, judged: int) -> str | None:
        """Why the gate fails for ``passed`` of ``judged`` (pass + fail) results, or None when it holds."""
        if judged <= 0:
            return f"{self.evaluator}: no pass/fail result to gate on"
        if self.lower_bound:
            value, what = wilson_interval(passed, judged).low, "pass-rate lower bound (Wilson 95%)"  # type: ignore[union-attr]
        else:
            value, what = passed / judged, "pass rate"
        return f"{self.evaluator}: {what} {value:.1%} < {self.minimum:.1%}" if value < self.minimum else None
