"""Overview: score trends and pass rates per evaluator and agent, volume, coverage."""

from __future__ import annotations

from typing import Any

from grafana_foundation_sdk.models import prometheus as pm

from .common import (
    LEGEND,
    PASS_RATE_MEANS,
    SCORE_DROP_MEANS,
    SERVICE_AGENT,
    SERVICE_AGENT_EVALUATOR,
    new_dashboard,
    query,
    row,
    score_drop_lines,
    score_drop_queries,
    stat_panel,
    table_panel,
    timeseries_panel,
    to_json,
)

SEL = SERVICE_AGENT_EVALUATOR
BY_SERIES = " by (service, agent, evaluator)"


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
        f"sum{by} (rate(agent_eval_traces_evaluated_total{{{SERVICE_AGENT}}}[{window}]))\n"
        f"/\n"
        f"sum{by} (rate(agent_eval_agent_traces_total{{{SERVICE_AGENT}}}[{window}]))"
    )


def build() -> dict[str, Any]:
    """The overview dashboard's JSON model."""
    d = new_dashboard(
        "agent-eval-overview",
        "Agent evaluation: overview",
        "Quality of LLM agents as scored by otel-agent-eval, per service and agent: pass rates (a pass means "
        "the expectation was met; skipped and error results are excluded), scores, volume and coverage.",
    )
    d = (
        d.with_row(row("Last hour"))
        .with_panel(
            stat_panel(
                "Pass rate (1h)",
                "Pass rate over the last hour, all selected evaluators and agents. " + PASS_RATE_MEANS,
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
                "Per evaluator, service and agent. " + PASS_RATE_MEANS,
                [query(_pass_ratio(BY_SERIES, "$__rate_interval"), LEGEND)],
                unit="percentunit",
                min_val=0,
                max_val=1,
            )
        )
        .with_panel(
            timeseries_panel(
                "Mean score by evaluator and agent",
                "Mean score (histogram sum / count) per evaluator, service and agent: the partial credit "
                "behind the pass rate.",
                [query(_mean_score(BY_SERIES, "$__rate_interval"), LEGEND)],
                min_val=0,
                max_val=1,
            )
        )
        .with_panel(
            score_drop_lines(
                timeseries_panel(
                    "Pass rate: last hour vs 7-day baseline",
                    "What AgentEvalScoreDrop compares, per evaluator, service and agent (recording rules): the last "
                    "hour's pass rate, dashed its lower and upper bounds and the 7-day lower bound (the agent "
                    "drill-down draws them as a band). "
                    + SCORE_DROP_MEANS
                    + PASS_RATE_MEANS,
                    score_drop_queries(SEL, LEGEND),
                    unit="percentunit",
                    min_val=0,
                    max_val=1,
                )
            )
        )
        .with_panel(
            table_panel(
                "Pass rate and mean score (1d)",
                "Per evaluator, service and agent over the last day (recording rules). " + PASS_RATE_MEANS,
                [
                    query(
                        f"service_agent_evaluator:agent_eval_pass_ratio:rate1d{{{SEL}}}",
                        "pass rate",
                        instant=True,
                        fmt=pm.PromQueryFormat.TABLE,
                    ),
                    query(
                        f"service_agent_evaluator:agent_eval_score_mean:rate1d{{{SEL}}}",
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
                "Evaluator results per second by outcome (pass: the expectation was met; fail: it was not; skipped and "
                "error are neither and stay out of pass rates).",
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
                        "sum by (service, agent) "
                        f"(rate(agent_eval_agent_traces_total{{{SERVICE_AGENT}}}[$__rate_interval]))",
                        "assembled {{service}}/{{agent}}",
                    ),
                    query(
                        "sum by (service, agent) "
                        f"(rate(agent_eval_traces_evaluated_total{{{SERVICE_AGENT}}}[$__rate_interval]))",
                        "evaluated {{service}}/{{agent}}",
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
                [query(_coverage(" by (service, agent)", "$__rate_interval"), "{{service}}/{{agent}}")],
                unit="percentunit",
                min_val=0,
                max_val=1,
                width=24,
            )
        )
    )
    return to_json(d)
