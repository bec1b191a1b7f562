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
   trace (turns, LLM calls, tool calls), then freeing what it made (ours frees its report
   inside its window too): no scoring, timed inside its process after its imports; its whole
   process (interpreter start, imports, exit) is printed as well.
multivon-eval and ours compute the same score (ordered tool-call accuracy against the same
expected tools); the per-run pass counts are printed side by side as a check. Timed runs
alternate (ours, theirs..., then reversed) over ``--rounds``; medians reported, wall time
and CPU time (user + system of the process: the machine is shared, CPU time drifts less),
and the ratios of each round's runs (side by side) with their median and range, after imports
and whole process for both sides. Ours runs this checkout's code in ``--ours-python`` (default:
the running interpreter; a virtualenv with ``pip install 'otel-agent-eval[otlp]'`` is what a
user has: the test environment's extra packages and plugins cost the command's set-up more).

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
from typing import Any, NamedTuple

EXPECTED = ["lookup_order", "refund_order"]

MULTIVON_SCRIPT = r'''
import json, sys, time
from multivon_eval import EvalCase, EvalSuite
from multivon_eval.evaluators.agent import ToolCallAccuracy
from multivon_eval.integrations.otel import GENAI_PROFILE, OtelTrace, score_otel_trace

path, expected = sys.argv[1], json.loads(sys.argv[2])
started, started_cpu = time.perf_counter(), time.process_time()
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
print(json.dumps({"seconds": time.perf_counter() - started, "cpu": time.process_time() - started_cpu, "passed": passed, "failed": failed, "other": other}))
'''


AGENTEVALS_SCRIPT = r'''
import json, sys, time
started_cpu = time.process_time()
from agentevals.loader.auto import load_telemetry
from agentevals.genai.extract import extract_turns
wall, cpu = time.perf_counter(), time.process_time()
telemetry = load_telemetry(sys.argv[1])
turns = [turn for trace in telemetry.traces for turn in extract_turns(trace)]
check = {"traces": len(telemetry.traces), "turns": len(turns), "tool_calls": sum(len(t.tool_calls) for t in turns)}
del telemetry, turns  # freed inside the window, as ours frees its report before its clock stops
print(json.dumps({"seconds": time.perf_counter() - wall, "cpu": time.process_time() - cpu, "imports_cpu": cpu - started_cpu, **check}))
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


CHECKOUT = Path(__file__).resolve().parent.parent
"""Ours runs from here (``-m`` and ``-c`` put the working directory first on ``sys.path``): this
checkout's code is what is measured, whatever version is installed in ``--ours-python``."""


class Timed(NamedTuple):
    """One run: wall and CPU seconds of the timed window (``after imports`` for the in-process
    scripts, the whole process for ``ours``), and of the whole process (interpreter start and imports
    included: user + system of the child)."""

    wall: float
    cpu: float
    whole_wall: float
    whole_cpu: float
    check: dict[str, Any]


def _timed(cmd: list[str], cwd: Path | None = None) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Wall and CPU seconds (user + system of the child) of one subprocess."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, check=False)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done


def _in_process(cmd: list[str], cwd: Path | None = None) -> Timed:
    """A script that prints its own timed window (``seconds``, ``cpu``) as the last line of JSON."""
    whole_wall, whole_cpu, done = _timed(cmd, cwd)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return Timed(found.pop("seconds"), found.pop("cpu"), whole_wall, whole_cpu, found)


def run_ours(python: str, path: Path, expectations: Path) -> Timed:
    """``python -m otel_agent_eval evaluate``, the whole process (this checkout's code)."""
    cmd = [python, "-m", "otel_agent_eval", "evaluate", str(path), "--format", "json", "--evaluators", "tool_call_accuracy",
           "--expectations", str(expectations)]
    seconds, cpu, done = _timed(cmd, CHECKOUT)
    if done.returncode not in (0, 1):
        raise RuntimeError(done.stderr[-2000:])
    report = json.loads(done.stdout)
    totals = report["totals"]["tool_call_accuracy"]
    steps = sum(len(run["trace"]["steps"]) for run in report["agent_runs"])
    calls = sum(len(step["tool_calls"]) for run in report["agent_runs"] for step in run["trace"]["steps"])
    return Timed(seconds, cpu, seconds, cpu, {"traces": report["traces_read"], "runs": len(report["agent_runs"]), "steps": steps,
                                               "tool_calls": calls, "passed": totals.get("pass", 0), "failed": totals.get("fail", 0)})


def run_ours_in_process(python: str, path: Path, expectations: Path) -> Timed:
    """The same command timed inside its process after imports, as agentevals' is."""
    return _in_process([python, "-c", OURS_IN_PROCESS_SCRIPT, "evaluate", str(path), "--format", "json",
                        "--evaluators", "tool_call_accuracy", "--expectations", str(expectations)], CHECKOUT)


def run_agentevals(python: str, path: Path) -> Timed:
    """agentevals' load-and-extract, timed inside its process after imports (and its whole process)."""
    return _in_process([python, "-c", AGENTEVALS_SCRIPT, str(path)])


def run_multivon(python: str, path: Path) -> Timed:
    """multivon-eval's import and scoring, timed inside its process after imports (and its whole process)."""
    return _in_process([python, "-c", MULTIVON_SCRIPT, str(path), json.dumps(EXPECTED)])


def _probe(python: str, package: str) -> str | None:
    """The package's version in that interpreter, or None (and why, printed)."""
    try:
        probe = subprocess.run([python, "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
                               capture_output=True, text=True, check=False)
    except FileNotFoundError:
        print(f"{package}: not measured: {python} not found")
        return None
    if probe.returncode != 0:
        print(f"{package}: not measured: {(probe.stderr.strip().splitlines() or ['not installed'])[-1]}")
        return None
    print(f"{package} {probe.stdout.strip()} at {python}")
    return probe.stdout.strip()


def _json_parser(python: str) -> str:
    """The JSON parser ours decodes OTLP/JSON with in that interpreter (orjson comes with the ``otlp`` extra)."""
    probe = subprocess.run([python, "-c", ("from otel_agent_eval.formats import otlp_json as j; import importlib.metadata as m; "
                            "print('orjson ' + m.version('orjson') if j.CLEAN_TEXT else 'json (standard library)')")],
                           capture_output=True, text=True, cwd=CHECKOUT, check=False)
    return probe.stdout.strip() or f"unknown ({(probe.stderr.strip().splitlines() or ['?'])[-1]})"


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ours-python", default=os.environ.get("OURS_PYTHON", sys.executable),
                        help="interpreter ours runs in (this checkout's code either way; e.g. a virtualenv made with "
                             "pip install 'otel-agent-eval[otlp]', as a user installs it)")
    parser.add_argument("--multivon-python", default=os.environ.get("MULTIVON_PYTHON", "/tmp/mvenv/bin/python"))
    parser.add_argument("--agentevals-python", default=os.environ.get("AGENTEVALS_PYTHON", "/tmp/agentevals/bin/python"))
    parser.add_argument("--skip-multivon", action="store_true", help="leave multivon-eval out (~2 min per run)")
    parser.add_argument("--keep", help="write the export here and keep it (reused when it exists)")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="offline-bench-"))
    export = Path(args.keep).resolve() if args.keep else workdir / "export.jsonl"
    expectations = workdir / "expectations.json"
    expectations.write_text(json.dumps([{"agent": "support", "expected_tools": EXPECTED, "require_order": True}]))
    started = time.perf_counter()
    if args.keep and export.exists():
        print(f"export: reusing {export} ({export.stat().st_size / 2**20:,.1f} MiB)")
    else:
        spans = generate(export, args.traces)
        print(f"export: {args.traces:,} agent runs, {spans:,} spans, {export.stat().st_size / 2**20:,.1f} MiB OTLP/JSON lines "
              f"({time.perf_counter() - started:.1f} s to generate)")
    print(f"otel-agent-eval: {CHECKOUT} with {args.ours_python}; OTLP/JSON parsed by {_json_parser(args.ours_python)}")

    others = {"agentevals": (args.agentevals_python, "agentevals-cli", run_agentevals)}
    if not args.skip_multivon:
        others["multivon"] = (args.multivon_python, "multivon-eval", run_multivon)
    versions = {name: _probe(python, package) for name, (python, package, _) in others.items()}
    rounds: list[dict[str, Timed]] = []
    for r in range(args.rounds):  # interleaved: ours, theirs..., then the reverse order in the next round
        order = ["ours", "ours_in_process", *others] if r % 2 == 0 else [*reversed(others), "ours_in_process", "ours"]
        measured: dict[str, Timed] = {}
        for who in order:
            try:
                if who == "ours":
                    measured[who] = run_ours(args.ours_python, export, expectations)
                elif who == "ours_in_process":
                    measured[who] = run_ours_in_process(args.ours_python, export, expectations)
                elif versions[who]:
                    python, _, run = others[who]
                    measured[who] = run(python, export)  # type: ignore[operator]
            except RuntimeError as exc:
                print(f"{who}: failed on the export: {str(exc).strip().splitlines()[-1]}")
                if who in versions:
                    versions[who] = None
                    continue
                raise
        rounds.append(measured)

    traces = rounds[-1]["ours"].check["traces"]
    if "agentevals" in rounds[-1] and rounds[-1]["agentevals"].check["traces"] != traces:
        print(f"WARNING: agentevals read {rounds[-1]['agentevals'].check['traces']} traces, ours {traces}")

    def rates(who: str, field: str) -> list[float]:
        return [traces / getattr(m[who], field) for m in rounds if who in m]

    def median_rate(who: str, field: str) -> float:
        return statistics.median(rates(who, field))

    labels = {"ours": "otel-agent-eval evaluate, whole command",
              "ours_in_process": "otel-agent-eval evaluate, after imports",
              "agentevals": f"agentevals-cli {versions.get('agentevals')} load + extract, after imports",
              "agentevals_whole": f"agentevals-cli {versions.get('agentevals')} load + extract, whole process",
              "multivon": f"multivon-eval {versions.get('multivon')} import + score, after imports"}
    print(f"\n{traces:,} traces; runs per second, medians of {len(rounds)} rounds\n")
    print(f"{'':<58} {'wall':>8} {'CPU':>8}  check")
    rows = [("ours", "ours", "wall", "cpu"), ("ours_in_process", "ours_in_process", "wall", "cpu")]
    for who in others:
        rows.append((who, who, "wall", "cpu"))
        if who == "agentevals":
            rows.append(("agentevals_whole", who, "whole_wall", "whole_cpu"))
    for label, who, wall, cpu in rows:
        if rates(who, cpu):
            print(f"{labels[label]:<58} {median_rate(who, wall):>8,.0f} {median_rate(who, cpu):>8,.0f}  "
                  f"{rounds[-1][who].check if label == who else ''}")

    # Ratios of the same round (the runs next to each other), then their median over rounds: a
    # noisy round moves one ratio, not the figure.
    def ratios(ours: str, ours_field: str, theirs: str, theirs_field: str) -> list[float]:
        return [getattr(m[theirs], theirs_field) / getattr(m[ours], ours_field) for m in rounds if theirs in m]

    for who in others:
        if not any(who in m for m in rounds):
            continue
        print(f"\nratio ours / {who}, per round, CPU: median (min-max) of {len(ratios('ours', 'cpu', who, 'cpu'))}")
        print(f"  after imports, both:                 {_spread(ratios('ours_in_process', 'cpu', who, 'cpu'))}"
              f"   (wall {_spread(ratios('ours_in_process', 'wall', who, 'wall'))})")
        print(f"  whole process, both:                 {_spread(ratios('ours', 'cpu', who, 'whole_cpu'))}"
              f"   (wall {_spread(ratios('ours', 'wall', who, 'whole_wall'))})")
        print(f"  ours whole, theirs after imports:    {_spread(ratios('ours', 'cpu', who, 'cpu'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
