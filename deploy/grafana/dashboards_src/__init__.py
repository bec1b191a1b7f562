"""Grafana dashboards for otel-agent-eval, built with grafana-foundation-sdk.

Each module exposes ``build() -> dict`` returning the dashboard JSON model.
``deploy/grafana/generate.py`` writes them to ``deploy/grafana/dashboards/``.
"""

from . import agent, overview, pipeline

DASHBOARDS = {
    "agent-eval-overview": overview.build,
    "agent-eval-agent": agent.build,
    "agent-eval-pipeline": pipeline.build,
}
