#!/usr/bin/env python
"""Memory benchmark: RSS with the TraceBuffer full at its default bounds.

Each measurement runs in a fresh subprocess (so nothing of an earlier one is
resident): a real ``TracerProvider`` with ``AgentEvalProcessor`` at its default
bounds (``max_buffered_traces`` 2000, ``max_spans_per_trace`` 2000, intake 20000),
trace completion pushed out of reach (settle delay, idle timeout and max age one
hour) so that every kept trace stays buffered; realistic GenAI agent runs
(``benchmarks/pipeline.py``'s builder: ~1.5 kB system prompt, windowed history,
tool arguments and results) are created through the SDK in the app thread.

Phases, RSS (``VmRSS``) after each, peak (``VmHWM``) at the end:

  base      provider + processor built, nothing buffered;
  quarter   500 traces buffered (25 % of the bound);
  full      2,000 traces buffered (the bound);
  overflow  10,000 more traces (5x the bound): the buffer evicts the oldest
            (``buffer_full``) and must not grow;
  overflow2 10,000 more again: does RSS plateau (allocator slack) or keep growing (a leak)?

Budget (how it is derived): the buffer is bounded in traces and spans, not bytes,
so its memory budget is the cost of the bound at this workload's trace size,
extrapolated from the quarter fill: ``budget = base + max_buffered_traces x
(quarter - base) / 500``. The bound is honoured within 10 % when the peak RSS of
the whole run (overflow included) stays <= 1.10 x budget. Bytes per buffered span
= (full - base) / spans buffered; tracemalloc in a separate run gives the
Python-level figure without allocator slack.

    python benchmarks/memory.py               # 20-span and 6-span traces, ~60 s
    python benchmarks/memory.py --spans 20    # one size
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CHILD = r'''
import gc, json, sys, time, tracemalloc
sys.path.insert(0, BENCH_DIR)
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry
from otel_agent_eval import AgentEvalProcessor
from pipeline import agent_run_spans

SPANS, TRACE_MALLOC = SPANS_PER_TRACE, USE_TRACEMALLOC

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0

specs = [agent_run_spans(SPANS, seed=i) for i in range(8)]  # content built once, like an app's own strings
provider = TracerProvider()
processor = AgentEvalProcessor(registry=CollectorRegistry(), env={}, settle_delay_seconds=3600,
                               idle_timeout_seconds=3600, max_trace_age_seconds=3600, emit_spans=False, emit_logs=False)
provider.add_span_processor(processor)
tracer = provider.get_tracer("app")
pipeline, settings = processor.pipeline, processor.settings

def emit(spec):
    agent = spec[0]
    root = tracer.start_span(agent["name"], attributes=agent["attributes"], start_time=agent["start"])
    ctx = trace.set_span_in_context(root)
    for s in spec[1:]:
        child = tracer.start_span(s["name"], context=ctx, attributes=s["attributes"], start_time=s["start"])
        child.end(end_time=s["end"])
    root.end(end_time=agent["end"])

def settle():
    for _ in range(3000):
        if not pipeline.intake:
            break
        time.sleep(0.01)
    time.sleep(0.25)  # one more collector tick
    gc.collect()

def produce(n, start):
    for i in range(n):
        emit(specs[(start + i) % len(specs)])
        if i % 1000 == 999:
            settle()  # stay under the intake bound: measure the buffer, not intake drops
    settle()

if TRACE_MALLOC:
    tracemalloc.start()
settle()
out = {"spans_per_trace": SPANS, "max_buffered_traces": settings.max_buffered_traces,
       "max_spans_per_trace": settings.max_spans_per_trace, "max_intake_spans": settings.max_intake_spans}
def snap(name):
    out[name] = {"rss": status("VmRSS"), "buffered_traces": len(pipeline.buffer),
                 "buffered_spans": sum(len(e.spans) for e in list(pipeline.buffer._entries.values())),
                 "py": tracemalloc.get_traced_memory()[0] if TRACE_MALLOC else None}
snap("base")
quarter = settings.max_buffered_traces // 4
produce(quarter, 0); snap("quarter")
produce(settings.max_buffered_traces - quarter, quarter); snap("full")
produce(5 * settings.max_buffered_traces, 0); snap("overflow")
produce(5 * settings.max_buffered_traces, 0); snap("overflow2")
out["peak_rss"] = status("VmHWM")
s = processor.stats
out["dropped"] = {k[0]: v for k, v in s.dropped.snapshot().items()}
out["spans_dropped"] = {k[0]: v for k, v in s.spans_dropped_snapshot().items()}
out["late_spans"] = s.late_spans.value
print(json.dumps(out))
'''


def run_child(spans: int, tracemalloc: bool) -> dict[str, Any]:
    bench_dir = str(Path(__file__).resolve().parent)
    code = CHILD.replace("BENCH_DIR", repr(bench_dir)).replace("SPANS_PER_TRACE", str(spans)).replace(
        "USE_TRACEMALLOC", str(tracemalloc))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def report(spans: int) -> None:
    started = time.monotonic()
    r = run_child(spans, tracemalloc=False)
    t = run_child(spans, tracemalloc=True)
    base, quarter, full, over = (r[k]["rss"] for k in ("base", "quarter", "full", "overflow"))
    n_quarter = r["quarter"]["buffered_traces"]
    budget = base + r["max_buffered_traces"] * (quarter - base) / max(1, n_quarter)
    spans_full = r["full"]["buffered_spans"]
    print(f"\n== traces of {spans} spans (bounds: {r['max_buffered_traces']} traces, {r['max_spans_per_trace']} spans/trace; "
          f"{time.monotonic() - started:.0f} s)")
    print(f"{'phase':<9} {'traces':>7} {'spans':>8} {'RSS':>12} {'RSS - base':>12} {'py heap (tracemalloc run)':>26}")
    for phase in ("base", "quarter", "full", "overflow", "overflow2"):
        p, q = r[phase], t[phase]
        print(f"{phase:<9} {p['buffered_traces']:>7} {p['buffered_spans']:>8} {mib(p['rss']):>12} {mib(p['rss'] - base):>12} "
              f"{mib(q['py'] - t['base']['py']):>26}")
    print(f"peak RSS (VmHWM) {mib(r['peak_rss'])}; drops {r['dropped']}, spans dropped {r['spans_dropped']}, late spans {r['late_spans']}")
    per_span_rss = (full - base) / max(1, spans_full)
    per_span_py = (t["full"]["py"] - t["base"]["py"]) / max(1, t["full"]["buffered_spans"])
    print(f"bytes per buffered span: {per_span_rss:,.0f} (RSS), {per_span_py:,.0f} (tracemalloc)")
    ratio_full = full / budget
    ratio_peak = r["peak_rss"] / budget
    print(f"budget = base + {r['max_buffered_traces']} x per-trace cost at 25 % fill = {mib(budget)}")
    print(f"overflow2 / overflow RSS = {r['overflow2']['rss'] / over:.3f}; python heap overflow2 / full = "
          f"{(t['overflow2']['py'] - t['base']['py']) / max(1, t['full']['py'] - t['base']['py']):.3f}")
    print(f"full / budget = {ratio_full:.3f}; peak (overflow included) / budget = {ratio_peak:.3f} "
          f"-> {'PASS' if ratio_peak <= 1.10 else 'MISS'} (bound honoured within 10 %)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, action="append", help="spans per trace (repeatable; default 20 and 6)")
    args = parser.parse_args(argv)
    print(f"memory benchmark, Python {sys.version.split()[0]}; each size in fresh subprocesses")
    for spans in args.spans or [20, 6]:
        report(spans)
    return 0


if __name__ == "__main__":
    sys.exit(main())
