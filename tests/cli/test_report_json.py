"""`evaluate --format json`: the report is every run's and result's own JSON form, whatever the values.

The spans come from the real SDK (demo scenarios) through the real OTLP encoder; the CLI runs
as a user runs it, in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.common")

from otel_agent_eval.cli.evaluate import evaluate_files, report_json
from otel_agent_eval.config import Settings
from otel_agent_eval.evaluators import build_evaluators
from tests.cli.test_cli import CLI, export_demo_traces

SCENARIOS = ["weather: good (parallel calls)", "weather: wrong tool", "research: loop"]


def test_report_is_each_run_as_its_model_dumps(tmp_path: Path) -> None:
    traces = tmp_path / "traces.jsonl"
    export_demo_traces(traces, SCENARIOS)
    report, _ = evaluate_files([traces], build_evaluators(Settings.load()))
    assert len(report.evaluated) == 3
    expected = {
        "traces_read": 3,
        "traces_without_agent": 0,
        "agent_runs": [{"trace": trace.model_dump(mode="json"), "results": [r.model_dump(mode="json") for r in results]}
                       for trace, results in report.evaluated],
        "totals": {name: {**dict(t.counts), "pass_rate": t.pass_rate, "mean_score": t.mean_score}
                   for name, t in sorted(report.totals().items())},
        "failed_gates": [],
    }
    written = report_json(report)
    assert json.loads(written) == expected
    assert written == json.dumps(expected, indent=2, ensure_ascii=False).encode()  # the same text, key order included


def test_report_holds_an_integer_beyond_64_bits(tmp_path: Path) -> None:
    """OTLP/JSON int64 values come as decimal strings of any length; the run's metadata keeps the agent
    span's attributes, so the report must write what orjson's dump refuses (it crashed the command)."""
    traces = tmp_path / "traces.jsonl"
    export_demo_traces(traces, SCENARIOS[:1])
    doc = json.loads(traces.read_text())
    spans = [span for r in doc["resourceSpans"] for s in r["scopeSpans"] for span in s["spans"]]
    agent = next(span for span in spans if "parentSpanId" not in span)
    agent["attributes"].append({"key": "app.big", "value": {"intValue": str(2**70)}})
    traces.write_text(json.dumps(doc) + "\n")
    run = subprocess.run(CLI + ["evaluate", str(traces), "--format", "json"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["agent_runs"][0]["trace"]["metadata"]["app.big"] == 2**70

