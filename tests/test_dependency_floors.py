"""The declared dependency floors hold: pyproject.toml's ``>=`` bounds (core, ``otlp`` and ``judge``
extras), installed exactly, in a venv of their own (``tests/frameworks/envs/floors.txt``, built by
``tests/frameworks/venvs.py``), run the in-app path and ``serve`` with a judge end to end.

A bound nobody runs is a guess: the suite's own venv takes the newest releases, and an app that pins
an older SDK gets whatever the floor says. What the first run found behind the floors declared then
(SDK 1.30, openai 1.40): the OTel sink's ``LogRecord(context=...)`` needs SDK 1.35 (on 1.30-1.34
every result record failed as a sink error), and before 1.37 the SDK logger does not give an API
``LogRecord`` its resource, so the OTLP log encoder failed on every result record (an in-memory
exporter alone did not notice); openai before 1.55.3 cannot make a client with httpx 0.28 or newer.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from packaging.version import Version

from tests.frameworks.venvs import ENVS, ROOT, framework_python
from tests.openai_server import FakeOpenAI
from tests.serve.server_process import SCENARIOS, Receiver, ServerProcess, run_scenarios, send_compressed_runs, wait_for

FLOORED_EXTRAS = ("otlp", "judge")
RESULTS_PER_RUN = 4  # the default deterministic evaluators


def declared_floors() -> dict[str, Version]:
    """``name -> version`` of every ``name>=version`` in the core dependencies and the floored extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    for extra in FLOORED_EXTRAS:
        specs += project["optional-dependencies"][extra]
    floors = {}
    for spec in specs:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([^,;\s]+)", spec.split(";")[0].strip())
        assert match, f"{spec!r}: a floored dependency is declared as name>=version"
        floors[canonical(match[1])] = Version(match[2])
    return floors


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned() -> dict[str, Version]:
    lines = (ENVS / "floors.txt").read_text().splitlines()
    return {canonical(name): Version(version) for name, _, version in
            (line.partition("==") for line in lines if line.strip() and not line.startswith("#"))}


def test_the_floor_venv_pins_each_declared_floor() -> None:
    floors, pins = declared_floors(), pinned()
    assert {name: pins.get(name) for name in floors} == floors


@pytest.fixture(scope="module")
def floor_python() -> Path:
    return framework_python("floors")


def test_in_app_at_the_floors(floor_python: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([str(floor_python), str(ROOT / "tests" / "floor_app.py")], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout)
    installed = {canonical(name): Version(version) for name, version in out["versions"].items()}
    assert installed == {name: floor for name, floor in declared_floors().items() if name in installed}

    assert sorted(s["trace_id"] for s in out["evaluation_spans"]) == sorted(out["trace_ids"])
    labels = {name: span["attributes"] for name, span in zip(out["scenarios"], sorted(
        out["evaluation_spans"], key=lambda s: out["trace_ids"].index(s["trace_id"])))}
    assert labels["research: loop"]["agent_eval.loop_detection.label"] == "fail"
    assert labels["weather: good (parallel calls)"]["agent_eval.loop_detection.label"] == "pass"
    results = out["results"]
    assert len(results) == RESULTS_PER_RUN * len(SCENARIOS), "every result as a log record"
    assert {r["event_name"] for r in results} == {"gen_ai.evaluation.result"}
    assert {r["trace_id"] for r in results} == set(out["trace_ids"]), "tied to the evaluated traces"
    assert "0" * 16 not in {r["span_id"] for r in results}
    samples = out["samples"]
    assert samples["agent_eval_traces_evaluated_total"] == len(SCENARIOS)
    assert samples.get("agent_eval_sink_errors_total", 0) == 0
    assert samples.get("agent_eval_processor_errors_total", 0) == 0


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def test_serve_with_a_judge_at_the_floors(floor_python: Path, tmp_path: Path, receiver: Receiver,
                                          server: FakeOpenAI) -> None:
    """serve in the floor venv (uvicorn, starlette, protobuf, the OTLP exporters and openai at their floors),
    fed by this venv's exporter, exporting to ``receiver``, judging through the fake OpenAI server."""
    serve = ServerProcess(tmp_path, python=floor_python, receiver=receiver, env={
        "OTEL_AGENT_EVAL_JUDGE_MODEL": "judge-1", "OTEL_AGENT_EVAL_JUDGE_BASE_URL": server.base_url,
        "OTEL_AGENT_EVAL_JUDGE_API_KEY": "test", "OTEL_AGENT_EVAL_JUDGE_EVALUATORS": "task_completion"})
    try:
        trace_ids = run_scenarios(HttpSpanExporter(endpoint=f"{serve.http_endpoint}/v1/traces", timeout=5), SCENARIOS)
        phases = wait_for(lambda: len(receiver.evaluation_spans()) >= 2 * len(SCENARIOS) and receiver.evaluation_spans(),
                          30, "deterministic and judge evaluation spans")
        assert sorted(s["trace_id"] for s in phases) == sorted(trace_ids * 2)
        assert {s["name"].split()[0] for s in phases} == {"evaluate_agent", "judge_agent"}
        results = wait_for(lambda: len(receiver.results()) >= (RESULTS_PER_RUN + 1) * len(SCENARIOS) and receiver.results(),
                           20, "result log records")
        assert len(results) == (RESULTS_PER_RUN + 1) * len(SCENARIOS)
        judged = [r for r in results if r["attributes"]["gen_ai.evaluation.name"] == "task_completion"]
        # Answered "yes" to every question, "did the agent fail?" included: a scored fail, parsed from the reply.
        assert {r["attributes"]["gen_ai.evaluation.score.label"] for r in judged} == {"fail"}, judged
        assert all("scripted answer" in r["attributes"]["gen_ai.evaluation.explanation"] for r in judged), judged
        assert len(server.requests) == len(SCENARIOS)
        send_compressed_runs(serve)  # snappy and lz4 bodies: cramjam and lz4 at their floors
        wait_for(lambda: serve.metrics().sum("agent_eval_traces_evaluated_total") == len(SCENARIOS) + 4, 20,
                 "the compressed runs evaluated")
        metrics = serve.metrics()
        assert metrics.sum("agent_eval_sink_errors_total") == 0
        stopped = serve.stop()
        assert stopped["drained"] is True, stopped
    finally:
        serve.kill()
