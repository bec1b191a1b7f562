"""Shared building blocks: datasource, template variables, panels and queries."""

from __future__ import annotations

import json
from typing import Any

from grafana_foundation_sdk.builders import common as gc
from grafana_foundation_sdk.builders import dashboard as gd
from grafana_foundation_sdk.builders import heatmap, prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import prometheus as pm

DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")

# Label filters every evaluation panel applies. An agent name is unique only
# within its service, so every panel that groups by agent groups by service too.
SERVICE_AGENT = 'service=~"$service", agent=~"$agent"'
SERVICE_AGENT_EVALUATOR = 'service=~"$service", agent=~"$agent", evaluator=~"$evaluator"'
# Legend of a series per evaluator, service and agent.
LEGEND = "{{evaluator}} / {{service}}/{{agent}}"
# What a pass rate means, for every panel description that shows one.
PASS_RATE_MEANS = (
    "A pass means the evaluator's expectation was met (partial credit lives in the score); "
    "pass rate = pass / (pass + fail), skipped and error results are excluded."
)
TAGS = ["agent-eval"]


def query(
    expr: str,
    legend: str = "",
    *,
    ref: str = "A",
    instant: bool = False,
    exemplar: bool = False,
    fmt: pm.PromQueryFormat | None = None,
) -> prometheus.Dataquery:
    """A Prometheus query on the dashboard's datasource."""
    q = prometheus.Dataquery().expr(expr).ref_id(ref).datasource(DATASOURCE)
    q = q.instant() if instant else q.range()
    if legend:
        q = q.legend_format(legend)
    if exemplar:
        q = q.exemplar(True)
    if fmt is not None:
        q = q.format(fmt)
    return q


def _targets(panel: Any, queries: list[prometheus.Dataquery]) -> Any:
    for q in queries:
        panel = panel.with_target(q)
    return panel


def timeseries_panel(
    title: str,
    description: str,
    queries: list[prometheus.Dataquery],
    *,
    unit: str = "short",
    width: int = 12,
    height: int = 8,
    min_val: float | None = None,
    max_val: float | None = None,
) -> timeseries.Panel:
    """A time series panel."""
    p = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .span(width)
        .height(height)
        .fill_opacity(10)
        .line_width(1)
        .legend(
            gc.VizLegendOptions()
            .show_legend(True)
            .display_mode(common.LegendDisplayMode.LIST)
            .placement(common.LegendPlacement.BOTTOM)
        )
        .tooltip(gc.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI).sort(common.SortOrder.DESCENDING))
    )
    if min_val is not None:
        p = p.min(min_val)
    if max_val is not None:
        p = p.max(max_val)
    return _targets(p, queries)


def stat_panel(
    title: str,
    description: str,
    queries: list[prometheus.Dataquery],
    *,
    unit: str = "short",
    width: int = 6,
    height: int = 4,
    decimals: float | None = None,
) -> stat.Panel:
    """A single-value panel."""
    p = (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .span(width)
        .height(height)
        .reduce_options(gc.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    )
    if decimals is not None:
        p = p.decimals(decimals)
    return _targets(p, queries)


def table_panel(
    title: str,
    description: str,
    queries: list[prometheus.Dataquery],
    *,
    unit: str = "short",
    width: int = 12,
    height: int = 8,
) -> table.Panel:
    """A table of instant query results."""
    p = (
        table.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .span(width)
        .height(height)
        .show_header(True)
    )
    return _targets(p, queries)


def heatmap_panel(
    title: str,
    description: str,
    queries: list[prometheus.Dataquery],
    *,
    width: int = 12,
    height: int = 8,
    repeat: str | None = None,
) -> heatmap.Panel:
    """A heatmap of pre-bucketed histogram data (format=heatmap queries)."""
    p = (
        heatmap.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .span(width)
        .height(height)
        .calculate(False)
        .show_value(common.VisibilityMode.NEVER)
    )
    if repeat:
        p = p.repeat(repeat).repeat_direction("h")
    return _targets(p, queries)


def _label_variable(name: str, label: str, query: str) -> gd.QueryVariable:
    """A multi-value query variable whose "All" matches every value, the empty one included."""
    return (
        gd.QueryVariable(name)
        .label(label)
        .datasource(DATASOURCE)
        .query(query)
        .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(dm.VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".*")
    )


def variables() -> list[Any]:
    """Template variables: datasource, service, agent (within the services), evaluator."""
    ds = gd.DatasourceVariable("datasource").label("Datasource").type("prometheus")
    service = _label_variable("service", "Service", "label_values(agent_eval_agent_traces_total, service)")
    agent = _label_variable(
        "agent", "Agent", 'label_values(agent_eval_agent_traces_total{service=~"$service"}, agent)'
    )
    evaluator = _label_variable(
        "evaluator", "Evaluator", f"label_values(agent_eval_results_total{{{SERVICE_AGENT}}}, evaluator)"
    )
    return [ds, service, agent, evaluator]


def new_dashboard(uid: str, title: str, description: str) -> gd.Dashboard:
    """A dashboard with the shared settings, variables and cross-links."""
    d = (
        gd.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(TAGS)
        .editable()
        .time("now-6h", "now")
        .refresh("1m")
        .timezone("browser")
        .tooltip(dm.DashboardCursorSync.CROSSHAIR)
        .link(
            gd.DashboardLink("Agent eval dashboards")
            .type(dm.DashboardLinkType.DASHBOARDS)
            .tags(TAGS)
            .as_dropdown(True)
            .include_vars(True)
            .keep_time(True)
        )
    )
    for v in variables():
        d = d.with_variable(v)
    return d


def row(title: str) -> gd.Row:
    """A section header."""
    return gd.Row(title)


def to_json(d: gd.Dashboard) -> dict[str, Any]:
    """The dashboard's JSON model as plain data, with unique panel ids."""
    model = json.loads(json.dumps(d.build(), cls=JSONEncoder))
    for number, panel in enumerate(model["panels"], start=1):
        panel["id"] = number
    for variable in model["templating"]["list"]:
        variable.pop("id", None)  # the SDK sets the same zero UUID on every variable
    return model


# --- The score-drop check: the hour's pass rate, its 95% Wilson bounds and the
# week's lower bound, the series AgentEvalScoreDrop compares.
RULE = "service_agent_evaluator:agent_eval_pass_ratio"
RATE_1H, LOWER_1H, UPPER_1H, LOWER_7D = "pass rate (1h)", "lower bound (1h)", "upper bound (1h)", "7-day lower bound"
SCORE_DROP_MEANS = (
    "The bounds are 95% Wilson score bounds: wide when few results were judged, narrow when many were. "
    "AgentEvalScoreDrop fires when the hour's upper bound stays under the 7-day lower bound for 15 minutes, "
    "the drop is at least 5 points and the hour judged at least 30 results (defaults; deploy/README.md, "
    "Tuning the alerts). "
)


def score_drop_queries(selector: str, legend: str = "") -> list[prometheus.Dataquery]:
    """Hour's pass rate, its lower and upper bounds, the week's lower bound; legends prefixed by role."""
    parts = [
        (f"{RULE}:rate1h", RATE_1H),
        (f"{RULE}_wilson_lower:rate1h", LOWER_1H),
        (f"{RULE}_wilson_upper:rate1h", UPPER_1H),
        (f"{RULE}_wilson_lower:rate7d", LOWER_7D),
    ]
    return [
        query(f"{series}{{{selector}}}", f"{role} {legend}".strip(), ref="ABCD"[i])
        for i, (series, role) in enumerate(parts)
    ]


def _set(prop: str, value: Any) -> dm.DynamicConfigValue:
    return dm.DynamicConfigValue(id_val=prop, value=value)


def _color(name: str) -> dm.DynamicConfigValue:
    return _set("color", {"mode": "fixed", "fixedColor": name})


DASHED = _set("custom.lineStyle", {"fill": "dash", "dash": [10, 10]})


def score_drop_band(panel: timeseries.Panel) -> timeseries.Panel:
    """One series per role (a single service, agent and evaluator): the bounds as a shaded band."""
    return (
        panel.override_by_name(LOWER_1H, [_set("custom.lineWidth", 0), _set("custom.fillOpacity", 0)])
        .override_by_name(
            UPPER_1H,
            [
                _set("custom.lineWidth", 0),
                _set("custom.fillOpacity", 25),
                _set("custom.fillBelowTo", LOWER_1H),
                _color("blue"),
            ],
        )
        .override_by_name(LOWER_7D, [DASHED, _set("custom.fillOpacity", 0), _color("red")])
        .override_by_name(RATE_1H, [_set("custom.lineWidth", 2), _set("custom.fillOpacity", 0), _color("blue")])
    )


def score_drop_lines(panel: timeseries.Panel) -> timeseries.Panel:
    """Many series per role: the bounds and the week's lower bound as dashed lines."""
    return panel.override_by_regexp(
        "^(lower|upper) bound|^7-day", [DASHED, _set("custom.fillOpacity", 0), _set("custom.lineWidth", 1)]
    )
