"""Judge cost and health as Prometheus metrics (prometheus-client, injectable registry).

Labels: evaluator, model, type, outcome, reason: all from small fixed sets.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0)


class JudgeMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.tokens = Counter(
            "agent_eval_judge_tokens", "Judge tokens by evaluator, model and type (input, output)",
            ["evaluator", "model", "type"], registry=registry,
        )
        self.cost = Counter(
            "agent_eval_judge_cost_usd", "Estimated judge cost in USD (OTEL_AGENT_EVAL_JUDGE_PRICES)",
            ["evaluator", "model"], registry=registry,
        )
        self.duration = Histogram(
            "agent_eval_judge_request_duration_seconds", "Duration of one judge HTTP request",
            ["model"], buckets=LATENCY_BUCKETS, registry=registry,
        )
        self.requests = Counter(
            "agent_eval_judge_requests", "Judge HTTP requests by outcome: ok, retry, or the final failure reason",
            ["model", "outcome"], registry=registry,
        )
        self.errors = Counter(
            "agent_eval_judge_errors", "Judge evaluations ending in an error result, by reason",
            ["evaluator", "reason"], registry=registry,
        )
        self.budget_skips = Counter(
            "agent_eval_judge_budget_skips", "Judge evaluations skipped because the hourly budget was spent",
            ["evaluator"], registry=registry,
        )
        self.cache_hits = Counter(
            "agent_eval_judge_cache_hits", "Judge answers served from the cache (no request)",
            ["evaluator"], registry=registry,
        )
        # multiprocess_mode: how prometheus-client's multiprocess mode combines the workers' values (the most
        # spent budget, any open breaker), and only the live workers'.
        self.budget_remaining = Gauge(
            "agent_eval_judge_budget_remaining_ratio", "Share of the hourly judge budget left (1 without a budget)",
            registry=registry, multiprocess_mode="livemin",
        )
        self.budget_remaining.set(1.0)
        self._watched: dict[str, tuple[Gauge, Callable[[], float]]] = {}
        self.breaker_state = Gauge(
            "agent_eval_judge_breaker_state", "Judge circuit breaker: 0 closed, 1 open (failing fast), 2 half-open (one probe)",
            registry=registry, multiprocess_mode="livemax",
        )
        self.breaker_rejections = Counter(
            "agent_eval_judge_breaker_rejections",
            "Judge evaluations failed fast (error, judge_unavailable) while the breaker was open: no request sent",
            ["evaluator"], registry=registry,
        )

    def watch_budget(self, remaining: Callable[[], float]) -> None:
        """Read the budget at scrape time, so the gauge never lags."""
        self._watched["budget"] = (self.budget_remaining, remaining)
        self.budget_remaining.set_function(remaining)

    def watch_breaker(self, state: Callable[[], int]) -> None:
        """Read the breaker state at scrape time (it moves from open to half-open on its own clock)."""
        self._watched["breaker"] = (self.breaker_state, state)
        self.breaker_state.set_function(state)

    def publish(self) -> None:
        """Write the watched gauges' values now: in prometheus-client's multiprocess mode a gauge read at scrape
        time is read from the files, where only ``set`` writes (the pipeline's ``publish`` hook calls this)."""
        for gauge, read in self._watched.values():
            gauge.set(read())
