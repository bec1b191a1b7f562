"""Agent tasks the ``otel-agent-eval experiment`` tests name with ``--task tests.experiment_tasks:...``.

Each is called with a dataset ``Case`` and emits its spans through the global tracer provider,
as a user's agent does.
"""

from __future__ import annotations

import os

from opentelemetry import trace

from otel_agent_eval.experiments.core import Case
from otel_agent_eval.manual import agent_run

BROKEN_CASES = "EXPERIMENT_BROKEN_CASES"
"""Comma-separated case ids for which ``refunds`` forgets to look the order up (a regression)."""


def refunds(case: Case) -> str:
    """A hand-traced refund agent (``otel_agent_eval.manual``)."""
    broken = set(filter(None, os.environ.get(BROKEN_CASES, "").split(",")))
    with agent_run("refunds", input=str(case.input)) as run:
        with run.step(thought="Check the order, then refund it.") as step:
            if case.id not in broken:
                step.tool_call("lookup_order", {"order": case.id}, result={"status": "paid", "amount": 42})
            step.tool_call("refund_order", {"order": case.id}, result="ok")
        with run.step() as step:
            step.output(f"Order {case.id} was refunded: 42 EUR.")
    return "refunded"


def pydantic_weather(case: Case) -> str:
    """A real framework: pydantic-ai with a function model, instrumented through the global provider."""
    from tests.frameworks import pydantic_ai_scenarios as pa

    return pa.run_weather_with_parallel_tools(trace.get_tracer_provider())  # type: ignore[arg-type]
