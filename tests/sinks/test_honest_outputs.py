"""Outputs that say what really happened: results that never reached the OTLP endpoint are
counted, and the offline evaluate runs judge calls as concurrently as the settings say."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.resources import Resource
from prometheus_client import CollectorRegistry

from otel_agent_eval.config import Settings
from otel_agent_eval.serve.server import EvalServer, ServeOptions
from otel_agent_eval.sinks.otlp_export import hashed_once
from tests.cli.test_cli import CLI, export_demo_traces
from tests.openai_server import FakeOpenAI, slow
from tests.serve.server_process import SCENARIOS, Receiver, run_scenarios, wait_for


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("reachable", [False, True])
def test_results_that_fail_to_export_are_counted_and_reported(monkeypatch: pytest.MonkeyPatch, reachable: bool) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")  # the exporters give up on the dead endpoint after 1 s
    receiver = Receiver() if reachable else None
    endpoint = receiver.endpoint if receiver else f"http://127.0.0.1:{closed_port()}"
    registry = CollectorRegistry()
    server = EvalServer(
        Settings.load(env={}, settle_delay_seconds=0),
        ServeOptions(host="127.0.0.1", http_port=0, grpc_port=None, admin_port=None, export_endpoint=endpoint),
        registry=registry,
    )
    server.start()
    try:
        exporter = HttpSpanExporter(endpoint=f"http://127.0.0.1:{server.ports['http']}/v1/traces", timeout=5)
        run_scenarios(exporter, SCENARIOS[:3])
        wait_for(lambda: server.stats.traces_evaluated.total() == 3, 30, "3 evaluated runs")
    finally:
        summary = server.stop(drain_seconds=20)
        if receiver is not None:
            receiver.close()
    results = sum(server.stats.sink_errors.snapshot().values())
    if reachable:
        assert summary["exported"] is True and summary["not_exported"] == {"spans": 0, "log_records": 0}, summary
        assert results == 0
        return
    assert summary["exported"] is False
    not_exported = summary["not_exported"]
    assert not_exported["spans"] == 3 and not_exported["log_records"] >= 3  # one span per run, a record per result
    assert server.stats.sink_errors.snapshot() == {("otlp",): not_exported["spans"] + not_exported["log_records"]}
    assert registry.get_sample_value("agent_eval_sink_errors_total", {"sink": "otlp"}) == sum(not_exported.values())


def test_offline_evaluate_runs_judge_calls_concurrently(tmp_path: Path) -> None:
    pytest.importorskip("openai")
    traces = tmp_path / "traces.jsonl"
    names = [s.name for s in SCENARIOS[:6]]
    export_demo_traces(traces, names)
    with FakeOpenAI(default=slow(0.3)) as judge:
        env = {**os.environ, "OTEL_AGENT_EVAL_JUDGE_MODEL": "judge-1", "OTEL_AGENT_EVAL_JUDGE_BASE_URL": judge.base_url,
               "OTEL_AGENT_EVAL_JUDGE_EVALUATORS": "task_completion", "OTEL_AGENT_EVAL_JUDGE_CONCURRENCY": "3"}
        run = subprocess.run(CLI + ["evaluate", str(traces), "--format", "json"], capture_output=True, text=True,
                             timeout=120, env=env, check=False)
        assert run.returncode == 0, run.stderr
        report = json.loads(run.stdout)
        assert judge.request_count == len(report["agent_runs"]) == 6
        assert judge.max_in_flight == 3  # as many in flight as the setting allows, no more
    for agent_run in report["agent_runs"]:
        evaluators = [r["evaluator"] for r in agent_run["results"]]
        assert evaluators[-1] == "task_completion" and evaluators.count("task_completion") == 1  # in configured order


def test_serve_resource_hashed_once_is_the_same_resource() -> None:
    """The OTLP encoders group results by resource: serve's hashes once, and is equal to the one it copies."""
    resource = Resource.create({"service.name": "otel-agent-eval", "k": ("a", "b")}, schema_url="https://s")
    hashed = hashed_once(resource)
    assert hashed == resource and hash(hashed) == hash(resource)
    assert dict(hashed.attributes) == dict(resource.attributes) and hashed.schema_url == resource.schema_url
    assert {resource: 1}[hashed] == 1
