"""Zero-code instrumentation: the app runs under ``opentelemetry-instrument`` (opentelemetry-distro), which makes
the SDK providers and their OTLP exporters from ``OTEL_*`` variables; the app adds evaluation with
``install(trace.get_tracer_provider(), _logs.get_logger_provider())`` (the README's snippet) and simply exits.
The evaluation spans and result records of what was still buffered reach the OTLP endpoint (a ``Receiver``);
with no logs exporter the logger provider is the API's proxy: no log processor, spans and metrics still out."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from otel_agent_eval.cli.demo import SCENARIOS
from tests.serve.server_process import Receiver, wait_for

ROOT = Path(__file__).resolve().parents[2]
INSTRUMENT = Path(sys.executable).parent / "opentelemetry-instrument"
APP = """
from opentelemetry import _logs, trace
from opentelemetry.trace import SpanKind

from otel_agent_eval import install
from otel_agent_eval.cli.demo import SCENARIOS

install(trace.get_tracer_provider(), _logs.get_logger_provider(), sample_rate=1.0, settle_delay_seconds=600)
tracer = trace.get_tracer("app")
for scenario in SCENARIOS:
    with tracer.start_as_current_span("POST /agent", kind=SpanKind.SERVER) as root:
        scenario.agent.run(tracer, scenario.task, scenario.turns)
    print(format(root.get_span_context().trace_id, "032x"))
"""


@pytest.mark.parametrize("logs_exporter", ["otlp", "none"])
def test_install_under_opentelemetry_instrument(logs_exporter: str, tmp_path: Path) -> None:
    assert INSTRUMENT.exists(), "opentelemetry-distro (test extra) provides opentelemetry-instrument"
    (tmp_path / "app.py").write_text(APP)
    receiver = Receiver()
    try:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTHON"))},
               "PYTHONPATH": str(ROOT), "OTEL_SERVICE_NAME": "zero-code-app", "OTEL_TRACES_EXPORTER": "otlp",
               "OTEL_LOGS_EXPORTER": logs_exporter, "OTEL_METRICS_EXPORTER": "none",
               "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        done = subprocess.run([str(INSTRUMENT), sys.executable, "app.py"], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=120, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        trace_ids = done.stdout.split()
        assert len(trace_ids) == len(SCENARIOS)
        evaluations = wait_for(lambda: len(receiver.evaluation_spans()) >= len(SCENARIOS) and receiver.evaluation_spans(),
                               10, "evaluation spans")
        assert sorted(s["trace_id"] for s in evaluations) == sorted(trace_ids)
        if logs_exporter == "otlp":
            results = wait_for(lambda: len(receiver.results()) >= 4 * len(SCENARIOS) and receiver.results(), 10, "results")
            assert len(results) == 4 * len(SCENARIOS)
            assert {r["trace_id"] for r in results} == set(trace_ids)
        else:
            assert receiver.results() == []
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
    finally:
        receiver.close()
