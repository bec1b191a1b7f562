"""Confidence intervals and tests for pass rates: Wilson score interval, two-proportion z-test.

Pure functions of counts; used by experiments and the offline gates. (The Prometheus
recording rules compute the same Wilson bounds in PromQL, see deploy/prometheus.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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
