"""Pipeline health: intake, assembly, sampling, drops, queue, evaluator errors and latency."""

from __future__ import annotations

from typing import Any

from .common import AGENT, new_dashboard, query, row, stat_panel, timeseries_panel, to_json

RATE = "$__rate_interval"


def _quantile(q: float) -> str:
    return (
        f"histogram_quantile({q}, sum by (evaluator, le) "
        f'(rate(agent_eval_evaluation_duration_seconds_bucket{{evaluator=~"$evaluator"}}[{RATE}])))'
    )


def build() -> dict[str, Any]:
    """The pipeline health dashboard's JSON model."""
    d = new_dashboard(
        "agent-eval-pipeline",
        "Agent evaluation: pipeline health",
        "Health of the otel-agent-eval processor: spans in, traces assembled, sampling, drops, "
        "queues, evaluator errors and latency.",
    )
    d = (
        d.with_row(row("Now"))
        .with_panel(
            stat_panel("Queue depth", "Traces waiting for evaluation.", [query("sum (agent_eval_queue_depth)", instant=True)])
        )
        .with_panel(
            stat_panel(
                "Buffered traces",
                "Traces being assembled.",
                [query("sum (agent_eval_buffered_traces)", instant=True)],
            )
        )
        .with_panel(
            stat_panel(
                "Dropped (1h)",
                "Traces and agent runs not evaluated over the last hour, all reasons (no_agent included).",
                [query("sum (increase(agent_eval_dropped_total[1h]))", instant=True)],
                decimals=0,
            )
        )
        .with_panel(
            stat_panel(
                "Processor errors (1h)",
                "Internal errors caught on the hot path.",
                [query("sum (increase(agent_eval_processor_errors_total[1h]))", instant=True)],
                decimals=0,
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
                [query(f"sum by (agent) (rate(agent_eval_agent_traces_total{{{AGENT}}}[{RATE}]))", "{{agent}}")],
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
    )
    return to_json(d)
