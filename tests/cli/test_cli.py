"""The command line, run as a user runs it: the installed console script in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_agent_eval.cli.demo import EXPECTATIONS, SCENARIOS
from otel_agent_eval.formats import otlp
from tests.formats.test_otlp import to_otlp_json

CLI = [sys.executable, "-m", "otel_agent_eval"]


def export_demo_traces(path: Path, scenario_names: list[str]) -> None:
    """Run demo scenarios through the real SDK and write them as the Collector's file exporter does."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("app")
    by_name = {s.name: s for s in SCENARIOS}
    lines = []
    for name in scenario_names:
        scenario = by_name[name]
        scenario.agent.run(tracer, scenario.task, scenario.turns)
        lines.append(to_otlp_json(encode_spans(exporter.get_finished_spans())))
        exporter.clear()
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture
def expectations(tmp_path: Path) -> Path:
    path = tmp_path / "expectations.json"
    path.write_text(json.dumps([e.model_dump(mode="json") for e in EXPECTATIONS]))
    return path


@pytest.mark.parametrize("compression", ["none", "gzip", "zstd"])
def test_evaluate_reads_standard_input_from_a_pipe(compression: str, tmp_path: Path) -> None:
    """``zcat export.jsonl.gz | otel-agent-eval evaluate -``: a pipe cannot seek, where the reader used to seek
    back after sniffing the format ("File or stream is not seekable"), and ``-`` was taken for a file name."""
    import gzip

    import zstandard

    traces = tmp_path / "traces.jsonl"
    export_demo_traces(traces, ["weather: good (parallel calls)", "research: loop"])
    data = traces.read_bytes()
    data = {"none": data, "gzip": gzip.compress(data), "zstd": zstandard.ZstdCompressor().compress(data)}[compression]
    cat = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # a real pipe, not a file
    assert cat.stdin is not None and cat.stdout is not None
    cli = subprocess.Popen(CLI + ["evaluate", "-", "--format", "json"], stdin=cat.stdout, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    cat.stdout.close()  # the CLI's now
    cat.stdin.write(data)
    cat.stdin.close()
    out, err = cli.communicate(timeout=120)
    cat.wait(10)
    assert cli.returncode == 0, err.decode()
    report = json.loads(out)
    assert report["traces_read"] == 2
    assert sorted(r["trace"]["agent_name"] for r in report["agent_runs"]) == ["research-agent", "weather-agent"]


def test_standard_input_with_jobs_is_refused_naming_the_flag(tmp_path: Path) -> None:
    traces = tmp_path / "traces.jsonl"
    export_demo_traces(traces, ["research: loop"])
    run = subprocess.run(CLI + ["evaluate", "-", str(traces), "--jobs", "2"], input="", capture_output=True, text=True,
                         timeout=120, check=False)
    assert run.returncode == 2
    assert "--jobs: standard input ('-') is read by this process only" in run.stderr


def test_evaluate_json_report_and_gate(tmp_path: Path, expectations: Path) -> None:
    traces = tmp_path / "traces.jsonl"
    export_demo_traces(traces, ["weather: good (parallel calls)", "weather: wrong tool", "research: loop"])
    run = subprocess.run(
        CLI + ["evaluate", str(traces), "--format", "json", "--expectations", str(expectations),
               "--gate", "tool_call_accuracy=0.3", "--gate", "loop_detection=0.5"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["traces_read"] == 3 and len(report["agent_runs"]) == 3
    first = report["agent_runs"][0]["trace"]
    assert first["agent_name"] == "weather-agent"
    assert [c["name"] for c in first["steps"][0]["tool_calls"]] == ["get_weather", "get_time"]
    assert report["totals"]["tool_call_accuracy"]["pass"] == 1  # weather good
    assert report["totals"]["tool_call_accuracy"]["fail"] == 2  # wrong tool; research loop (1 of 2 expected)
    assert report["totals"]["loop_detection"]["fail"] == 1
    assert report["failed_gates"] == []

    gated = subprocess.run(
        CLI + ["evaluate", str(traces), "--expectations", str(expectations), "--gate", "tool_call_accuracy=0.9"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert gated.returncode == 1
    assert "GATE FAILED: tool_call_accuracy: pass rate 33.3% < 90.0%" in gated.stdout
    assert "step 0: get_weather(" in gated.stdout

    # A lowered threshold gives partial credit back, on purpose, over the environment's.
    lowered = subprocess.run(
        CLI + ["evaluate", str(traces), "--format", "json", "--expectations", str(expectations),
               "--threshold", "tool_call_accuracy=0.5", "--gate", "tool_call_accuracy=0.6"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "OTEL_AGENT_EVAL_THRESHOLDS": "tool_call_accuracy=0.9,loop_detection=0.0"}, check=False,
    )
    assert lowered.returncode == 0, lowered.stderr
    totals = json.loads(lowered.stdout)["totals"]
    assert (totals["tool_call_accuracy"]["pass"], totals["loop_detection"]["pass"]) == (2, 3)


@pytest.mark.parametrize(("flag", "message"), [
    ("nope=0.5", "unknown evaluator 'nope'"),
    ("tool_call_accuracy=1.5", "outside [0, 1]"),
    ("tool_call_accuracy", "EVALUATOR=VALUE"),
])
def test_evaluate_bad_threshold_names_the_flag(tmp_path: Path, flag: str, message: str) -> None:
    run = subprocess.run(CLI + ["evaluate", str(tmp_path / "x.json"), "--threshold", flag],
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 2 and "--threshold" in run.stderr and message in run.stderr, run.stderr


@pytest.mark.parametrize(("args", "env", "named"), [
    (["--evaluators", "tool_call_accuracy,nope"], {}, "--evaluators (OTEL_AGENT_EVAL_EVALUATORS): unknown evaluator 'nope'"),
    ([], {"OTEL_AGENT_EVAL_EVALUATORS": "nope"}, "otel-agent-eval: OTEL_AGENT_EVAL_EVALUATORS: unknown evaluator 'nope'"),
])
def test_unknown_evaluator_names_where_it_was_given(tmp_path: Path, args: list[str], env: dict[str, str], named: str) -> None:
    """The flag the user typed, or the variable they set: not the variable when it was the flag."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_AGENT_EVAL_")}
    run = subprocess.run(CLI + ["evaluate", str(tmp_path / "x.json"), *args], capture_output=True, text=True, timeout=60,
                         env={**clean, **env}, check=False)
    assert run.returncode == 2 and named in run.stderr, run.stderr


def test_a_reader_that_stops_reading_gets_no_traceback(tmp_path: Path) -> None:
    """`otel-agent-eval evaluate ... | head`: the report outgrows the pipe, the reader leaves."""
    traces = tmp_path / "traces.jsonl"
    export_demo_traces(traces, [s.name for s in SCENARIOS] * 10)
    proc = subprocess.Popen(CLI + ["evaluate", str(traces), "--format", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(100)
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1 and "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr


def test_evaluate_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"resourceSpans": [{"scopeSpans": [')
    run = subprocess.run(CLI + ["evaluate", str(broken)], capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 2 and "broken.json" in run.stderr or "line" in run.stderr
    bad_gate = subprocess.run(CLI + ["evaluate", str(broken), "--gate", "x=2"],
                              capture_output=True, text=True, timeout=60, check=False)
    assert bad_gate.returncode == 2 and "MIN_PASS_RATE" in bad_gate.stderr


def test_config_error_names_the_variable() -> None:
    run = subprocess.run(
        CLI + ["demo", "--traces", "1", "--metrics-port", "-1"], capture_output=True, text=True, timeout=60,
        env={"OTEL_AGENT_EVAL_SAMPLE_RATE": "often", "PATH": "/usr/bin:/bin"}, check=False,
    )
    assert run.returncode == 2
    assert "OTEL_AGENT_EVAL_SAMPLE_RATE" in run.stderr


def test_demo_prints_scores_and_serves_metrics_while_running() -> None:
    """The README's main command: scores printed; /metrics has scores with the demo's agent names."""
    proc = subprocess.Popen(
        CLI + ["demo", "--traces", "60", "--rate", "30", "--metrics-port", "0", "--linger", "30"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("Serving Prometheus metrics on "), first
        url = first.split(" on ")[1].strip()
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Keeping /metrics up"):
                break
        output = "".join(lines)
        assert "tool_call_accuracy" in output and "weather-agent" in output and "Summary:" in output
        body = urllib.request.urlopen(url, timeout=10).read().decode()
        for agent in ("weather-agent", "support-agent", "research-agent"):
            assert f'agent_eval_score_count{{agent="{agent}",evaluator="loop_detection",service="otel-agent-eval-demo"}}' in body
        assert 'agent_eval_results_total{agent="research-agent",evaluator="loop_detection",outcome="fail",reason="",service="otel-agent-eval-demo"}' in body
    finally:
        proc.kill()
        proc.wait(timeout=10)


WITHOUT_PROTOBUF = r'''
import sys
class Absent:  # protobuf and opentelemetry-proto as if not installed (no otlp extra)
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[:2] in (["google", "protobuf"], ["opentelemetry", "proto"]):
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, Absent())
from otel_agent_eval.cli.main import main
code = main(sys.argv[1:])
print("protobuf imported:", any(m.startswith(("google.protobuf", "opentelemetry.proto")) for m in sys.modules), file=sys.stderr)
sys.exit(code)
'''


def test_evaluate_json_needs_no_protobuf_and_protobuf_files_say_what_is_missing(tmp_path: Path, expectations: Path) -> None:
    """OTLP/JSON files are read without the protobuf classes (not even imported: a run over JSON does
    not pay for them); a protobuf file without them is a clear error naming the extra."""
    traces = tmp_path / "traces.jsonl"
    export_demo_traces(traces, ["weather: good (parallel calls)"])
    run = subprocess.run([sys.executable, "-c", WITHOUT_PROTOBUF, "evaluate", str(traces), "--format", "json",
                          "--expectations", str(expectations)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["traces_read"] == 1
    assert "protobuf imported: False" in run.stderr

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("app").start_as_current_span("invoke_agent a"):
        pass
    binary = tmp_path / "traces.pb"
    binary.write_bytes(encode_spans(exporter.get_finished_spans()).SerializeToString())
    pure = dict(os.environ, OTEL_AGENT_EVAL_PURE_PYTHON="true")  # as installed without a C compiler
    run = subprocess.run([sys.executable, "-c", WITHOUT_PROTOBUF, "evaluate", str(binary)], capture_output=True, text=True,
                         timeout=120, check=False, env=pure)
    assert run.returncode == 2
    assert "needs the otlp extra" in run.stderr and "Traceback" not in run.stderr
    if otlp._NATIVE is not None:  # the C decoder reads trace requests itself: the file is read without the extra
        run = subprocess.run([sys.executable, "-c", WITHOUT_PROTOBUF, "evaluate", str(binary)], capture_output=True,
                             text=True, timeout=120, check=False)
        assert run.returncode == 0, run.stderr


def test_the_demo_runs_when_its_metrics_port_is_taken() -> None:
    """The README's first command on a machine where 9464 is in use (another exporter): it used to die with
    OSError at startup; it runs and says how to get /metrics."""
    import socket

    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    try:
        port = held.getsockname()[1]
        run = subprocess.run(CLI + ["demo", "--traces", "5", "--rate", "0", "--metrics-port", str(port)],
                             capture_output=True, text=True, timeout=120, check=False,
                             env={**os.environ, "OTEL_AGENT_EVAL_PROMETHEUS_HOST": "127.0.0.1"})
    finally:
        held.close()
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"No /metrics: port {port} is taken (--metrics-port 0 picks a free one)" in run.stdout
    assert "5 agent runs assembled, 5 evaluated" in run.stdout
