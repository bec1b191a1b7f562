#!/usr/bin/env python
"""Pipeline benchmark: agent traces per second assembled and evaluated on one core.

What is timed: ``flatten(assemble(records))`` followed by ``safe_evaluate`` of the
four deterministic evaluators (tool_call_accuracy with a matching expectation,
tool_failure_recovery, loop_detection, step_budget) on each agent run, in one
thread, over pre-built ``SpanRecord``s (what the collector thread hands to
assembly). No threads, no buffer, no sinks.

Traces: GenAI semantic-convention agent runs (``invoke_agent`` -> per turn one
``chat`` span requesting two tool calls with ids, two ``execute_tool`` siblings;
a final ``chat`` answers), with realistic content: a ~1.5 kB system prompt, the
conversation history in every ``gen_ai.input.messages`` (windowed to the last 16
messages, as context-trimming agents do: a 1,000-span run with the full history
would be ~20 MB of JSON per trace), tool arguments and JSON results, token usage.
Sizes of 10, 20, 100 and 1,000 spans are measured side by side: rounds interleave
the sizes (and alternate their order) so machine drift hits all alike; the
median round is reported. These traces take the one-pass assembly of plain semconv
runs (``semconv_run``); the general path, which every other trace takes, is timed on
the same traces too. Then, for the 20-span case, the phases timed apart (assembly as
taken, the general path and its reading of spans through the dialects, evaluation and
each evaluator) and cProfile's top 10.

    python benchmarks/pipeline.py            # ~25 s
    python benchmarks/pipeline.py --quick    # ~3 s
    python benchmarks/pipeline.py --tool-definitions --evaluators \
        tool_call_accuracy,tool_failure_recovery,loop_detection,step_budget,tool_argument_validity
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from otel_agent_eval.assemble import _TraceAssembly, assemble
from otel_agent_eval.config import Settings
from otel_agent_eval.dialects import read_operation
from otel_agent_eval.evaluators import ToolExpectation, build_evaluators
from otel_agent_eval.evaluators.base import Evaluator, safe_evaluate
from otel_agent_eval.pipeline import flatten
from otel_agent_eval.records import SpanRecord

TARGET_SPANS = 20
TARGET_PER_SECOND = 5_000
SIZES = (10, 20, 100, 1_000)
HISTORY_WINDOW = 16
SYSTEM_PROMPT = (
    "You are a customer support agent for an online shop. Use the tools to look up orders, "
    "check stock and issue refunds. Never refund more than the order total. Answer briefly. "
) * 9  # ~1.5 kB
TOOLS = ("lookup_order", "check_stock", "search_kb", "refund_order")
MS = 1_000_000

# --------------------------------------------------------------------------- trace builder


def turn_plan(n_spans: int) -> list[int]:
    """Tool calls per tool-calling turn so that 1 agent + turns + tools + 1 final chat == n_spans."""
    if n_spans < 4:
        raise ValueError("an agent run here needs at least 4 spans (agent, chat with a tool call, tool, final chat)")
    remaining = n_spans - 2  # agent span + final chat
    plan: list[int] = []
    while remaining >= 3:
        plan.append(2)  # a chat span and its two tool spans
        remaining -= 3
    if remaining == 2:
        plan.append(1)
    elif remaining == 1:
        plan[-1] += 1
    return plan


TOOL_DEFINITIONS = json.dumps([
    {"type": "function", "name": name, "description": f"{name.replace('_', ' ')} for an order item",
     "parameters": {"type": "object", "additionalProperties": False, "required": ["order_id", "item"], "properties": {
         "order_id": {"type": "string", "pattern": "^[0-9]+$"}, "item": {"type": "string", "minLength": 1},
         "quantity": {"type": "integer", "minimum": 1, "maximum": 10}}}}
    for name in TOOLS
])
"""``gen_ai.tool.definitions`` of every chat span with ``--tool-definitions`` (opt-in in semconv)."""


def agent_run_spans(n_spans: int, seed: int = 0, tool_definitions: bool = False) -> list[dict[str, Any]]:
    """A semconv agent run of exactly ``n_spans`` spans, as plain dicts (ids local to the trace)."""
    plan = turn_plan(n_spans)
    task = f"Order #{1000 + seed}: the blue kettle arrived broken, please refund it."
    system = {"role": "system", "parts": [{"type": "text", "content": SYSTEM_PROMPT}]}
    history: list[dict[str, Any]] = [{"role": "user", "parts": [{"type": "text", "content": task}]}]
    spans: list[dict[str, Any]] = []
    t = 1_000 * MS
    next_id = 2
    for number, calls in enumerate(plan + [0]):
        chat_id, next_id = next_id, next_id + 1
        parts: list[dict[str, Any]] = []
        requested = []
        for i in range(calls):
            name = TOOLS[(number + i) % len(TOOLS)]
            args = {"order_id": str(1000 + seed), "item": f"kettle-{number}-{i}", "quantity": 1 + i}
            call_id = f"call_{seed}_{number}_{i}"
            requested.append((call_id, name, args))
            parts.append({"type": "tool_call", "id": call_id, "name": name, "arguments": args})
        if not calls:
            parts.append({"type": "text", "content": "Your refund of 39.90 EUR for order #%d is on its way." % (1000 + seed)})
        else:
            parts.insert(0, {"type": "text", "content": f"Step {number}: I will call {', '.join(r[1] for r in requested)}."})
        output = {"role": "assistant", "parts": parts, "finish_reason": "tool_call" if calls else "stop"}
        spans.append({
            "id": chat_id, "parent": 1, "name": "chat gpt-4o-mini", "start": t, "end": t + 800 * MS, "kind": "CLIENT",
            "attributes": {
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o-mini", "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                "gen_ai.input.messages": json.dumps([system] + history[-HISTORY_WINDOW:]),
                "gen_ai.output.messages": json.dumps([output]),
                "gen_ai.response.finish_reasons": ("tool_call" if calls else "stop",),
                "gen_ai.usage.input_tokens": 600 + 40 * number, "gen_ai.usage.output_tokens": 60,
                **({"gen_ai.tool.definitions": TOOL_DEFINITIONS} if tool_definitions else {}),
            },
        })
        t += 810 * MS
        history.append({"role": "assistant", "parts": parts})
        results = []
        for i, (call_id, name, args) in enumerate(requested):
            tool_id, next_id = next_id, next_id + 1
            result = {"status": "ok", "order_id": args["order_id"], "items": [{"sku": args["item"], "price": 39.9, "stock": 3}]}
            spans.append({
                "id": tool_id, "parent": 1, "name": f"execute_tool {name}", "start": t + i * MS, "end": t + 50 * MS + i * MS,
                "kind": "INTERNAL",
                "attributes": {
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id,
                    "gen_ai.tool.type": "function", "gen_ai.tool.call.arguments": json.dumps(args),
                    "gen_ai.tool.call.result": json.dumps(result),
                },
            })
            results.append({"type": "tool_call_response", "id": call_id, "response": result})
        if requested:
            history.append({"role": "tool", "parts": results})
            t += 60 * MS
    final_text = spans[-1]["attributes"]["gen_ai.output.messages"]
    agent = {
        "id": 1, "parent": None, "name": "invoke_agent support", "start": 999 * MS, "end": t + MS, "kind": "INTERNAL",
        "attributes": {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support", "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": task}]}]),
            "gen_ai.output.messages": final_text,
        },
    }
    spans.insert(0, agent)
    assert len(spans) == n_spans, (len(spans), n_spans)
    return spans


def to_records(spans: Sequence[dict[str, Any]], trace_id: int) -> list[SpanRecord]:
    """Records in end order (children before parents), as the collector receives them."""
    base = trace_id << 16
    records = [
        SpanRecord(
            trace_id=trace_id, span_id=base + s["id"], parent_span_id=(base + s["parent"]) if s["parent"] else None,
            name=s["name"], start_time_unix_nano=s["start"], end_time_unix_nano=s["end"],
            attributes=dict(s["attributes"]), kind=s["kind"], scope_name="bench",
        )
        for s in spans
    ]
    return sorted(records, key=lambda r: r.end_time_unix_nano)


def expectations() -> list[ToolExpectation]:
    return [ToolExpectation(agent="support", expected_tools=["lookup_order", "check_stock"], require_order=True)]


def deterministic_evaluators(names: str | None = None) -> list[Evaluator]:
    return build_evaluators(Settings.load({}, evaluators=names), expectations())


# --------------------------------------------------------------------------- measurement


def process(traces: Sequence[list[SpanRecord]], evaluators: Sequence[Evaluator]) -> int:
    """Assemble and evaluate each trace; returns the number of results (a sanity figure)."""
    results = 0
    for records in traces:
        for agent_trace in flatten(assemble(records)):
            for evaluator in evaluators:
                results += len(safe_evaluate(evaluator, agent_trace)[0])
    return results


def phases(traces: Sequence[list[SpanRecord]], evaluators: Sequence[Evaluator], rounds: int) -> dict[str, float]:
    """Median microseconds per trace of each phase of ``process``, and of each evaluator, timed apart."""
    runs = [flatten(assemble(records)) for records in traces]
    by_id = [{record.span_id: record for record in records} for records in traces]

    def read() -> None:
        for records in traces:
            for record in records:
                read_operation(record)

    def build() -> None:
        for records in traces:
            flatten(assemble(records))

    def general() -> None:
        for records in by_id:
            flatten(_TraceAssembly(records).run())

    def evaluate() -> None:
        for agent_traces in runs:
            for agent_trace in agent_traces:
                for evaluator in evaluators:
                    safe_evaluate(evaluator, agent_trace)

    medians = {}
    for name, phase in (("read", read), ("assemble", build), ("general", general), ("evaluate", evaluate)):
        seconds = []
        for _ in range(rounds):
            started = time.perf_counter()
            phase()
            seconds.append(time.perf_counter() - started)
        medians[name] = 1e6 * statistics.median(seconds) / len(traces)
    # Each evaluator's share, timed call by call in the same loop as ``process``: run alone over
    # all traces, an evaluator would meet every trace cold in the CPU caches. Here the first
    # evaluator (tool_call_accuracy) pays that for the others, as it does in ``process``.
    shares: dict[str, list[float]] = {evaluator.name: [] for evaluator in evaluators}
    for _ in range(rounds):
        spent = dict.fromkeys(shares, 0.0)
        for agent_traces in runs:
            for agent_trace in agent_traces:
                for evaluator in evaluators:
                    started = time.perf_counter()
                    safe_evaluate(evaluator, agent_trace)
                    spent[evaluator.name] += time.perf_counter() - started
        for name, seconds_spent in spent.items():
            shares[name].append(seconds_spent)
    for name, seconds in shares.items():
        medians[name] = 1e6 * statistics.median(seconds) / len(traces)
    return medians


def dataset(n_spans: int, n_traces: int, tool_definitions: bool = False) -> list[list[SpanRecord]]:
    return [to_records(agent_run_spans(n_spans, seed=i, tool_definitions=tool_definitions), trace_id=0x1000 + i)
            for i in range(n_traces)]


def pin_one_core() -> str:
    if hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return f"pinned to CPU {cpu}"
    return "not pinned (no sched_setaffinity)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and traces")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--evaluators", default=None, help="comma separated (default: the default set)")
    parser.add_argument("--tool-definitions", action="store_true", help="chat spans carry gen_ai.tool.definitions")
    args = parser.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 7)
    spans_per_round = 4_000 if args.quick else 20_000  # about the same work per size
    print(f"pipeline benchmark: {pin_one_core()}, Python {sys.version.split()[0]} ({sys.executable}), {rounds} rounds")
    evaluators = deterministic_evaluators(args.evaluators)
    print(f"evaluators: {', '.join(e.name for e in evaluators)}; tool definitions: {args.tool_definitions}")
    data = {size: dataset(size, max(2, spans_per_round // size), args.tool_definitions) for size in SIZES}
    # sanity: every trace assembles to one agent run with every evaluator deciding
    for size, traces in data.items():
        (run,) = flatten(assemble(traces[0]))
        assert sum(len(s.tool_calls) for s in run.steps) == size - 2 - len(run.steps) + 1, size
        labels = {e.name: safe_evaluate(e, run)[0][0].label for e in evaluators}
        assert "error" not in labels.values(), labels
    print("sanity:", {e.name: safe_evaluate(e, flatten(assemble(data[20][0]))[0])[0][0].label for e in evaluators})
    process(data[20][:50], evaluators)  # warm-up
    timings: dict[int, list[float]] = {size: [] for size in SIZES}
    for r in range(rounds):
        order = SIZES if r % 2 == 0 else tuple(reversed(SIZES))
        for size in order:
            traces = data[size]
            started = time.perf_counter()
            process(traces, evaluators)
            timings[size].append(time.perf_counter() - started)

    print()
    print(f"{'spans/trace':>11} {'traces':>7} {'traces/s':>10} {'spans/s':>10} {'us/trace':>9} {'spread':>7}")
    per_second = {}
    for size in SIZES:
        n = len(data[size])
        median = statistics.median(timings[size])
        per_second[size] = n / median
        spread = (max(timings[size]) - min(timings[size])) / median
        print(f"{size:>11} {n:>7} {n / median:>10,.0f} {n * size / median:>10,.0f} {1e6 * median / n:>9,.0f} {spread:>6.0%}")
    ratio = per_second[TARGET_SPANS] / TARGET_PER_SECOND
    print()
    print(f"target: traces of {TARGET_SPANS} spans assembled + evaluated per second per core >= {TARGET_PER_SECOND:,}")
    print(f"measured {per_second[TARGET_SPANS]:,.0f}/s: ratio to target {ratio:.2f} -> {'PASS' if ratio >= 1 else 'MISS'}")

    # where the time goes, 20-span traces
    us = phases(data[TARGET_SPANS], evaluators, rounds)
    print(
        f"\nphases, us per trace of {TARGET_SPANS} spans (timed apart): assembly {us['assemble']:,.0f} (one pass); "
        f"the general path on the same traces {us['general']:,.0f} (reading spans through the dialects "
        f"{us['read']:,.0f}), {us['general'] / us['assemble']:.2f}x; evaluation {us['evaluate']:,.0f} "
        f"({', '.join(f'{e.name} {us[e.name]:,.0f}' for e in evaluators)})"
    )
    profiler = cProfile.Profile()
    profiler.enable()
    process(data[20], evaluators)
    profiler.disable()
    for sort in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(sort).print_stats(10)
        lines = out.getvalue().splitlines()
        start = next(i for i, line in enumerate(lines) if "ncalls" in line)
        print(f"\ncProfile, {len(data[20])} traces of 20 spans, top 10 by {sort}:")
        print("\n".join(line[:150] for line in lines[start : start + 11]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
