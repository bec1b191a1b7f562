#!/usr/bin/env python
"""Offline benchmark: a large OTLP/JSON export to scores, ``otel-agent-eval evaluate`` vs ``agentevals-cli`` and ``multivon-eval``.

1. Export: N agent runs (default 5,000) of the scripted agent (``cli/scripted_agent.py``,
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
4. agentevals-cli 0.11, in its own virtualenv (``--agentevals-python``, default
   ``/tmp/agentevals/bin/python``; ``python3 -m venv /tmp/agentevals &&
   /tmp/agentevals/bin/pip install agentevals-cli==0.11.0``): its load-and-extract path
   only, ``agentevals.loader.auto.load_telemetry(FILE)`` (reads the file, decodes OTLP/JSON
   lines, builds traces) then ``agentevals.genai.extract.extract_turns(trace)`` for every
   trace (turns, LLM calls, tool calls): no scoring, and timed inside its process, after
   its imports, so interpreter start and imports count against ours only.
multivon-eval and ours compute the same score (ordered tool-call accuracy against the same
expected tools); the per-run pass counts are printed side by side as a check. Timed runs
alternate (ours, theirs..., then reversed) over ``--rounds``; medians reported, wall time
and CPU time (user + system of the process: the machine is shared, CPU time drifts less).

    python benchmarks/offline.py                 # 5,000 runs, 3 rounds
    python benchmarks/offline.py --traces 1000 --rounds 1 --skip-multivon
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


AGENTEVALS_SCRIPT = r'''
import json, sys, time
from agentevals.loader.auto import load_telemetry
from agentevals.genai.extract import extract_turns
wall, cpu = time.perf_counter(), time.process_time()
telemetry = load_telemetry(sys.argv[1])
turns = [turn for trace in telemetry.traces for turn in extract_turns(trace)]
print(json.dumps({"seconds": time.perf_counter() - wall, "cpu": time.process_time() - cpu, "traces": len(telemetry.traces),
                  "turns": len(turns), "tool_calls": sum(len(t.tool_calls) for t in turns)}))
'''


OURS_IN_PROCESS_SCRIPT = r'''
import json, os, sys, time
from otel_agent_eval.cli import evaluate, main  # noqa: F401  what `evaluate` imports, before the clock starts
from otel_agent_eval.evaluators import build_configured_evaluators
from otel_agent_eval.formats.otlp import iter_trace_file  # noqa: F401  (the command imports these on first use)
from otel_agent_eval.pipeline.build import evaluation  # noqa: F401
import otel_agent_eval.evaluators.judge.settings  # noqa: F401  (configure_evaluators asks it whether a judge is configured)
wall, cpu = time.perf_counter(), time.process_time()
real_stdout, sys.stdout = sys.stdout, open(os.devnull, "w")
code = main(sys.argv[1:])
sys.stdout.close()
sys.stdout = real_stdout
print(json.dumps({"seconds": time.perf_counter() - wall, "cpu": time.process_time() - cpu, "exit": code}))
'''


def generate(path: Path, n: int) -> int:
    """Write ``n`` scripted agent runs as OTLP/JSON lines (one request per run); returns spans written."""
    from google.protobuf import json_format
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        InMemorySpanExporter,
    )

    from otel_agent_eval.cli.scripted_agent import ScriptedAgent, ToolError, Turn

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


def _timed(cmd: list[str]) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Wall and CPU seconds (user + system of the child) of one subprocess."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done


def run_ours(path: Path, expectations: Path) -> tuple[float, float, dict[str, Any]]:
    """``python -m otel_agent_eval evaluate`` (this checkout's code, whatever is installed)."""
    cmd = [sys.executable, "-m", "otel_agent_eval", "evaluate", str(path), "--format", "json", "--evaluators", "tool_call_accuracy",
           "--expectations", str(expectations)]
    seconds, cpu, done = _timed(cmd)
    if done.returncode not in (0, 1):
        raise RuntimeError(done.stderr[-2000:])
    report = json.loads(done.stdout)
    totals = report["totals"]["tool_call_accuracy"]
    steps = sum(len(run["trace"]["steps"]) for run in report["agent_runs"])
    calls = sum(len(step["tool_calls"]) for run in report["agent_runs"] for step in run["trace"]["steps"])
    return seconds, cpu, {"runs": len(report["agent_runs"]), "steps": steps, "tool_calls": calls,
                          "passed": totals.get("pass", 0), "failed": totals.get("fail", 0)}


def run_ours_in_process(path: Path, expectations: Path) -> tuple[float, float, dict[str, Any]]:
    """The same command timed inside its process after imports, as agentevals' is."""
    _, _, done = _timed([sys.executable, "-c", OURS_IN_PROCESS_SCRIPT, "evaluate", str(path), "--format", "json",
                         "--evaluators", "tool_call_accuracy", "--expectations", str(expectations)])
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return found.pop("seconds"), found.pop("cpu"), found


def run_agentevals(python: str, path: Path) -> tuple[float, float, dict[str, Any]]:
    """agentevals' load-and-extract, timed inside its process after imports: (seconds, CPU seconds, check)."""
    _, _, done = _timed([python, "-c", AGENTEVALS_SCRIPT, str(path)])
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return found.pop("seconds"), found.pop("cpu"), found


def run_multivon(python: str, path: Path) -> tuple[float, float, dict[str, Any]]:
    seconds, cpu, done = _timed([python, "-c", MULTIVON_SCRIPT, str(path), json.dumps(EXPECTED)])
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return seconds, cpu, json.loads(done.stdout.strip().splitlines()[-1])


def _probe(python: str, package: str) -> str | None:
    """The package's version in that interpreter, or None (and why, printed)."""
    try:
        probe = subprocess.run([python, "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
                               capture_output=True, text=True)
    except FileNotFoundError:
        print(f"{package}: not measured: {python} not found")
        return None
    if probe.returncode != 0:
        print(f"{package}: not measured: {(probe.stderr.strip().splitlines() or ['not installed'])[-1]}")
        return None
    print(f"{package} {probe.stdout.strip()} at {python}")
    return probe.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--multivon-python", default=os.environ.get("MULTIVON_PYTHON", "/tmp/mvenv/bin/python"))
    parser.add_argument("--agentevals-python", default=os.environ.get("AGENTEVALS_PYTHON", "/tmp/agentevals/bin/python"))
    parser.add_argument("--skip-multivon", action="store_true", help="leave multivon-eval out (~2 min per run)")
    parser.add_argument("--keep", help="write the export here and keep it (reused when it exists)")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="offline-bench-"))
    export = Path(args.keep) if args.keep else workdir / "export.jsonl"
    expectations = workdir / "expectations.json"
    expectations.write_text(json.dumps([{"agent": "support", "expected_tools": EXPECTED, "require_order": True}]))
    started = time.perf_counter()
    if args.keep and export.exists():
        print(f"export: reusing {export}")
    else:
        spans = generate(export, args.traces)
        print(f"export: {args.traces:,} agent runs, {spans:,} spans, {export.stat().st_size / 2**20:,.1f} MiB OTLP/JSON lines "
              f"({time.perf_counter() - started:.1f} s to generate)")

    others = {"agentevals": (args.agentevals_python, "agentevals-cli", run_agentevals)}
    if not args.skip_multivon:
        others["multivon"] = (args.multivon_python, "multivon-eval", run_multivon)
    versions = {name: _probe(python, package) for name, (python, package, _) in others.items()}
    timings: dict[str, list[tuple[float, float]]] = {"ours": [], "ours_in_process": [], **{name: [] for name in others}}
    checks: dict[str, Any] = {}
    for r in range(args.rounds):
        order = ["ours", "ours_in_process", *others] if r % 2 == 0 else [*reversed(others), "ours_in_process", "ours"]
        for who in order:
            try:
                if who == "ours":
                    seconds, cpu, checks[who] = run_ours(export, expectations)
                elif who == "ours_in_process":
                    seconds, cpu, checks[who] = run_ours_in_process(export, expectations)
                elif versions[who]:
                    python, _, run = others[who]
                    seconds, cpu, checks[who] = run(python, export)  # type: ignore[operator]
                else:
                    continue
            except RuntimeError as exc:
                print(f"{who}: failed on the export: {str(exc).strip().splitlines()[-1]}")
                versions[who] = None
                continue
            timings[who].append((seconds, cpu))

    def rate(who: str) -> tuple[float, float]:
        return (args.traces / statistics.median(s for s, _ in timings[who]),
                args.traces / statistics.median(c for _, c in timings[who]))

    ours_wall, ours_cpu = rate("ours")
    inner_wall, inner_cpu = rate("ours_in_process")
    print(f"\n{'':<44} {'runs/s wall':>12} {'runs/s CPU':>11}  check")
    print(f"{'otel-agent-eval evaluate (end to end)':<44} {ours_wall:>12,.0f} {ours_cpu:>11,.0f}  {checks['ours']}")
    print(f"{'otel-agent-eval evaluate (after imports)':<44} {inner_wall:>12,.0f} {inner_cpu:>11,.0f}  {checks['ours_in_process']}")
    labels = {"agentevals": f"agentevals-cli {versions.get('agentevals')} (load + extract)",
              "multivon": f"multivon-eval {versions.get('multivon')} (import + score)"}
    for who in others:
        if timings[who]:
            wall, cpu = rate(who)
            print(f"{labels[who]:<44} {wall:>12,.0f} {cpu:>11,.0f}  {checks[who]}")
    for who in others:
        if timings[who]:
            wall, cpu = rate(who)
            print(f"ratio ours / {who}: end to end {ours_wall / wall:.2f} (wall), {ours_cpu / cpu:.2f} (CPU); "
                  f"after imports {inner_wall / wall:.2f} (wall), {inner_cpu / cpu:.2f} (CPU); medians of {len(timings[who])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
