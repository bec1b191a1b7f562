#!/usr/bin/env python
"""Offline benchmark: a large OTLP/JSON export to scores, ``otel-agent-eval evaluate`` vs ``multivon-eval``.

1. Export: N agent runs (default 5,000) of the scripted agent (``scripted_agent.py``,
   GenAI semconv spans through the real SDK: ``invoke_agent`` -> chat -> tool(s) ->
   chat, one run in ten with a failing tool and a retry), encoded with
   ``opentelemetry.exporter.otlp.proto.common.trace_encoder.encode_spans`` into one
   ``ExportTraceServiceRequest`` per agent run, written as OTLP/JSON lines
   (hex ids, integer enums: the OTLP/JSON encoding, as the Collector's file exporter
   writes it).
2. Ours, end to end: ``otel-agent-eval evaluate FILE --format json --evaluators
   tool_call_accuracy --expectations E`` in a subprocess (interpreter start, reading,
   decoding, assembly, scoring, the JSON report), wall time; runs/s.
3. multivon-eval 0.20, end to end, in its own virtualenv (``--multivon-python``,
   default ``/tmp/mvenv/bin/python``; set one up with ``python -m venv /tmp/mvenv &&
   /tmp/mvenv/bin/pip install 'multivon-eval[otel]==0.20.0'``): its OTLP import
   (``multivon_eval.integrations.otel.OtelTrace`` over the native request bytes, one
   per run, ``tool_coverage_complete=True``) scored by ``score_otel_trace`` with an
   ``EvalSuite`` holding its ``ToolCallAccuracy(require_order=True)`` and an
   ``EvalCase`` per run (input = the run's task, as ``score_otel_trace`` requires;
   ``expected_tool_calls`` = the same expectation). The per-line JSON scan to find
   each run's trace id, root span and task is inside the timed window.
Both compute the same score (ordered tool-call accuracy against the same expected
tools); the per-run pass counts are printed side by side as a check. Both timed
runs alternate (ours, theirs, theirs, ours, ...) over ``--rounds``; medians reported.

    python benchmarks/offline.py                 # 5,000 runs, 3 rounds
    python benchmarks/offline.py --traces 1000 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

EXPECTED = ["lookup_order", "refund_order"]

MULTIVON_SCRIPT = r'''
import json, sys, time
from multivon_eval import EvalCase, EvalSuite
from multivon_eval.evaluators.agent import ToolCallAccuracy
from multivon_eval.integrations.otel import GENAI_PROFILE, OtelTrace, score_otel_trace

path, expected = sys.argv[1], json.loads(sys.argv[2])
started = time.perf_counter()
suite = EvalSuite("offline-bench").add_evaluators(ToolCallAccuracy(require_order=True, threshold=0.5))
passed = failed = other = 0
with open(path, "rb") as f:
    for line in f:
        line = line.strip()
        if not line:
            continue
        doc = json.loads(line)
        spans = [s for r in doc["resourceSpans"] for ss in r["scopeSpans"] for s in ss["spans"]]
        root = next(s for s in spans if not s.get("parentSpanId"))
        attrs = {a["key"]: a["value"] for a in root.get("attributes", [])}
        messages = json.loads(attrs["gen_ai.input.messages"]["stringValue"])
        task = "".join(p["content"] for p in messages[-1]["parts"])
        trace = OtelTrace((line,), root["traceId"], root["spanId"], GENAI_PROFILE, tool_coverage_complete=True, encoding="json")
        report = score_otel_trace(suite, trace, EvalCase(input=task, expected_tool_calls=expected))
        for case in report.case_results:
            results = getattr(case, "results", None) or getattr(case, "eval_results", None) or []
            if not results:
                other += 1
            elif all(r.passed for r in results):
                passed += 1
            else:
                failed += 1
print(json.dumps({"seconds": time.perf_counter() - started, "passed": passed, "failed": failed, "other": other}))
'''


def generate(path: Path, n: int) -> int:
    """Write ``n`` scripted agent runs as OTLP/JSON lines (one request per run); returns spans written."""
    from google.protobuf import json_format
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_agent_eval.scripted_agent import ScriptedAgent, ToolError, Turn

    flaky = {"n": 0}

    def refund_order(order_id: str) -> dict[str, Any]:
        flaky["n"] += 1
        if flaky["n"] % 10 == 0:
            raise ToolError("payment gateway timeout")
        return {"refunded": True, "order_id": order_id}

    agent = ScriptedAgent("support", {"lookup_order": lambda order_id: {"order_id": order_id, "total": 39.9},
                                      "refund_order": refund_order, "search_kb": lambda q: ["kb-12"]})
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench")
    spans_written = 0
    with path.open("w") as out:
        for i in range(n):
            order = str(10_000 + i)
            turns = [Turn("Looking up the order.", [("lookup_order", {"order_id": order})]),
                     Turn("Refunding.", [("refund_order", {"order_id": order})])]
            if i % 7 == 3:  # some runs search first: out of order for the expectation
                turns.insert(0, Turn("Checking the policy.", [("search_kb", {"q": "refund policy"})]))
            if i % 5 == 4:  # some runs forget the refund
                turns = turns[:1]
            turns.append(Turn(f"Order {order} refunded."))
            agent.run(tracer, f"Please refund order {order}.", turns)
            spans = exporter.get_finished_spans()
            exporter.clear()
            doc = json_format.MessageToDict(encode_spans(spans), use_integers_for_enums=True)
            for resource in doc["resourceSpans"]:  # OTLP/JSON: hex ids, not proto3 JSON's base64
                for scope in resource["scopeSpans"]:
                    for span in scope["spans"]:
                        for key in ("traceId", "spanId", "parentSpanId"):
                            if key in span:
                                import base64

                                span[key] = base64.b64decode(span[key]).hex()
            out.write(json.dumps(doc, separators=(",", ":")) + "\n")
            spans_written += len(spans)
    provider.shutdown()
    return spans_written


def run_ours(path: Path, expectations: Path) -> tuple[float, dict[str, Any]]:
    exe = Path(sys.executable).with_name("otel-agent-eval")
    cmd = [str(exe), "evaluate", str(path), "--format", "json", "--evaluators", "tool_call_accuracy", "--expectations", str(expectations)]
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(done.stderr[-2000:])
    report = json.loads(done.stdout)
    totals = report["totals"]["tool_call_accuracy"]
    return seconds, {"runs": len(report["agent_runs"]), "passed": totals.get("pass", 0), "failed": totals.get("fail", 0)}


def run_multivon(python: str, path: Path) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    done = subprocess.run([python, "-c", MULTIVON_SCRIPT, str(path), json.dumps(EXPECTED)], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return seconds, json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--multivon-python", default=os.environ.get("MULTIVON_PYTHON", "/tmp/mvenv/bin/python"))
    parser.add_argument("--keep", help="write the export here and keep it")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="offline-bench-"))
    export = Path(args.keep) if args.keep else workdir / "export.jsonl"
    expectations = workdir / "expectations.json"
    expectations.write_text(json.dumps([{"agent": "support", "expected_tools": EXPECTED, "require_order": True}]))
    started = time.perf_counter()
    spans = generate(export, args.traces)
    print(f"export: {args.traces:,} agent runs, {spans:,} spans, {export.stat().st_size / 2**20:,.1f} MiB OTLP/JSON lines "
          f"({time.perf_counter() - started:.1f} s to generate)")

    multivon_ok, why = True, ""
    try:
        probe = subprocess.run([args.multivon_python, "-c", "import importlib.metadata as m; print(m.version('multivon-eval'))"],
                               capture_output=True, text=True)
        if probe.returncode != 0:
            multivon_ok, why = False, probe.stderr.strip().splitlines()[-1] if probe.stderr else "not installed"
        else:
            print(f"multivon-eval {probe.stdout.strip()} at {args.multivon_python}")
    except FileNotFoundError:
        multivon_ok, why = False, f"{args.multivon_python} not found"

    ours: list[float] = []
    theirs: list[float] = []
    check_ours = check_theirs = None
    for r in range(args.rounds):
        order = ("ours", "theirs") if r % 2 == 0 else ("theirs", "ours")
        for who in order:
            if who == "ours":
                seconds, check_ours = run_ours(export, expectations)
                ours.append(seconds)
            elif multivon_ok:
                try:
                    seconds, check_theirs = run_multivon(args.multivon_python, export)
                    theirs.append(seconds)
                except RuntimeError as exc:
                    multivon_ok, why = False, f"multivon-eval failed on the export: {str(exc).strip().splitlines()[-1]}"
    ours_s = statistics.median(ours)
    print(f"\notel-agent-eval evaluate: {ours_s:.2f} s median of {len(ours)} -> {args.traces / ours_s:,.0f} runs/s "
          f"(end to end, interpreter start included); {check_ours}")
    if multivon_ok and theirs:
        theirs_s = statistics.median(theirs)
        print(f"multivon-eval 0.20:       {theirs_s:.2f} s median of {len(theirs)} -> {args.traces / theirs_s:,.0f} runs/s; {check_theirs}")
        print(f"ratio (ours / multivon-eval, runs per second): {theirs_s / ours_s:.2f}")
    else:
        print(f"multivon-eval: not measured: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
