#!/usr/bin/env python
"""Memory benchmark: is the byte bound honoured? Peak RSS vs what the bounds allow.

Each measurement runs in a fresh subprocess (so nothing of an earlier one is
resident): a real ``TracerProvider`` with ``AgentEvalProcessor`` at its default
bounds (``max_buffered_bytes`` 64 MiB, ``max_buffered_traces`` 2000,
``max_spans_per_trace`` 2000, ``max_intake_spans`` 20000), trace completion
pushed out of reach (settle delay, idle timeout and max age one hour) so that
every kept trace stays buffered, admission off (``max_traces_per_second`` 0: this
measures the memory bounds, not the rate cap). The app thread creates GenAI agent
runs through the SDK with ``benchmarks/pipeline.py``'s builder (~1.5 kB system
prompt, windowed history, tool arguments and results), built afresh per run: an
instrumentation serialises each call's messages into new strings, so every
buffered span owns its content (sharing one pre-built run would measure span
objects, not content).

Phases, RSS (``VmRSS``) after each, peak (``VmHWM``) at the end:

  base      provider + processor built, nothing buffered;
  full      2,000 runs: the buffer at its bound (bytes for 20-span runs, traces
            for 6-span runs); here and in the overflow phases the app waits while
            more than 1,000 spans wait for the collector, so that they measure the
            buffer, not a transient intake;
  intake    the collector held (its ``_drain_intake`` replaced by a no-op) while
            the app emits until the intake is at ``max_intake_spans``: the worst
            case of the bounds, buffer and intake both full;
  drain     the collector released: the intake drains into the buffer, which evicts;
  overflow  10,000 more runs (5x the trace bound): eviction (``buffer_full``) must
            not grow RSS;
  overflow2 10,000 more again: does RSS plateau (allocator slack) or grow (a leak)?

Budget (what the bounds promise, stated before measuring):

  budget = base + max_buffered_bytes + max_intake_spans x intake bytes per span

The buffer is bounded in estimated bytes (``TraceBuffer.bytes``, calibrated to
the Python heap: tests/pipeline/test_buffer_bytes.py). The intake is bounded in spans, so
its part is ``max_intake_spans`` times the heap cost of one SDK span of this
workload, measured with tracemalloc in a second run of the same phases (heap
growth from ``full`` to ``intake`` over the spans in the intake; the buffer does
not change in between). RSS includes what the heap figures do not: allocator
slack and fragmentation, bookkeeping (the 10,000 completed trace ids kept for
late-span detection, ``active_traces``). The bound is honoured within 10 % when
the peak RSS of the whole run is <= 1.10 x budget.

    python benchmarks/memory.py               # 20-span and 6-span runs, ~4 min
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

PHASES = ("base", "full", "intake", "drain", "overflow", "overflow2")

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

provider = TracerProvider()
processor = AgentEvalProcessor(registry=CollectorRegistry(), env={}, settle_delay_seconds=3600,
                               idle_timeout_seconds=3600, max_trace_age_seconds=3600, max_traces_per_second=0,
                               emit_spans=False, emit_logs=False)
provider.add_span_processor(processor)
tracer = provider.get_tracer("app")
pipeline, settings = processor.pipeline, processor.settings
runs = 0
THROTTLE = 1000

def emit():
    """One agent run, its content built afresh (new strings, as an instrumentation makes them)."""
    global runs
    spec = agent_run_spans(SPANS, seed=runs)
    runs += 1
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

def produce(n):
    """n runs; the app waits while more than THROTTLE spans wait for the collector, so that
    these phases measure the buffer (the intake phase measures the intake at its bound)."""
    for i in range(n):
        emit()
        while len(pipeline.intake) > THROTTLE:
            time.sleep(0.001)
    settle()

def fill_intake():
    """Hold the collector and fill the intake to its bound: buffer and intake both full."""
    pipeline._drain_intake = lambda now: None  # the collector keeps ticking but drains nothing
    time.sleep(0.25)  # a tick in progress finishes
    while len(pipeline.intake) < settings.max_intake_spans:
        emit()
    gc.collect()

def release():
    del pipeline._drain_intake
    settle()

if TRACE_MALLOC:
    tracemalloc.start()
settle()
out = {"spans_per_trace": SPANS, "throttle": THROTTLE, "max_buffered_traces": settings.max_buffered_traces,
       "max_buffered_bytes": settings.max_buffered_bytes, "max_spans_per_trace": settings.max_spans_per_trace,
       "max_intake_spans": settings.max_intake_spans}
def snap(name):
    entries = list(pipeline.buffer._entries.values())
    out[name] = {"rss": status("VmRSS"), "buffered_traces": len(entries),
                 "buffered_spans": sum(len(e.spans) for e in entries), "buffer_bytes": pipeline.buffer.bytes,
                 "intake": len(pipeline.intake), "py": tracemalloc.get_traced_memory()[0] if TRACE_MALLOC else None}
snap("base")
produce(settings.max_buffered_traces); snap("full")
fill_intake(); snap("intake")
release(); snap("drain")
produce(5 * settings.max_buffered_traces); snap("overflow")
produce(5 * settings.max_buffered_traces); snap("overflow2")
out["peak_rss"] = status("VmHWM")
s = processor.stats
out["dropped"] = {k[0]: v for k, v in s.dropped.snapshot().items()}
out["spans_dropped"] = {k[0]: v for k, v in s.spans_dropped_snapshot().items()}
out["intake_full"] = s.intake_full.value
out["late_spans"] = s.late_spans.value
print(json.dumps(out))
'''


def run_child(spans: int, tracemalloc: bool) -> dict[str, Any]:
    bench_dir = str(Path(__file__).resolve().parent)
    code = CHILD.replace("BENCH_DIR", repr(bench_dir)).replace("SPANS_PER_TRACE", str(spans)).replace(
        "USE_TRACEMALLOC", str(tracemalloc))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def report(spans: int) -> dict[str, Any]:
    started = time.monotonic()
    r = run_child(spans, tracemalloc=False)
    t = run_child(spans, tracemalloc=True)
    base = r["base"]["rss"]
    print(f"\n== runs of {spans} spans (bounds: {mib(r['max_buffered_bytes'])} estimated, {r['max_buffered_traces']} traces, "
          f"{r['max_spans_per_trace']} spans/trace, intake {r['max_intake_spans']} spans; {time.monotonic() - started:.0f} s)")
    print(f"{'phase':<9} {'traces':>7} {'spans':>7} {'intake':>7} {'buffer.bytes':>13} {'RSS':>11} {'RSS - base':>11} "
          f"{'py heap - base (tracemalloc run)':>33}")
    for phase in PHASES:
        p, q = r[phase], t[phase]
        print(f"{phase:<9} {p['buffered_traces']:>7} {p['buffered_spans']:>7} {p['intake']:>7} {mib(p['buffer_bytes']):>13} "
              f"{mib(p['rss']):>11} {mib(p['rss'] - base):>11} {mib(q['py'] - t['base']['py']):>33}")
    print(f"peak RSS (VmHWM) {mib(r['peak_rss'])}; drops {r['dropped']}, spans dropped {r['spans_dropped']}, "
          f"intake_full {r['intake_full']}, late spans {r['late_spans']}")

    full, tfull = r["full"], t["full"]
    est_per_span = full["buffer_bytes"] / max(1, full["buffered_spans"])
    heap_per_span = (tfull["py"] - t["base"]["py"]) / max(1, tfull["buffered_spans"])
    rss_per_span = (full["rss"] - base) / max(1, full["buffered_spans"])
    intake_per_span = (t["intake"]["py"] - tfull["py"]) / max(1, t["intake"]["intake"])
    print(f"bytes per buffered span: estimate {est_per_span:,.0f}; heap {heap_per_span:,.0f} (estimate / heap "
          f"{est_per_span / heap_per_span:.3f}); RSS {rss_per_span:,.0f}")
    print(f"bytes per intake span (heap, tracemalloc run): {intake_per_span:,.0f}; RSS growth per intake span "
          f"{(r['intake']['rss'] - full['rss']) / max(1, r['intake']['intake']):,.0f}")

    intake_budget = r["max_intake_spans"] * intake_per_span
    budget = base + r["max_buffered_bytes"] + intake_budget
    ratio_peak = r["peak_rss"] / budget
    verdict = "PASS" if ratio_peak <= 1.10 else "MISS"
    print(f"budget = base {mib(base)} + max_buffered_bytes {mib(r['max_buffered_bytes'])} + intake "
          f"{r['max_intake_spans']} x {intake_per_span:,.0f} B = {mib(intake_budget)} -> {mib(budget)}")
    binding = "bytes" if full["buffer_bytes"] > 0.95 * r["max_buffered_bytes"] else "traces"
    print(f"at full the {binding} bound binds: {full['buffered_traces']} traces, {mib(full['buffer_bytes'])} estimated")
    print(f"buffer part: RSS - base at full {mib(full['rss'] - base)} for buffer.bytes {mib(full['buffer_bytes'])} "
          f"(RSS / estimate {(full['rss'] - base) / max(1, full['buffer_bytes']):.3f})")
    print(f"overflow2 / overflow RSS = {r['overflow2']['rss'] / r['overflow']['rss']:.3f}; overflow2 / drain RSS = "
          f"{r['overflow2']['rss'] / r['drain']['rss']:.3f}; python heap overflow2 / drain = "
          f"{(t['overflow2']['py'] - t['base']['py']) / max(1, t['drain']['py'] - t['base']['py']):.3f}")
    print(f"peak / budget = {ratio_peak:.3f} -> {verdict} (bound honoured within 10 %)")
    return {"spans": spans, "base": base, "full": full["rss"], "intake": r["intake"]["rss"], "overflow": r["overflow"]["rss"],
            "overflow2": r["overflow2"]["rss"], "peak": r["peak_rss"], "budget": budget, "ratio": ratio_peak, "verdict": verdict}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, action="append", help="spans per trace (repeatable; default 20 and 6)")
    args = parser.parse_args(argv)
    print(f"memory benchmark, Python {sys.version.split()[0]}; each size in fresh subprocesses")
    rows = []
    for spans in args.spans or [20, 6]:
        try:
            rows.append(report(spans))
        except Exception as exc:  # noqa: BLE001 - a benchmark reports; it does not fail the caller
            print(f"\n== runs of {spans} spans: ERROR {exc} -> MISS")
    print("\n| trace size | base | full | intake full | overflow | overflow2 | peak | budget | peak / budget |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        print(f"| {row['spans']} spans | {mib(row['base'])} | {mib(row['full'])} | {mib(row['intake'])} | {mib(row['overflow'])} | "
              f"{mib(row['overflow2'])} | {mib(row['peak'])} | {mib(row['budget'])} | **{row['ratio']:.3f} {row['verdict']}** |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
