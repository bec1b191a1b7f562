"""A WSGI app for ``tests/sinks/test_prometheus_multiprocess.py``, run by real gunicorn workers (never collected by
pytest): the processor installed as a user installs it, at import, serving ``/metrics`` on
``MULTIPROCESS_APP_METRICS_PORT``; each request runs one of the demo's scripted agents under a server span and
answers with the worker's pid and the scenario's name, after 20 ms."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind

from otel_agent_eval import install
from otel_agent_eval.cli.demo import SCENARIOS

provider = TracerProvider()
processor = install(provider, prometheus_port=int(os.environ["MULTIPROCESS_APP_METRICS_PORT"]), sample_rate=1.0,
                    settle_delay_seconds=0.05, max_traces_per_second=0, max_evaluations_per_second=0)
tracer = provider.get_tracer("multiprocess-app")


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    scenario = SCENARIOS[int(environ.get("QUERY_STRING") or 0) % len(SCENARIOS)]
    with tracer.start_as_current_span("GET /agent", kind=SpanKind.SERVER):
        scenario.agent.run(tracer, scenario.task, scenario.turns)
        time.sleep(0.02)  # a request takes a while: concurrent ones go to several workers
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [f"{os.getpid()} {scenario.name}".encode()]
