#!/usr/bin/env python
"""Hot-path benchmark: what ``AgentEvalProcessor`` costs the app it lives in.

Span throughput of three TracerProviders, measured side by side in one run:

  a. ``BatchSpanProcessor`` (with an exporter that does nothing) alone;
  b. a + one more ``SpanProcessor`` that does nothing (empty ``on_start`` /
     ``on_end``): the floor any Python processor pays;
  c. a + ``AgentEvalProcessor`` (defaults, ``sample_rate=1.0``) in place of
     the do-nothing processor, so c/b is the price of *our* processor over the
     cheapest possible one.

Repetitions are interleaved (a, b, c, a, b, c, ...) so that drift of the
machine (frequency, noisy neighbours) hits every provider alike, and the median
of each is reported with the ratios c/b and c/a. Each repetition builds a fresh
provider and shuts it down afterwards, so no background thread outlives its
measurement. The ``AgentEvalProcessor`` background threads (collector, worker)
run *during* the timed window and compete for the GIL with the app: that is a
real cost, and it is in the throughput figure on purpose.

Two workloads:

  plain   an HTTP-handler span with a child DB span (no GenAI marker): the
          processor should drop both at once;
  genai   an HTTP span around an agent run: ``invoke_agent`` -> ``chat`` (two
          parallel tool calls) -> 2 x ``execute_tool`` -> ``chat`` (final
          answer), with ``gen_ai.*.messages`` JSON of realistic size (a ~1.5 kB
          system prompt, tool results, growing history). JSON strings are built
          once, outside the timed loop, so that the app's own serialisation
          work does not dilute the ratio.

Then ``on_end`` alone: ``processor.on_end(span)`` on pre-built ended
ReadableSpans, timed per call with ``time.perf_counter_ns`` (p50 / p99, timer
overhead included and reported) and in batches (mean), for the do-nothing
processor and for ``AgentEvalProcessor``.

Usage:  python benchmarks/hot_path.py            (full, < 90 s)
        python benchmarks/hot_path.py --quick    (~15 s)
Always exits 0; prints PASS / MISS per target.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, Status, StatusCode

from otel_agent_eval import AgentEvalProcessor

TARGETS = {"plain": 0.97, "genai": 0.90}
PROVIDERS = ("a", "b", "c")
PROVIDER_LABELS = {
    "a": "a  BatchSpanProcessor alone",
    "b": "b  + do-nothing processor",
    "c": "c  + AgentEvalProcessor",
}


# -- processors ----------------------------------------------------------------
class NullExporter(SpanExporter):
    """Exports nothing, successfully: exporting cost must not dominate."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class NoopProcessor(SpanProcessor):
    """The floor any Python span processor pays: two empty method calls per span."""

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        pass


class CollectingProcessor(SpanProcessor):
    """Keeps ended spans (to pre-build ReadableSpans for the on_end measurement)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def make_eval_processor(provider: TracerProvider | None) -> AgentEvalProcessor:
    # Defaults (settle delay 2 s, 1 worker, 4 built-in evaluators, spans + logs
    # emitted, 50 evaluations/s) with every agent trace sampled. Evaluation
    # spans go through the same provider, as they would with a global provider.
    return AgentEvalProcessor(sample_rate=1.0, tracer_provider=provider, env={})


@dataclass
class Built:
    provider: TracerProvider
    eval_processor: AgentEvalProcessor | None = None
    threads_before: set[int] = field(default_factory=set)


def build(kind: str) -> Built:
    threads_before = {t.ident for t in threading.enumerate() if t.ident is not None}
    provider = TracerProvider(resource=Resource.create({"service.name": "hot-path-bench"}))
    provider.add_span_processor(BatchSpanProcessor(NullExporter()))
    built = Built(provider, threads_before=threads_before)
    if kind == "b":
        provider.add_span_processor(NoopProcessor())
    elif kind == "c":
        built.eval_processor = make_eval_processor(provider)
        provider.add_span_processor(built.eval_processor)
    return built


def teardown(built: Built) -> int:
    """Shut everything down; returns how many threads it started that are still alive."""
    built.provider.shutdown()
    deadline = time.monotonic() + 3.0
    while True:
        leaked = [t for t in threading.enumerate() if t.ident not in built.threads_before and t.is_alive()]
        if not leaked or time.monotonic() > deadline:
            return len(leaked)
        time.sleep(0.01)


# -- workloads -------------------------------------------------------------------
def plain_unit(tracer: Any) -> int:
    """One HTTP request with a DB query: 2 spans, no GenAI marker."""
    with tracer.start_as_current_span(
        "GET /api/orders/{order_id}",
        kind=SpanKind.SERVER,
        attributes={
            "http.request.method": "GET",
            "url.path": "/api/orders/8812",
            "url.scheme": "https",
            "http.route": "/api/orders/{order_id}",
            "server.address": "shop.example.com",
            "client.address": "10.1.2.3",
            "user_agent.original": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36",
        },
    ) as span:
        with tracer.start_as_current_span(
            "SELECT orders",
            kind=SpanKind.CLIENT,
            attributes={
                "db.system.name": "postgresql",
                "db.namespace": "shop",
                "db.operation.name": "SELECT",
                "db.query.text": "SELECT id, status, total FROM orders WHERE id = $1",
                "server.address": "db.internal",
            },
        ):
            pass
        span.set_attribute("http.response.status_code", 200)
    return 2


SYSTEM_PROMPT = (
    "You are a customer-support agent for an online shop. Answer politely and concisely. "
    "Use the tools to look up orders and shipping; never invent order data. "
) * 10  # ~1.5 kB, like a real system prompt
USER_TASK = "Where is my order 8812? It was supposed to arrive on Monday and I still have nothing. Can you check the carrier?"


def _genai_payloads() -> dict[str, str]:
    order = {"order_id": "8812", "status": "shipped", "items": [{"sku": f"SKU-{i}", "qty": 1, "price": 19.9} for i in range(5)]}
    shipping = {"carrier": "DHL", "tracking": "JD0146000012345", "eta": "2025-06-12", "events": [{"at": f"2025-06-0{i}", "where": "Leipzig hub", "what": "in transit"} for i in range(1, 6)]}
    calls = [("get_order", {"order_id": "8812"}), ("get_shipping", {"order_id": "8812", "carrier": "auto"})]
    system = {"role": "system", "parts": [{"type": "text", "content": SYSTEM_PROMPT}]}
    user = {"role": "user", "parts": [{"type": "text", "content": USER_TASK}]}
    assistant_calls = {
        "role": "assistant",
        "parts": [{"type": "tool_call", "id": f"call_0_{i}", "name": n, "arguments": a} for i, (n, a) in enumerate(calls)],
        "finish_reason": "tool_call",
    }
    tool_results = {
        "role": "tool",
        "parts": [
            {"type": "tool_call_response", "id": "call_0_0", "response": order},
            {"type": "tool_call_response", "id": "call_0_1", "response": shipping},
        ],
    }
    final_text = "Your order 8812 has shipped with DHL (tracking JD0146000012345) and is expected on June 12. It is currently in transit at the Leipzig hub."
    final = {"role": "assistant", "parts": [{"type": "text", "content": final_text}], "finish_reason": "stop"}
    return {
        "agent_in": json.dumps([user]),
        "agent_out": json.dumps([final]),
        "chat1_in": json.dumps([system, user]),
        "chat1_out": json.dumps([assistant_calls]),
        "chat2_in": json.dumps([system, user, assistant_calls, tool_results]),
        "chat2_out": json.dumps([final]),
        "args0": json.dumps(calls[0][1]),
        "args1": json.dumps(calls[1][1]),
        "result0": json.dumps(order),
        "result1": json.dumps(shipping),
    }


P = _genai_payloads()
GENAI_SPANS_PER_UNIT = 6


def genai_unit(tracer: Any) -> int:
    """One agent run inside an HTTP handler: 6 spans, 5 of them GenAI."""
    with tracer.start_as_current_span("POST /chat", kind=SpanKind.SERVER, attributes={"http.request.method": "POST", "http.route": "/chat", "url.path": "/chat"}) as http:
        with tracer.start_as_current_span(
            "invoke_agent support",
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "support",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.conversation.id": "conv-8812",
                "gen_ai.input.messages": P["agent_in"],
            },
        ) as agent:
            for turn, (inp, out, finish) in enumerate(((P["chat1_in"], P["chat1_out"], "tool_call"), (P["chat2_in"], P["chat2_out"], "stop"))):
                with tracer.start_as_current_span(
                    "chat gpt-4o-mini",
                    kind=SpanKind.CLIENT,
                    attributes={
                        "gen_ai.operation.name": "chat",
                        "gen_ai.provider.name": "openai",
                        "gen_ai.request.model": "gpt-4o-mini",
                        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                        "gen_ai.input.messages": inp,
                    },
                ) as chat:
                    chat.set_attribute("gen_ai.output.messages", out)
                    chat.set_attribute("gen_ai.response.finish_reasons", [finish])
                    chat.set_attribute("gen_ai.usage.input_tokens", 480 + 300 * turn)
                    chat.set_attribute("gen_ai.usage.output_tokens", 40)
                if turn == 0:
                    for i, (name, args, result) in enumerate((("get_order", P["args0"], P["result0"]), ("get_shipping", P["args1"], P["result1"]))):
                        with tracer.start_as_current_span(
                            f"execute_tool {name}",
                            kind=SpanKind.INTERNAL,
                            attributes={
                                "gen_ai.operation.name": "execute_tool",
                                "gen_ai.tool.name": name,
                                "gen_ai.tool.call.id": f"call_0_{i}",
                                "gen_ai.tool.type": "function",
                                "gen_ai.tool.call.arguments": args,
                            },
                        ) as tool:
                            tool.set_attribute("gen_ai.tool.call.result", result)
            agent.set_attribute("gen_ai.output.messages", P["agent_out"])
        http.set_status(Status(StatusCode.OK))
    return GENAI_SPANS_PER_UNIT


WORKLOADS: dict[str, Callable[[Any], int]] = {"plain": plain_unit, "genai": genai_unit}


# -- throughput ------------------------------------------------------------------
def _thread_cpu_ns(thread: threading.Thread) -> int:
    try:
        return time.clock_gettime_ns(time.pthread_getcpuclockid(thread.ident))  # type: ignore[arg-type]
    except (OSError, AttributeError, TypeError):
        return 0


@dataclass
class Rep:
    spans: int
    seconds: float
    leaked_threads: int
    main_cpu_s: float = 0.0
    bg_cpu_s: float = 0.0  # otel-agent-eval threads, during the timed window
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.spans / self.seconds


def run_rep(kind: str, workload: str, spans: int) -> Rep:
    unit = WORKLOADS[workload]
    built = build(kind)
    tracer = built.provider.get_tracer("bench.app")
    for _ in range(50):  # warm-up: code paths, allocator, BSP thread started
        unit(tracer)
    gc.collect()
    bg = [t for t in threading.enumerate() if t.name.startswith("otel-agent-eval")]
    bg_cpu0 = sum(_thread_cpu_ns(t) for t in bg)
    main0 = time.thread_time_ns()
    done = 0
    start = time.perf_counter()
    while done < spans:
        done += unit(tracer)
    seconds = time.perf_counter() - start
    main_cpu = time.thread_time_ns() - main0
    bg_cpu = sum(_thread_cpu_ns(t) for t in bg) - bg_cpu0
    stats: dict[str, Any] = {}
    if built.eval_processor is not None:
        st = built.eval_processor.stats
        stats = {
            "received": st.spans_received.value,
            "kept": st.spans_kept.value,
            "intake_full": st.intake_full.value,
            "admitted": st.traces_admitted.value,
            "rejected": st.traces_rejected.value,
            "admission_ratio": round(st.admission_ratio, 4),
            "buffered": st.buffered_traces,
            "dropped": dict(st.dropped.snapshot()),
            "evaluated": st.traces_evaluated.total(),
        }
    leaked = teardown(built)
    return Rep(done, seconds, leaked, main_cpu / 1e9, bg_cpu / 1e9, stats)


def throughput(workload: str, rounds: int, spans: int, verbose: bool) -> dict[str, list[Rep]]:
    reps: dict[str, list[Rep]] = {k: [] for k in PROVIDERS}
    # One untimed warm-up round so that the first 'a' does not pay for imports and caches.
    for kind in PROVIDERS:
        run_rep(kind, workload, max(spans // 10, 600))
    for r in range(rounds):
        order = PROVIDERS if r % 2 == 0 else PROVIDERS[::-1]  # a,b,c then c,b,a: no fixed position bias
        for kind in order:
            rep = run_rep(kind, workload, spans)
            reps[kind].append(rep)
            if verbose:
                extra = f"  bg-cpu {rep.bg_cpu_s:.2f}s {rep.stats}" if kind == "c" else ""
                print(f"    round {r + 1} {kind}: {rep.rate:9.0f} spans/s{extra}", flush=True)
    return reps


# -- paced GenAI load: background CPU when traces actually complete ----------------
@dataclass
class Paced:
    kind: str
    runs: int
    seconds: float
    process_cpu_s: float
    app_cpu_s: float
    bg_cpu_s: float
    stats: dict[str, Any] = field(default_factory=dict)


def paced_run(kind: str, rate: float, seconds: float) -> Paced:
    """Agent runs at a fixed rate for several settle delays: CPU spent per run.

    At full speed nearly every new trace is rejected on arrival and, within a short
    repetition, no admitted trace completes. Paced, admitted traces (up to
    ``max_traces_per_second``) complete, are assembled and up to 50/s are evaluated:
    this is where the background threads do their real work.
    """
    built = build(kind)
    tracer = built.provider.get_tracer("bench.app")
    for _ in range(20):
        genai_unit(tracer)
    bg = [t for t in threading.enumerate() if t.name.startswith("otel-agent-eval")]
    p0, m0, b0 = time.process_time_ns(), time.thread_time_ns(), sum(_thread_cpu_ns(t) for t in bg)
    start = time.perf_counter()
    runs = 0
    while True:
        now = time.perf_counter() - start
        if now >= seconds:
            break
        if runs < now * rate:
            genai_unit(tracer)
            runs += 1
        else:
            time.sleep(0.0005)
    p1, m1 = time.process_time_ns(), time.thread_time_ns()
    bg = [t for t in threading.enumerate() if t.name.startswith("otel-agent-eval")]  # a worker may have been replaced
    b1 = sum(_thread_cpu_ns(t) for t in bg)
    stats: dict[str, Any] = {}
    if built.eval_processor is not None:
        st = built.eval_processor.stats
        stats = {
            "admitted": st.traces_admitted.value,
            "rejected": st.traces_rejected.value,
            "completed": st.traces_completed.total(),
            "sampling": {"/".join(k): v for k, v in st.sampling.snapshot().items()},
            "evaluated": st.traces_evaluated.total(),
            "dropped": {"/".join(k): v for k, v in st.dropped.snapshot().items()},
        }
    teardown(built)
    return Paced(kind, runs, seconds, (p1 - p0) / 1e9, (m1 - m0) / 1e9, max(0, b1 - b0) / 1e9, stats)


# -- on_end alone ----------------------------------------------------------------
def prebuilt_spans(workload: str, n_spans: int) -> list[ReadableSpan]:
    provider = TracerProvider(resource=Resource.create({"service.name": "hot-path-bench"}))
    collector = CollectingProcessor()
    provider.add_span_processor(collector)
    tracer = provider.get_tracer("bench.app")
    unit = WORKLOADS[workload]
    done = 0
    while done < n_spans:
        done += unit(tracer)
    provider.shutdown()
    return collector.spans


def time_on_end(processor: SpanProcessor, spans: Sequence[ReadableSpan]) -> list[int]:
    """ns per call (the perf_counter_ns pair included), one pass over ``spans``."""
    pc = time.perf_counter_ns
    on_end = processor.on_end
    samples = [0] * len(spans)
    for i, span in enumerate(spans):
        t0 = pc()
        on_end(span)
        samples[i] = pc() - t0
    return samples


def batched_mean(processor: SpanProcessor, spans: Sequence[ReadableSpan]) -> float:
    on_end = processor.on_end
    t0 = time.perf_counter_ns()
    for span in spans:
        on_end(span)
    return (time.perf_counter_ns() - t0) / len(spans)


def timer_overhead(n: int) -> list[int]:
    pc = time.perf_counter_ns
    out = [0] * n
    for i in range(n):
        t0 = pc()
        out[i] = pc() - t0
    return out


def pct(values: list[int], q: float) -> float:
    s = sorted(values)
    return float(s[min(len(s) - 1, int(q * len(s)))])


@dataclass
class OnEndResult:
    per_call: dict[str, list[int]]
    batched: dict[str, list[float]]
    eval_stats: dict[str, Any]


def on_end_bench(workload: str, n_spans: int, passes: int) -> OnEndResult:
    spans = prebuilt_spans(workload, n_spans)
    per_call: dict[str, list[int]] = {"noop": [], "eval": []}
    batched: dict[str, list[float]] = {"noop": [], "eval": []}
    eval_stats: dict[str, Any] = {}
    for _ in range(passes):
        for kind in ("noop", "eval"):
            # A fresh processor per pass, so that GenAI spans meet the hot path as they
            # would live (the first ended span of a trace scans the markers, the rest hit
            # the active-trace set), with the background threads running.
            proc: SpanProcessor = NoopProcessor() if kind == "noop" else make_eval_processor(None)
            gc.collect()
            samples = time_on_end(proc, spans)
            per_call[kind].extend(samples)
            if kind == "eval":
                assert isinstance(proc, AgentEvalProcessor)
                eval_stats = {"received": proc.stats.spans_received.value, "kept": proc.stats.spans_kept.value, "intake_full": proc.stats.intake_full.value}
                proc.shutdown()
                proc = make_eval_processor(None)
            batched[kind].append(batched_mean(proc, spans))
            proc.shutdown()
    return OnEndResult(per_call, batched, eval_stats)


# -- report ----------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="~15 s run (fewer rounds and spans)")
    parser.add_argument("--rounds", type=int, help="interleaved rounds per workload (default 7; quick 3)")
    parser.add_argument("--plain-spans", type=int, help="spans per plain repetition (default 40000; quick 12000)")
    parser.add_argument("--genai-spans", type=int, help="spans per GenAI repetition (default 48000; quick 12000)")
    parser.add_argument("--paced-rate", type=float, default=300.0, help="agent runs per second in the paced GenAI run (default 300)")
    parser.add_argument("--paced-seconds", type=float, help="length of each paced run (default 6; quick 3)")
    parser.add_argument("--skip-paced", action="store_true", help="no paced GenAI run")
    parser.add_argument("--on-end-spans", type=int, help="pre-built spans per on_end pass (default 12000; quick 6000)")
    parser.add_argument("--on-end-passes", type=int, help="on_end passes per processor (default 5; quick 2)")
    parser.add_argument("--workloads", default="plain,genai", help="comma separated: plain,genai")
    parser.add_argument("--skip-on-end", action="store_true", help="throughput only")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every repetition")
    args = parser.parse_args(argv)
    q = args.quick
    rounds = args.rounds or (3 if q else 7)
    sizes = {"plain": args.plain_spans or (12000 if q else 40000), "genai": args.genai_spans or (12000 if q else 48000)}
    paced_seconds = args.paced_seconds or (3.0 if q else 6.0)
    on_end_spans = args.on_end_spans or (6000 if q else 12000)
    on_end_passes = args.on_end_passes or (2 if q else 5)
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]

    import opentelemetry.sdk.version as sdk_version

    started = time.perf_counter()
    print("otel-agent-eval hot-path benchmark")
    print(
        f"python {platform.python_version()} ({platform.python_implementation()}), opentelemetry-sdk {sdk_version.__version__}, "
        f"{os.cpu_count()} CPUs, {platform.machine()}, switch interval {sys.getswitchinterval() * 1000:g} ms"
    )
    print(f"mode {'quick' if q else 'full'}: {rounds} interleaved rounds; spans/rep {sizes}; on_end {on_end_passes} x {on_end_spans} spans")
    print()

    verdicts: list[str] = []
    for workload in workloads:
        print(f"== throughput: {workload} workload ({sizes[workload]} spans per repetition, median of {rounds}) ==", flush=True)
        reps = throughput(workload, rounds, sizes[workload], args.verbose)
        med = {k: statistics.median(r.rate for r in reps[k]) for k in PROVIDERS}
        for k in PROVIDERS:
            rates = [r.rate for r in reps[k]]
            spread = (max(rates) - min(rates)) / med[k] * 100
            print(f"  {PROVIDER_LABELS[k]:<30} {med[k]:10.0f} spans/s   (min {min(rates):.0f}, max {max(rates):.0f}, spread {spread:.0f}%)")
        cb, ca, ba = med["c"] / med["b"], med["c"] / med["a"], med["b"] / med["a"]
        paired = statistics.median(c.rate / b.rate for c, b in zip(reps["c"], reps["b"]))
        target = TARGETS[workload]
        verdict = "PASS" if cb >= target else "MISS"
        verdicts.append(f"{workload}: c/b {cb:.3f} (target >= {target:.2f}) {verdict}")
        print(f"  ratio b/a (do-nothing vs alone)      {ba:.3f}")
        print(f"  ratio c/a (AgentEval vs alone)       {ca:.3f}")
        print(f"  ratio c/b (AgentEval vs do-nothing)  {cb:.3f}   target >= {target:.2f}: {verdict}   (median of per-round ratios {paired:.3f})")
        c_main = statistics.median(r.main_cpu_s / r.seconds for r in reps["c"])
        c_bg = statistics.median(r.bg_cpu_s / r.seconds for r in reps["c"])
        print(f"  c: app thread on-CPU {c_main * 100:.0f}% of wall time; otel-agent-eval threads on-CPU {c_bg * 100:.0f}% of wall time")
        last = reps["c"][-1].stats
        print(f"  c, last repetition: {last}")
        leaked = sum(r.leaked_threads for k in PROVIDERS for r in reps[k])
        print(f"  threads left alive after shutdown: {leaked}")
        print(flush=True)

    if not args.skip_paced and "genai" in workloads:
        print(f"== paced GenAI load: {args.paced_rate:g} agent runs/s ({args.paced_rate * GENAI_SPANS_PER_UNIT:g} spans/s) for {paced_seconds:g} s, CPU per agent run ==", flush=True)
        runs = {k: paced_run(k, args.paced_rate, paced_seconds) for k in ("b", "c")}
        for k in ("b", "c"):
            r = runs[k]
            print(
                f"  {PROVIDER_LABELS[k]:<30} process {r.process_cpu_s / r.runs * 1e6:7.0f} us/run   app thread {r.app_cpu_s / r.runs * 1e6:6.0f} us/run"
                f"   otel-agent-eval threads {r.bg_cpu_s / r.runs * 1e6:6.0f} us/run"
            )
        b, c = runs["b"], runs["c"]
        print(f"  process CPU ratio b/c {b.process_cpu_s / b.runs / (c.process_cpu_s / c.runs):.3f}   (what c/b throughput would be if the load were CPU-bound at this mix)")
        print(f"  c pipeline: {c.stats}")
        print(flush=True)

    if not args.skip_on_end:
        overhead = timer_overhead(200_000)
        print(f"== on_end alone (ns per call; per-call figures include the timer pair: p50 {pct(overhead, 0.5):.0f} ns, p99 {pct(overhead, 0.99):.0f} ns) ==")
        print(f"  {'workload':<8} {'processor':<18} {'p50':>7} {'p99':>8} {'p99.9':>8} {'mean(batched)':>14} {'added p50':>10} {'added mean':>11}")
        for workload in workloads:
            res = on_end_bench(workload, on_end_spans, on_end_passes)
            base_p50 = pct(res.per_call["noop"], 0.5)
            base_mean = statistics.median(res.batched["noop"])
            for kind, label in (("noop", "do-nothing"), ("eval", "AgentEvalProcessor")):
                s = res.per_call[kind]
                mean = statistics.median(res.batched[kind])
                added = "" if kind == "noop" else f"{pct(s, 0.5) - base_p50:+10.0f} {mean - base_mean:+11.0f}"
                print(f"  {workload:<8} {label:<18} {pct(s, 0.5):7.0f} {pct(s, 0.99):8.0f} {pct(s, 0.999):8.0f} {mean:14.0f} {added}")
            print(f"  {workload:<8} AgentEval pipeline after one pass: {res.eval_stats}")
        print()

    print("== targets ==")
    for v in verdicts:
        print("  " + v)
    print(f"(total {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
    sys.exit(0)
