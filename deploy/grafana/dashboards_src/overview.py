"""Overview: score trends and pass rates per evaluator and agent, volume, coverage."""

from __future__ import annotations

from typing import Any

from .common import (
    AGENT,
    AGENT_EVALUATOR,
    new_dashboard,
    query,
    row,
    stat_panel,
    table_panel,
    timeseries_panel,
    to_json,
)
from grafana_foundation_sdk.models import prometheus as pm

SEL = AGENT_EVALUATOR


def _pass_ratio(by: str, window: str) -> str:
    """pass / (pass + fail); skipped and error are excluded."""
    return (
        f'sum{by} (rate(agent_eval_results_total{{{SEL}, outcome="pass"}}[{window}]))\n'
        f"/\n"
        f'sum{by} (rate(agent_eval_results_total{{{SEL}, outcome=~"pass|fail"}}[{window}]))'
    )


def _mean_score(by: str, window: str) -> str:
    return (
        f"sum{by} (rate(agent_eval_score_sum{{{SEL}}}[{window}]))\n"
        f"/\n"
        f"sum{by} (rate(agent_eval_score_count{{{SEL}}}[{window}]))"
    )


def _coverage(by: str, window: str) -> str:
    return (
        f"sum{by} (rate(agent_eval_traces_evaluated_total{{{AGENT}}}[{window}]))\n"
        f"/\n"
        f"sum{by} (rate(agent_eval_agent_traces_total{{{AGENT}}}[{window}]))"
    )


def build() -> dict[str, Any]:
    """The overview dashboard's JSON model."""
    d = new_dashboard(
        "agent-eval-overview",
        "Agent evaluation: overview",
        "Quality of LLM agents as scored by otel-agent-eval: pass rates, scores, volume and coverage.",
    )
    d = (
        d.with_row(row("Last hour"))
        .with_panel(
            stat_panel(
                "Pass rate (1h)",
                "pass / (pass + fail) over the last hour; skipped and errored results are excluded.",
                [query(_pass_ratio("", "1h"), instant=True)],
                unit="percentunit",
                decimals=1,
            )
        )
        .with_panel(
            stat_panel(
                "Mean score (1h)",
                "Mean of all scores over the last hour.",
                [query(_mean_score("", "1h"), instant=True)],
                decimals=3,
            )
        )
        .with_panel(
            stat_panel(
                "Evaluations (1h)",
                "Evaluator results over the last hour, all outcomes.",
                [query(f"sum (increase(agent_eval_results_total{{{SEL}}}[1h]))", instant=True)],
                decimals=0,
            )
        )
        .with_panel(
            stat_panel(
                "Coverage (1h)",
                "Share of assembled agent traces that were evaluated.",
                [query(_coverage("", "1h"), instant=True)],
                unit="percentunit",
                decimals=1,
            )
        )
        .with_row(row("Quality trends"))
        .with_panel(
            timeseries_panel(
                "Pass rate by evaluator and agent",
                "pass / (pass + fail) per evaluator and agent.",
                [query(_pass_ratio(" by (evaluator, agent)", "$__rate_interval"), "{{evaluator}} / {{agent}}")],
                unit="percentunit",
                min_val=0,
                max_val=1,
            )
        )
        .with_panel(
            timeseries_panel(
                "Mean score by evaluator and agent",
                "Mean score (histogram sum / count) per evaluator and agent.",
                [query(_mean_score(" by (evaluator, agent)", "$__rate_interval"), "{{evaluator}} / {{agent}}")],
                min_val=0,
                max_val=1,
            )
        )
        .with_panel(
            timeseries_panel(
                "Pass rate: last hour vs 7-day baseline",
                "Recording rules used by the AgentEvalScoreDrop alert: it fires when the 1h line falls "
                "more than the margin below the 7d line.",
                [
                    query(
                        f"evaluator_agent:agent_eval_pass_ratio:rate1h{{{SEL}}}",
                        "1h {{evaluator}} / {{agent}}",
                    ),
                    query(
                        f"evaluator_agent:agent_eval_pass_ratio:rate7d{{{SEL}}}",
                        "7d {{evaluator}} / {{agent}}",
                        ref="B",
                    ),
                ],
                unit="percentunit",
                min_val=0,
                max_val=1,
            )
        )
        .with_panel(
            table_panel(
                "Pass rate and mean score (1d)",
                "Per evaluator and agent over the last day (recording rules).",
                [
                    query(
                        f"evaluator_agent:agent_eval_pass_ratio:rate1d{{{SEL}}}",
                        "pass rate",
                        instant=True,
                        fmt=pm.PromQueryFormat.TABLE,
                    ),
                    query(
                        f"evaluator_agent:agent_eval_score_mean:rate1d{{{SEL}}}",
                        "mean score",
                        ref="B",
                        instant=True,
                        fmt=pm.PromQueryFormat.TABLE,
                    ),
                ],
            )
        )
        .with_row(row("Volume and coverage"))
        .with_panel(
            timeseries_panel(
                "Evaluations by outcome",
                "Evaluator results per second by outcome.",
                [
                    query(
                        f"sum by (outcome) (rate(agent_eval_results_total{{{SEL}}}[$__rate_interval]))",
                        "{{outcome}}",
                    )
                ],
                unit="ops",
            )
        )
        .with_panel(
            timeseries_panel(
                "Evaluated vs assembled agent traces",
                "Agent invocations assembled and those evaluated, per second.",
                [
                    query(
                        f"sum by (agent) (rate(agent_eval_agent_traces_total{{{AGENT}}}[$__rate_interval]))",
                        "assembled {{agent}}",
                    ),
                    query(
                        f"sum by (agent) (rate(agent_eval_traces_evaluated_total{{{AGENT}}}[$__rate_interval]))",
                        "evaluated {{agent}}",
                        ref="B",
                    ),
                ],
                unit="ops",
            )
        )
        .with_panel(
            timeseries_panel(
                "Coverage by agent",
                "Share of assembled agent traces that were evaluated (after sampling and drops).",
                [query(_coverage(" by (agent)", "$__rate_interval"), "{{agent}}")],
                unit="percentunit",
                min_val=0,
                max_val=1,
                width=24,
            )
        )
    )
    return to_json(d)
