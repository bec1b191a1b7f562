"""Agent drill-down: per-evaluator score distributions and the worst traces."""

from __future__ import annotations

from typing import Any

from grafana_foundation_sdk.models import prometheus as pm

from .common import (
    LEGEND,
    PASS_RATE_MEANS,
    SCORE_DROP_MEANS,
    SERVICE_AGENT_EVALUATOR,
    heatmap_panel,
    new_dashboard,
    query,
    row,
    score_drop_band,
    score_drop_queries,
    table_panel,
    timeseries_panel,
    to_json,
)

SEL = SERVICE_AGENT_EVALUATOR


def build() -> dict[str, Any]:
    """The agent drill-down dashboard's JSON model."""
    d = new_dashboard(
        "agent-eval-agent",
        "Agent evaluation: agent drill-down",
        "Per selected agent: the pass rate with its 95% bounds per evaluator, score distributions per "
        "evaluator, and the worst traces through exemplars linking to Tempo.",
    )
    d = (
        # One row per selected agent, one panel per evaluator in it: one series per role, so the
        # hour's bounds can be drawn as a band (Grafana fills between two named series).
        d.with_row(row("Pass rate and its 95% bounds: $agent").repeat("agent"))
        .with_panel(
            score_drop_band(
                timeseries_panel(
                    "$evaluator on $agent",
                    "The last hour's pass rate of this evaluator on this agent (recording rules); shaded: its "
                    "95% bounds; dashed red: the 7-day lower bound. "
                    + SCORE_DROP_MEANS
                    + PASS_RATE_MEANS
                    + " Select one service if several have an agent of this name.",
                    score_drop_queries(SEL),
                    unit="percentunit",
                    min_val=0,
                    max_val=1,
                    width=8,
                ).repeat("evaluator").repeat_direction("h")
            )
        )
        .with_row(row("Score distributions"))
        .with_panel(
            heatmap_panel(
                "Score distribution: $evaluator",
                "Scores per bucket over time (one panel per selected evaluator). Exemplar markers carry "
                "the trace_id: click one in a low bucket to open the trace in Tempo.",
                [
                    query(
                        f"sum by (le) (increase(agent_eval_score_bucket{{{SEL}}}[$__rate_interval]))",
                        "{{le}}",
                        exemplar=True,
                        fmt=pm.PromQueryFormat.HEATMAP,
                    )
                ],
                repeat="evaluator",
            )
        )
        .with_row(row("Worst traces"))
        .with_panel(
            timeseries_panel(
                "Low-score quantile with exemplars",
                "10th and 50th percentile score per evaluator. Exemplars (dots) are individual traces; "
                "the lowest dots are the worst traces, each linking to Tempo by trace_id.",
                [
                    query(
                        "histogram_quantile(0.1, sum by (evaluator, le) "
                        f"(rate(agent_eval_score_bucket{{{SEL}}}[$__rate_interval])))",
                        "p10 {{evaluator}}",
                        exemplar=True,
                    ),
                    query(
                        "histogram_quantile(0.5, sum by (evaluator, le) "
                        f"(rate(agent_eval_score_bucket{{{SEL}}}[$__rate_interval])))",
                        "p50 {{evaluator}}",
                        ref="B",
                    ),
                ],
                min_val=0,
                max_val=1,
            )
        )
        .with_panel(
            table_panel(
                "Lowest mean scores (1h)",
                "The ten evaluator, service and agent combinations with the lowest mean score over the last hour.",
                [
                    query(
                        f"bottomk(10, service_agent_evaluator:agent_eval_score_mean:rate1h{{{SEL}}})",
                        instant=True,
                        fmt=pm.PromQueryFormat.TABLE,
                    )
                ],
            )
        )
        .with_row(row("Outcomes"))
        .with_panel(
            timeseries_panel(
                "Pass rate per evaluator (5m)",
                "Per evaluator, service and agent (recording rule). " + PASS_RATE_MEANS,
                [query(f"service_agent_evaluator:agent_eval_pass_ratio:rate5m{{{SEL}}}", LEGEND)],
                unit="percentunit",
                min_val=0,
                max_val=1,
            )
        )
        .with_panel(
            timeseries_panel(
                "Results by evaluator and outcome",
                "Evaluator results per second; skipped and error are not counted in pass rates (their reason is on "
                "agent_eval_results_total{reason}).",
                [
                    query(
                        "sum by (evaluator, outcome) "
                        f"(rate(agent_eval_results_total{{{SEL}}}[$__rate_interval]))",
                        "{{evaluator}} {{outcome}}",
                    )
                ],
                unit="ops",
            )
        )
        .with_panel(
            table_panel(
                "Outcomes over the time range",
                "Results per evaluator and outcome over the dashboard's time range.",
                [
                    query(
                        f"sum by (evaluator, outcome) (increase(agent_eval_results_total{{{SEL}}}[$__range]))",
                        instant=True,
                        fmt=pm.PromQueryFormat.TABLE,
                    )
                ],
                width=24,
            )
        )
    )
    return to_json(d)
