"""Static checks of deploy/: the metric contract, rules conventions, dashboards.

Also the shared helpers of the other tests/deploy/test_deploy_*.py modules: the metric
contract (the one list of metric names), PromQL inventories and binary lookup.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
RULES_FILE = DEPLOY / "prometheus" / "rules" / "agent-eval.rules.yml"
DASHBOARD_DIR = DEPLOY / "grafana" / "dashboards"
README = DEPLOY / "README.md"

# The metrics the product exports (the contract). name -> type.
CONTRACT_METRICS: dict[str, str] = {
    "agent_eval_score": "histogram",
    "agent_eval_results_total": "counter",
    "agent_eval_spans_received_total": "counter",
    "agent_eval_spans_kept_total": "counter",
    "agent_eval_late_spans_total": "counter",
    "agent_eval_traces_completed_total": "counter",
    "agent_eval_agent_traces_total": "counter",
    "agent_eval_span_limit_dropped_total": "counter",
    "agent_eval_sampling_decisions_total": "counter",
    "agent_eval_traces_evaluated_total": "counter",
    "agent_eval_dropped_total": "counter",
    "agent_eval_spans_dropped_total": "counter",
    "agent_eval_log_records_kept_total": "counter",
    "agent_eval_sink_errors_total": "counter",
    "agent_eval_evaluator_errors_total": "counter",
    "agent_eval_evaluation_duration_seconds": "histogram",
    "agent_eval_queue_depth": "gauge",
    "agent_eval_buffered_traces": "gauge",
    "agent_eval_buffered_bytes": "gauge",
    "agent_eval_admission_decisions_total": "counter",
    "agent_eval_admission_ratio": "gauge",
    "agent_eval_processor_errors_total": "counter",
    # LLM judge (otel_agent_eval/evaluators/judge/metrics.py, docs/judge.md "Metrics").
    "agent_eval_judge_tokens_total": "counter",
    "agent_eval_judge_cost_usd_total": "counter",
    "agent_eval_judge_request_duration_seconds": "histogram",
    "agent_eval_judge_requests_total": "counter",
    "agent_eval_judge_errors_total": "counter",
    "agent_eval_judge_budget_skips_total": "counter",
    "agent_eval_judge_cache_hits_total": "counter",
    "agent_eval_judge_budget_remaining_ratio": "gauge",
}

# Labels of the evaluation metrics (otel_agent_eval/sinks/prometheus.py): an agent
# name is unique only within its service, so whatever groups by agent groups by
# service too. `reason` is empty for pass and fail, a short code for skipped and error.
CONTRACT_LABELS: dict[str, set[str]] = {
    "agent_eval_results_total": {"evaluator", "agent", "service", "outcome", "reason"},
    "agent_eval_score": {"evaluator", "agent", "service"},
    "agent_eval_agent_traces_total": {"agent", "service"},
    "agent_eval_traces_evaluated_total": {"agent", "service"},
}

# Recording rules keep these labels (the level of `level:metric:operations`).
RECORDING_LEVEL = "service_agent_evaluator"
RECORDED_LABELS = {"service", "agent", "evaluator"}

# The judge's metrics: exported only when a judge is configured (OTEL_AGENT_EVAL_JUDGE_MODEL).
JUDGE_METRICS = {name for name in CONTRACT_METRICS if name.startswith("agent_eval_judge_")}

# Values used for Grafana's variables when running dashboard queries directly.
TEMPLATE_VALUES = {
    "$__rate_interval": "1m",
    "$__interval": "1m",
    "$__range": "1h",
    "${datasource}": "prometheus",
    "$datasource": "prometheus",
    "${service}": ".*",
    "$service": ".*",
    "${agent}": ".*",
    "$agent": ".*",
    "${evaluator}": ".*",
    "$evaluator": ".*",
}

_KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset"}


def yaml_module() -> Any:
    """PyYAML, or skip (fail under CI) when it is not installed."""
    try:
        import yaml
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("PyYAML is required (add pyyaml to the test extras)")
        pytest.skip("PyYAML is not installed")
    return yaml


def require_binary(name: str) -> str:
    """Path of a binary; skip when missing, except under CI=true where it fails."""
    path = shutil.which(name)
    if path is None:
        reason = f"{name} not found: apt-get update && apt-get install -y prometheus"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def exposed_names() -> set[str]:
    """Every series name the contract produces (histograms expand to their parts)."""
    names: set[str] = set()
    for name, kind in CONTRACT_METRICS.items():
        if kind == "histogram":
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
        else:
            names.add(name)
    return names


def rule_groups() -> list[dict[str, Any]]:
    """The groups of the rules file."""
    return yaml_module().safe_load(RULES_FILE.read_text())["groups"]


def rules() -> list[dict[str, Any]]:
    """Every recording and alerting rule."""
    return [r for g in rule_groups() for r in g["rules"]]


def recorded_names() -> set[str]:
    """Names of the series the recording rules produce."""
    return {r["record"] for r in rules() if "record" in r}


def dashboards() -> dict[str, dict[str, Any]]:
    """Committed dashboards by file name."""
    return {p.name: json.loads(p.read_text()) for p in sorted(DASHBOARD_DIR.glob("*.json"))}


def _panels(model: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for panel in model.get("panels", []):
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def _variable_query(query: str) -> str:
    """label_values(metric, label) as an equivalent PromQL query."""
    m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", query, re.DOTALL)
    if m is None:
        return query
    return f"group by ({m.group(2)}) ({m.group(1)})"


def dashboard_expressions() -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target and query variable of every dashboard."""
    out = []
    for name, model in dashboards().items():
        for panel in _panels(model):
            for target in panel.get("targets", []):
                out.append((f"{name}: {panel['title']} [{target['refId']}]", target["expr"]))
        for var in model["templating"]["list"]:
            if var["type"] == "query":
                out.append((f"{name}: variable {var['name']}", _variable_query(var["query"])))
    return out


def rule_expressions() -> list[tuple[str, str, str]]:
    """(where, PromQL, kind) for every rule; kind is 'record' or 'alert'."""
    out = []
    for r in rules():
        kind = "record" if "record" in r else "alert"
        out.append((f"rules: {r[kind]}", r["expr"], kind))
    return out


def substitute(expr: str) -> str:
    """Replace Grafana template variables with concrete values."""
    for var in sorted(TEMPLATE_VALUES, key=len, reverse=True):
        expr = expr.replace(var, TEMPLATE_VALUES[var])
    return expr


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects (a small lexer, not a full parser)."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    s = re.sub(r"\{[^}]*\}", " ", s)
    s = re.sub(r"\[[^\]]*\]", " ", s)
    s = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    names = set()
    for m in re.finditer(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*", s):
        token = m.group(0)
        if token in _KEYWORDS or s[m.end() :].lstrip().startswith("("):
            continue
        names.add(token)
    return names


# ----------------------------------------------------------------------- tests


def test_metric_name_lexer() -> None:
    expr = (
        'sum by (reason) (rate(agent_eval_dropped_total{reason!~"a|b"}[10m]))\n'
        "/ ignoring (reason) group_left\nsum (rate(agent_eval_spans_received_total[$__rate_interval])) > 0.01"
    )
    assert metric_names(substitute(expr)) == {"agent_eval_dropped_total", "agent_eval_spans_received_total"}
    assert metric_names("histogram_quantile(0.5, sum by (le) (rate(x_bucket[1m])))") == {"x_bucket"}


def test_every_referenced_metric_is_in_the_contract() -> None:
    known = exposed_names()
    recorded = recorded_names()
    exprs = [(w, e) for w, e in dashboard_expressions()] + [(w, e) for w, e, _ in rule_expressions()]
    assert exprs
    unknown = []
    for where, expr in exprs:
        for name in metric_names(substitute(expr)):
            if name not in known and name not in recorded:
                unknown.append(f"{where}: {name}")
    assert not unknown, "metrics outside the contract:\n" + "\n".join(unknown)


def test_every_contract_metric_is_used() -> None:
    used = set()
    for _, expr in dashboard_expressions():
        used |= metric_names(substitute(expr))
    for _, expr, _ in rule_expressions():
        used |= metric_names(expr)
    missing = [n for n in exposed_names() if n not in used and not n.endswith(("_sum", "_count", "_bucket"))]
    assert not missing, f"contract metrics on no dashboard or rule: {missing}"


def test_recording_rules_follow_naming_convention() -> None:
    for name in recorded_names():
        level, metric, ops = name.split(":")
        assert level == RECORDING_LEVEL and metric.startswith("agent_eval_") and ops, name
    for window in ("5m", "1h", "1d"):
        assert f"{RECORDING_LEVEL}:agent_eval_pass_ratio:rate{window}" in recorded_names()
        assert f"{RECORDING_LEVEL}:agent_eval_score_mean:rate{window}" in recorded_names()
    for window in ("1h", "7d"):
        for bound in ("lower", "upper"):
            assert f"{RECORDING_LEVEL}:agent_eval_pass_ratio_wilson_{bound}:rate{window}" in recorded_names()


def _grouping_labels(expr: str) -> list[set[str]]:
    """The label lists of every by/on/without/ignoring clause of an expression."""
    return [
        {label.strip() for label in m.group(1).split(",") if label.strip()}
        for m in re.finditer(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", expr)
    ]


def test_whatever_groups_by_agent_groups_by_service() -> None:
    """Issue 13: agents of different services that share a name are never merged (variables list names)."""
    exprs = [(w, e) for w, e in dashboard_expressions() if ": variable " not in w]
    exprs += [(w, e) for w, e, _ in rule_expressions()]
    offenders = [
        f"{where}: {sorted(labels)}"
        for where, expr in exprs
        for labels in _grouping_labels(expr)
        if "agent" in labels and "service" not in labels
    ]
    assert not offenders, "groups by agent without service:\n" + "\n".join(offenders)


def test_grouping_labels_exist_on_the_metrics() -> None:
    """by/on labels over the evaluation metrics are labels those metrics (or the recorded series) carry."""
    recorded = recorded_names()
    exprs = [(w, e) for w, e in dashboard_expressions()] + [(w, e) for w, e, _ in rule_expressions()]
    checked = 0
    for where, expr in exprs:
        available: set[str] = {"le"}
        for name in metric_names(substitute(expr)):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            if name in recorded:
                available |= RECORDED_LABELS
            elif name in CONTRACT_LABELS or base in CONTRACT_LABELS:
                available |= CONTRACT_LABELS.get(name) or CONTRACT_LABELS[base]
            else:
                break  # reads a metric whose labels are not listed here: not checked
        else:
            checked += 1
            for labels in _grouping_labels(expr):
                assert labels <= available, f"{where}: {sorted(labels - available)} not on the metrics it reads"
    assert checked >= 10


def test_alerts_have_severity_annotations_and_runbook() -> None:
    readme = README.read_text()
    anchors = {a.lower() for a in re.findall(r'<a id="([^"]+)"></a>', readme)}
    alerts = [r for r in rules() if "alert" in r]
    assert len(alerts) >= 5
    for alert in alerts:
        assert alert["labels"]["severity"] in {"critical", "warning"}, alert["alert"]
        ann = alert["annotations"]
        assert ann["summary"] and ann["description"], alert["alert"]
        url = ann["runbook_url"]
        assert url.endswith("deploy/README.md#" + alert["alert"].lower()), url
        assert alert["alert"].lower() in anchors, f"no runbook anchor for {alert['alert']} in deploy/README.md"


def test_score_drop_tunables_are_threshold_rules() -> None:
    """AgentEvalScoreDrop compares Wilson bounds and reads its tunables from recording rules."""
    by_name = {r.get("record") or r.get("alert"): r for r in rules()}
    effect = by_name[f"{RECORDING_LEVEL}:agent_eval_score_drop_min_effect:threshold"]["expr"]
    judged = by_name[f"{RECORDING_LEVEL}:agent_eval_score_drop_min_judged:threshold"]["expr"]
    assert effect.strip().endswith("* 0 + 0.05") and judged.strip().endswith("* 0 + 30")
    drop = by_name["AgentEvalScoreDrop"]["expr"]
    for series in (
        "agent_eval_pass_ratio_wilson_upper:rate1h",
        "agent_eval_pass_ratio_wilson_lower:rate7d",
        "agent_eval_score_drop_min_effect:threshold",
        "agent_eval_score_drop_min_judged:threshold",
    ):
        assert f"{RECORDING_LEVEL}:{series}" in drop, series
    assert "0.10" not in drop and "50" not in drop


def test_dashboards_use_template_variables() -> None:
    models = dashboards()
    assert set(models) == {"agent-eval-overview.json", "agent-eval-agent.json", "agent-eval-pipeline.json"}
    for name, model in models.items():
        variables = {v["name"]: v for v in model["templating"]["list"]}
        assert {"datasource", "service", "agent", "evaluator"} <= set(variables), name
        assert "$service" in variables["agent"]["query"], f"{name}: agents are listed within the services"
        assert variables["datasource"]["type"] == "datasource"
        ids = [p["id"] for p in _panels(model)]
        assert len(ids) == len(set(ids)), f"{name}: duplicate panel ids"
        for panel in _panels(model):
            if panel["type"] == "row":
                continue
            assert panel["datasource"]["uid"] == "${datasource}", f"{name}: {panel['title']}"
            for target in panel["targets"]:
                assert target["datasource"]["uid"] == "${datasource}"


def test_drill_down_has_exemplars() -> None:
    model = dashboards()["agent-eval-agent.json"]
    targets = [t for p in _panels(model) for t in p.get("targets", [])]
    assert any(t.get("exemplar") and "agent_eval_score_bucket" in t["expr"] for t in targets)


def test_judge_alert_constants_are_visible() -> None:
    errors = next(r for r in rules() if r.get("alert") == "AgentEvalJudgeErrors")
    assert "> 0.10" in errors["expr"] and ">= 20" in errors["expr"]
    budget = next(r for r in rules() if r.get("alert") == "AgentEvalJudgeBudgetExhausted")
    assert "agent_eval_judge_budget_remaining_ratio <= 0" in budget["expr"]
    assert "agent_eval_judge_budget_skips_total" in budget["expr"]


def test_pipeline_dashboard_shows_every_judge_metric() -> None:
    model = dashboards()["agent-eval-pipeline.json"]
    used: set[str] = set()
    for panel in _panels(model):
        for target in panel.get("targets", []):
            used |= metric_names(substitute(target["expr"]))
    for name in JUDGE_METRICS:
        kind = CONTRACT_METRICS[name]
        assert (f"{name}_bucket" if kind == "histogram" else name) in used, f"{name} not on the pipeline dashboard"


def test_drill_down_draws_the_hours_bounds_as_a_band() -> None:
    """A panel per agent and evaluator fills from the hour's upper bound down to its lower bound."""
    model = dashboards()["agent-eval-agent.json"]
    banded = []
    for panel in _panels(model):
        legends = {t.get("legendFormat"): t["expr"] for t in panel.get("targets", [])}
        for override in panel.get("fieldConfig", {}).get("overrides", []):
            props = {p["id"]: p["value"] for p in override["properties"]}
            if "custom.fillBelowTo" in props:
                upper, lower = override["matcher"]["options"], props["custom.fillBelowTo"]
                assert "_wilson_upper:rate1h" in legends[upper], panel["title"]
                assert "_wilson_lower:rate1h" in legends[lower], panel["title"]
                banded.append(panel)
    assert len(banded) == 1
    assert banded[0]["repeat"] == "evaluator"
    rows = [p for p in model["panels"] if p["type"] == "row" and p.get("repeat") == "agent"]
    assert rows, "the band panels repeat per agent"


def test_pass_rate_panels_say_what_a_pass_means() -> None:
    """Every panel showing a pass rate says that a pass means the expectation was met."""
    for name, model in dashboards().items():
        for panel in _panels(model):
            exprs = " ".join(t["expr"] for t in panel.get("targets", []))
            if "pass_ratio" in exprs or 'outcome="pass"' in exprs:
                assert "expectation was met" in panel["description"], f"{name}: {panel['title']}"
                assert "excluded" in panel["description"], f"{name}: {panel['title']}"
