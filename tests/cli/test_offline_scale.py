"""`evaluate` at scale: streamed reading, traces spread over a file assembled whole in bounded
memory (spilled to disk beyond the bound), log records joined, and `--jobs` merging processes.

The spans come from the real SDK (demo scenarios and the scripted agent), encoded by the
real OTLP encoder; the CLI runs as a user runs it, in a subprocess.
"""

from __future__ import annotations

import gc
import gzip
import json
import random
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.common")

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_agent_eval.cli.demo import SCENARIOS
from otel_agent_eval.cli.evaluate import (
    TraceGroups,
    budget_share,
    evaluate_files,
    read_traces,
    split_files,
)
from otel_agent_eval.cli.scripted_agent import ScriptedAgent, Turn
from otel_agent_eval.config import Settings
from otel_agent_eval.evaluators import build_evaluators as _build
from tests.formats.test_otlp import to_otlp_json
from tests.offline_reference import evaluate_records, read_files

CLI = [sys.executable, "-m", "otel_agent_eval"]


def build_evaluators() -> list[Any]:
    return _build(Settings.load())


def _sdk_spans(runs: int, seed: int = 7) -> list[Any]:
    """Finished SDK spans of ``runs`` demo scenario runs (each its own trace)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("app")
    rng = random.Random(seed)
    for _ in range(runs):
        scenario = rng.choice(SCENARIOS)
        scenario.agent.run(tracer, scenario.task, scenario.turns)
    spans = list(exporter.get_finished_spans())
    provider.shutdown()
    return spans


def _interleaved_lines(spans: list[Any], per_line: int, seed: int = 11) -> list[str]:
    """Spans shuffled over the whole file, ``per_line`` per OTLP/JSON line: every trace spread out."""
    shuffled = spans[:]
    random.Random(seed).shuffle(shuffled)
    return [to_otlp_json(encode_spans(shuffled[i : i + per_line])) for i in range(0, len(shuffled), per_line)]


def _runs(report: Any) -> list[tuple[str, str, list[list[str]], list[tuple[str, str]]]]:
    return sorted(
        (t.trace_id, t.agent_span_id, [[c.name for c in s.tool_calls] for s in t.steps], [(r.evaluator, r.label) for r in results])
        for t, results in report.evaluated
    )


def test_interleaved_traces_are_assembled_whole_through_the_spill(tmp_path: Path) -> None:
    spans = _sdk_spans(40)
    path = tmp_path / "interleaved.jsonl"
    path.write_text("\n".join(_interleaved_lines(spans, per_line=3)) + "\n")
    evaluators = build_evaluators()
    expected = evaluate_records(read_files([path]), evaluators)
    assert len(expected.evaluated) == 40

    in_memory, stats = evaluate_files([path], evaluators)
    assert stats.spilled_records == 0
    # a bound far below the file's spans: spilled, and buckets split again (bound < one bucket)
    spilled, spill_stats = evaluate_files([path], evaluators, max_buffered_records=5)
    assert spill_stats.spilled_records == len(spans) == spill_stats.spans
    for report in (in_memory, spilled):
        assert _runs(report) == _runs(expected)
        assert report.traces_read == expected.traces_read == 40


def test_length_prefixed_protobuf_and_gzip_stream_interleaved(tmp_path: Path) -> None:
    spans = _sdk_spans(12, seed=3)
    shuffled = spans[:]
    random.Random(5).shuffle(shuffled)
    chunks = [encode_spans(shuffled[i : i + 4]).SerializeToString() for i in range(0, len(shuffled), 4)]
    stream = tmp_path / "stream.bin"
    stream.write_bytes(b"".join(len(c).to_bytes(4, "big") + c for c in chunks))
    jsonl_gz = tmp_path / "spans.jsonl.gz"
    jsonl_gz.write_bytes(gzip.compress(("\n".join(_interleaved_lines(spans, per_line=4, seed=5)) + "\n").encode()))
    evaluators = build_evaluators()
    expected = _runs(evaluate_records(read_files([stream]), evaluators))
    assert len(expected) == 12
    for path in (stream, jsonl_gz):
        report, _ = evaluate_files([path], evaluators, max_buffered_records=7)
        assert _runs(report) == expected


def test_log_records_in_the_file_are_joined_to_their_spans(tmp_path: Path) -> None:
    """Event-only content (prompts and completions as log records) in a logs document of the same file."""
    spans = _sdk_spans(1, seed=1)
    agent = next(s for s in spans if s.name.startswith("invoke_agent"))
    trace_id, span_id = f"{agent.context.trace_id:032x}", f"{agent.context.span_id:016x}"
    stripped = [json.loads(to_otlp_json(encode_spans(spans)))]
    for rs in stripped[0]["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                if span["spanId"] == span_id:
                    span["attributes"] = [a for a in span["attributes"] if a["key"] != "gen_ai.input.messages"]
    task = "What is the weather in the log record?"
    content = json.dumps([{"role": "user", "parts": [{"type": "text", "content": task}]}])
    logs = {"resourceLogs": [{"scopeLogs": [{"logRecords": [{
        "timeUnixNano": "1", "traceId": trace_id, "spanId": span_id, "eventName": "gen_ai.client.inference.operation.details",
        "attributes": [{"key": "gen_ai.input.messages", "value": {"stringValue": content}}]}]}]}]}
    orphan = {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"timeUnixNano": "1", "eventName": "gen_ai.x"}]}]}]}
    path = tmp_path / "both.jsonl"
    path.write_text("\n".join([json.dumps(logs), json.dumps(stripped[0]), json.dumps(orphan)]) + "\n")
    for bound in (1_000, 1):
        report, stats = evaluate_files([path], build_evaluators(), max_buffered_records=bound)
        assert [t.input for t, _ in report.evaluated] == [task]
        assert stats.log_records == 2 and stats.log_records_without_trace == 1


def _scripted_file(path: Path, runs: int) -> None:
    """``runs`` scripted agent runs whose spans are interleaved pairwise across lines."""
    agent = ScriptedAgent("support", {"lookup": lambda order_id: {"order": order_id, "note": "x" * 400}})
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench")
    with path.open("w") as out:
        pending: list[Any] = []
        for i in range(runs):
            agent.run(tracer, f"Find order {i}. " + "context " * 50, [Turn("Looking.", [("lookup", {"order_id": str(i)})]), Turn("Done.")])
            spans = list(exporter.get_finished_spans())
            exporter.clear()
            half = len(spans) // 2
            # this run's first half with the previous run's second half: no line holds a whole trace
            out.write(to_otlp_json(encode_spans(spans[:half] + pending)) + "\n")
            pending = spans[half:]
        out.write(to_otlp_json(encode_spans(pending)) + "\n")
    provider.shutdown()


def _peak_reading(path: Path, bound: int) -> tuple[int, int]:
    """Peak traced bytes while reading and grouping ``path`` (records dropped as they come out), and traces."""
    gc.collect()
    tracemalloc.start()
    try:
        traces = sum(1 for _ in read_traces([path], TraceGroups(bound)))
        return tracemalloc.get_traced_memory()[1], traces
    finally:
        tracemalloc.stop()


def test_reading_memory_is_bounded_by_the_bound_not_the_file(tmp_path: Path) -> None:
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    _scripted_file(small, 150)
    _scripted_file(large, 600)
    assert large.stat().st_size > 3.5 * small.stat().st_size
    bound = 200  # spans: well under the small file's ~750
    small_peak, small_traces = _peak_reading(small, bound)
    large_peak, large_traces = _peak_reading(large, bound)
    assert (small_traces, large_traces) == (150, 600)
    # four times the file, about the same peak (buffer + one spill bucket + one line)
    assert large_peak < 1.6 * small_peak, (small_peak, large_peak)
    unbounded_peak, _ = _peak_reading(large, 10**9)
    assert unbounded_peak > 2.5 * large_peak  # the bound is what keeps it flat


def test_budget_share_and_file_split() -> None:
    env = {"OTEL_AGENT_EVAL_JUDGE_BUDGET_TOKENS_PER_HOUR": "1000", "OTEL_AGENT_EVAL_JUDGE_BUDGET_USD_PER_HOUR": "3"}
    assert budget_share(env, 4) == {"OTEL_AGENT_EVAL_JUDGE_BUDGET_TOKENS_PER_HOUR": "250",
                                    "OTEL_AGENT_EVAL_JUDGE_BUDGET_USD_PER_HOUR": "0.75"}
    assert budget_share({"OTEL_AGENT_EVAL_JUDGE_BUDGET_TOKENS_PER_HOUR": "0"}, 3) == {
        "OTEL_AGENT_EVAL_JUDGE_BUDGET_TOKENS_PER_HOUR": "0"}
    assert budget_share({}, 2) == {}


def test_split_files_balances_by_size(tmp_path: Path) -> None:
    sizes = {"a": 900, "b": 500, "c": 400, "d": 100}
    for name, size in sizes.items():
        (tmp_path / name).write_bytes(b"x" * size)
    shares = split_files([tmp_path / n for n in sizes], 2)
    assert sorted(sorted(Path(p).name for p in share) for share in shares) == [["a", "d"], ["b", "c"]]
    assert len(split_files([tmp_path / "a"], 8)) == 1


def test_cli_jobs_merges_one_report(tmp_path: Path) -> None:
    files = []
    spans = _sdk_spans(9, seed=2)
    by_trace: dict[int, list[Any]] = {}
    for span in spans:
        by_trace.setdefault(span.context.trace_id, []).append(span)
    for i, chunk in enumerate([list(by_trace.values())[j::3] for j in range(3)]):
        path = tmp_path / f"part{i}.jsonl"
        path.write_text("\n".join(to_otlp_json(encode_spans(trace)) for trace in chunk) + "\n")
        files.append(str(path))

    def run(*extra: str) -> dict[str, Any]:
        done = subprocess.run(CLI + ["evaluate", *files, "--format", "json", *extra],
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode in (0, 1), done.stderr
        return json.loads(done.stdout)

    one, three = run(), run("--jobs", "3")
    assert three["traces_read"] == one["traces_read"] == 9
    assert three["totals"] == one["totals"]
    def key(run: dict[str, Any]) -> str:
        return run["trace"]["trace_id"]

    assert sorted(three["agent_runs"], key=key) == sorted(one["agent_runs"], key=key)
