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

# Label filters every evaluation panel applies.
AGENT = 'agent=~"$agent"'
AGENT_EVALUATOR = 'agent=~"$agent", evaluator=~"$evaluator"'
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


def variables() -> list[Any]:
    """Template variables: datasource, agent, evaluator."""
    ds = gd.DatasourceVariable("datasource").label("Datasource").type("prometheus")
    agent = (
        gd.QueryVariable("agent")
        .label("Agent")
        .datasource(DATASOURCE)
        .query("label_values(agent_eval_agent_traces_total, agent)")
        .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(dm.VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".*")
    )
    evaluator = (
        gd.QueryVariable("evaluator")
        .label("Evaluator")
        .datasource(DATASOURCE)
        .query('label_values(agent_eval_results_total{agent=~"$agent"}, evaluator)')
        .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(dm.VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".*")
    )
    return [ds, agent, evaluator]


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
