"""Pipeline health: intake, assembly, sampling, drops, queue, evaluator errors and latency, LLM judge."""

from __future__ import annotations

from typing import Any

from .common import SERVICE_AGENT, new_dashboard, query, row, stat_panel, timeseries_panel, to_json

RATE = "$__rate_interval"
EVALUATOR = 'evaluator=~"$evaluator"'


def _quantile(q: float) -> str:
    return (
        f"histogram_quantile({q}, sum by (evaluator, le) "
        f'(rate(agent_eval_evaluation_duration_seconds_bucket{{evaluator=~"$evaluator"}}[{RATE}])))'
    )


def _judge_quantile(q: float) -> str:
    return (
        f"histogram_quantile({q}, sum by (model, le) "
        f"(rate(agent_eval_judge_request_duration_seconds_bucket[{RATE}])))"
    )


def _judge_error_share(window: str) -> str:
    """Judge errors / judged traces (pass + fail + error) per evaluator, as in AgentEvalJudgeErrors."""
    return (
        f"sum by (evaluator) (rate(agent_eval_judge_errors_total{{{EVALUATOR}}}[{window}]))\n"
        "/ on (evaluator)\n"
        f'sum by (evaluator) (rate(agent_eval_results_total{{{EVALUATOR}, outcome=~"pass|fail|error"}}[{window}]))'
    )


def _cache_hit_ratio(window: str) -> str:
    """Answers served from the cache / answers needed (cache hits + requests by final outcome), all evaluators."""
    hits = f"sum (rate(agent_eval_judge_cache_hits_total[{window}]))"
    return f'{hits}\n/\n({hits} + sum (rate(agent_eval_judge_requests_total{{outcome!="retry"}}[{window}])))'


def build() -> dict[str, Any]:
    """The pipeline health dashboard's JSON model."""
    d = new_dashboard(
        "agent-eval-pipeline",
        "Agent evaluation: pipeline health",
        "Health of the otel-agent-eval processor: spans in, traces assembled, sampling, drops, "
        "queues, evaluator errors and latency, and the LLM judge: requests, latency, tokens, cost, budget, "
        "errors and cache.",
    )
    d = (
        d.with_row(row("Now"))
        .with_panel(
            stat_panel(
                "Queue depth", "Traces waiting for evaluation.", [query("sum (agent_eval_queue_depth)", instant=True)], width=4
            )
        )
        .with_panel(
            stat_panel(
                "Buffered traces",
                "Traces being assembled.",
                [query("sum (agent_eval_buffered_traces)", instant=True)],
                width=4,
            )
        )
        .with_panel(
            stat_panel(
                "Buffered bytes",
                "Estimated bytes of buffered spans, largest instance (bounded by OTEL_AGENT_EVAL_MAX_BUFFERED_BYTES).",
                [query("max (agent_eval_buffered_bytes)", instant=True)],
                unit="bytes",
                width=4,
            )
        )
        .with_panel(
            stat_panel(
                "Admission ratio",
                "Lowest share of new traces admitted by any instance (1: all; below 1 the app produces more new "
                "traces per second than OTEL_AGENT_EVAL_MAX_TRACES_PER_SECOND).",
                [query("min (agent_eval_admission_ratio)", instant=True)],
                width=4,
            )
        )
        .with_panel(
            stat_panel(
                "Dropped (1h)",
                "Traces and agent runs not evaluated over the last hour, all reasons (no_agent included).",
                [query("sum (increase(agent_eval_dropped_total[1h]))", instant=True)],
                decimals=0,
                width=4,
            )
        )
        .with_panel(
            stat_panel(
                "Processor errors (1h)",
                "Internal errors caught on the hot path.",
                [query("sum (increase(agent_eval_processor_errors_total[1h]))", instant=True)],
                decimals=0,
                width=4,
            )
        )
        .with_row(row("Intake and assembly"))
        .with_panel(
            timeseries_panel(
                "Spans received and kept",
                "Spans seen by the processor and spans kept for evaluation, per second.",
                [
                    query(f"sum (rate(agent_eval_spans_received_total[{RATE}]))", "received"),
                    query(f"sum (rate(agent_eval_spans_kept_total[{RATE}]))", "kept", ref="B"),
                    query(f"sum (rate(agent_eval_late_spans_total[{RATE}]))", "late", ref="C"),
                    query(f"sum (rate(agent_eval_log_records_kept_total[{RATE}]))", "content log records", ref="D"),
                ],
                unit="ops",
            )
        )
        .with_panel(
            timeseries_panel(
                "Admission of new traces",
                "New GenAI traces per second admitted (buffered and assembled) or rejected on arrival above "
                "OTEL_AGENT_EVAL_MAX_TRACES_PER_SECOND.",
                [query(f"sum by (decision) (rate(agent_eval_admission_decisions_total[{RATE}]))", "{{decision}}")],
                unit="ops",
            )
        )
        .with_panel(
            timeseries_panel(
                "Traces completed by reason",
                "Why trace assembly finished.",
                [query(f"sum by (reason) (rate(agent_eval_traces_completed_total[{RATE}]))", "{{reason}}")],
                unit="ops",
            )
        )
        .with_panel(
            timeseries_panel(
                "Agent traces assembled",
                "Agent invocations assembled per second, evaluated or not.",
                [
                    query(
                        f"sum by (service, agent) (rate(agent_eval_agent_traces_total{{{SERVICE_AGENT}}}[{RATE}]))",
                        "{{service}}/{{agent}}",
                    )
                ],
                unit="ops",
            )
        )
        .with_panel(
            timeseries_panel(
                "Sampling decisions",
                "Head/tail sampling decisions by decision and reason.",
                [
                    query(
                        f"sum by (decision, reason) (rate(agent_eval_sampling_decisions_total[{RATE}]))",
                        "{{decision}} {{reason}}",
                    )
                ],
                unit="ops",
            )
        )
        .with_row(row("Drops and backlog"))
        .with_panel(
            timeseries_panel(
                "Dropped by reason",
                "Traces/agent runs (trace: ...) and spans (span: ...) dropped per second. "
                "no_agent drops are traces without an agent and are expected.",
                [
                    query(f"sum by (reason) (rate(agent_eval_dropped_total[{RATE}]))", "trace: {{reason}}"),
                    query(f"sum by (reason) (rate(agent_eval_spans_dropped_total[{RATE}]))", "span: {{reason}}", ref="B"),
                ],
                unit="ops",
            )
        )
        .with_panel(
            timeseries_panel(
                "Dropped at the producers' span limits",
                "Attributes and span events the instrumented apps' SDKs dropped at their span limits (128 a span by "
                "default), and JSON values cut short by a value length limit (not read), per second, on "
                "the spans of assembled agent runs: those runs were evaluated on less than was recorded. Raise "
                "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT / OTEL_SPAN_EVENT_COUNT_LIMIT / OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT in "
                "the apps.",
                [query(f"sum by (kind) (rate(agent_eval_span_limit_dropped_total[{RATE}]))", "{{kind}}")],
                unit="ops",
            )
        )
        .with_panel(
            timeseries_panel(
                "Queue depth and buffered traces",
                "Traces waiting for evaluation and traces being assembled.",
                [
                    query("sum (agent_eval_queue_depth)", "queue depth"),
                    query("sum (agent_eval_buffered_traces)", "buffered traces", ref="B"),
                ],
            )
        )
        .with_row(row("Evaluators"))
        .with_panel(
            timeseries_panel(
                "Evaluator errors",
                "Evaluator runs that raised or timed out, per second.",
                [
                    query(
                        "sum by (evaluator, reason) "
                        f'(rate(agent_eval_evaluator_errors_total{{evaluator=~"$evaluator"}}[{RATE}]))',
                        "{{evaluator}} {{reason}}",
                    ),
                    query(f"sum (rate(agent_eval_processor_errors_total[{RATE}]))", "processor", ref="B"),
                    query(f"sum by (sink) (rate(agent_eval_sink_errors_total[{RATE}]))", "sink {{sink}}", ref="C"),
                ],
                unit="ops",
            )
        )
        .with_panel(
            timeseries_panel(
                "Evaluation duration",
                "p50 and p95 of evaluator run time.",
                [
                    query(_quantile(0.5), "p50 {{evaluator}}"),
                    query(_quantile(0.95), "p95 {{evaluator}}", ref="B"),
                ],
                unit="s",
            )
        )
        .with_row(row("LLM judge"))
        .with_panel(
            stat_panel(
                "Judge budget remaining",
                "Share of the hourly judge budget left (the tighter of the token and USD budgets), lowest "
                "instance. 1 without a budget; at 0 judge evaluators are skipped (AgentEvalJudgeBudgetExhausted).",
                [query("min (agent_eval_judge_budget_remaining_ratio)", instant=True)],
                unit="percentunit",
                decimals=0,
                width=5,
            )
        )
        .with_panel(
            stat_panel(
                "Judge cost (1h)",
                "Estimated judge cost over the last hour (needs a price for the model: OTEL_AGENT_EVAL_JUDGE_PRICES).",
                [query(f"sum (increase(agent_eval_judge_cost_usd_total{{{EVALUATOR}}}[1h]))", instant=True)],
                unit="currencyUSD",
                decimals=2,
                width=5,
            )
        )
        .with_panel(
            stat_panel(
                "Judge cost per evaluated trace (1h)",
                "Estimated judge cost over the last hour divided by the agent traces evaluated in that hour "
                "(judge evaluators selected above; needs OTEL_AGENT_EVAL_JUDGE_PRICES).",
                [
                    query(
                        f"sum (increase(agent_eval_judge_cost_usd_total{{{EVALUATOR}}}[1h]))"
                        " / sum (increase(agent_eval_traces_evaluated_total[1h]))",
                        instant=True,
                    )
                ],
                unit="currencyUSD",
                decimals=4,
                width=4,
            )
        )
        .with_panel(
            stat_panel(
                "Judge errors (1h)",
                "Judge evaluations that ended in an error result over the last hour, all reasons.",
                [query(f"sum (increase(agent_eval_judge_errors_total{{{EVALUATOR}}}[1h]))", instant=True)],
                decimals=0,
                width=5,
            )
        )
        .with_panel(
            stat_panel(
                "Judge cache hit ratio (1h)",
                "Judge answers served from the cache / answers needed (cache hits + requests), all judge evaluators.",
                [query(_cache_hit_ratio("1h"), instant=True)],
                unit="percentunit",
                decimals=1,
                width=5,
            )
        )
        .with_panel(
            timeseries_panel(
                "Judge requests by outcome",
                "Judge HTTP requests per second by model and outcome: ok, retry (a retried attempt), or the "
                "final failure reason (judge_unavailable, judge_timeout, judge_rejected, rate_limited_exhausted, ...).",
                [
                    query(
                        f"sum by (model, outcome) (rate(agent_eval_judge_requests_total[{RATE}]))",
                        "{{model}} {{outcome}}",
                    )
                ],
                unit="ops",
            )
        )
        .with_panel(
            timeseries_panel(
                "Judge latency",
                "p50 and p95 of one judge HTTP request (one attempt) per model.",
                [
                    query(_judge_quantile(0.5), "p50 {{model}}"),
                    query(_judge_quantile(0.95), "p95 {{model}}", ref="B"),
                ],
                unit="s",
            )
        )
        .with_panel(
            timeseries_panel(
                "Judge tokens by type and model",
                "Judge tokens per second by model and type (input, output); cached answers cost none.",
                [
                    query(
                        f"sum by (model, type) (rate(agent_eval_judge_tokens_total{{{EVALUATOR}}}[{RATE}]))",
                        "{{model}} {{type}}",
                    )
                ],
            )
        )
        .with_panel(
            timeseries_panel(
                "Judge cost (USD/hour)",
                "Estimated judge spend rate per model, in USD per hour (models without a price are not counted).",
                [
                    query(
                        f"sum by (model) (rate(agent_eval_judge_cost_usd_total{{{EVALUATOR}}}[{RATE}])) * 3600",
                        "{{model}}",
                    )
                ],
                unit="currencyUSD",
            )
        )
        .with_panel(
            timeseries_panel(
                "Judge errors by reason",
                "Judge evaluations ending in an error result per second, by evaluator and reason "
                "(see docs/judge.md, Failure reasons).",
                [
                    query(
                        f"sum by (evaluator, reason) (rate(agent_eval_judge_errors_total{{{EVALUATOR}}}[{RATE}]))",
                        "{{evaluator}} {{reason}}",
                    )
                ],
                unit="ops",
            )
        )
        .with_panel(
            timeseries_panel(
                "Judge error share by evaluator",
                "Judge errors / judged traces (pass + fail + error) per judge evaluator: what the "
                "AgentEvalJudgeErrors alert compares with its threshold.",
                [query(_judge_error_share(RATE), "{{evaluator}}")],
                unit="percentunit",
                min_val=0,
            )
        )
        .with_panel(
            timeseries_panel(
                "Judge budget remaining",
                "Share of the hourly judge budget left per instance; 1 without a budget.",
                [query("min by (instance) (agent_eval_judge_budget_remaining_ratio)", "{{instance}}")],
                unit="percentunit",
                min_val=0,
                max_val=1,
            )
        )
        .with_panel(
            timeseries_panel(
                "Judge budget skips",
                "Judge evaluations skipped per second because the hourly budget was spent (result skipped, "
                "reason budget_exhausted).",
                [
                    query(
                        f"sum by (evaluator) (rate(agent_eval_judge_budget_skips_total{{{EVALUATOR}}}[{RATE}]))",
                        "{{evaluator}}",
                    )
                ],
                unit="ops",
            )
        )
        .with_panel(
            timeseries_panel(
                "Judge cache hit ratio",
                "Judge answers served from the cache (no request, no tokens) / answers needed, all judge evaluators.",
                [query(_cache_hit_ratio(RATE), "cache hits")],
                unit="percentunit",
                min_val=0,
                max_val=1,
                width=24,
            )
        )
    )
    return to_json(d)
