#!/usr/bin/env python
"""Judge throughput: evaluated agent traces per second against a judge answering in 200 ms.

The real path: a scripted agent emits GenAI spans into an ``AgentEvalProcessor``
whose pipeline runs one judge evaluator (``task_completion``) through the real
``openai`` client against the local fake OpenAI server (127.0.0.1, every answer
delayed by ``--latency`` seconds). Two set-ups side by side: judge concurrency
1 and 16 (the judge stage's worker threads and requests in flight).

Admission and rate caps are off and the queues hold every trace, so every trace
sent is judged: the script checks that it was (judged runs and requests both
equal the traces sent) and fails otherwise. Each trace has a distinct final
output, so the cache never answers. The clock runs from the first span to
``force_flush`` returning. Ideal figures are ``concurrency / latency`` traces
per second.

Usage:  python benchmarks/judge_throughput.py [--traces 256] [--latency 0.2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from otel_agent_eval import AgentEvalProcessor  # noqa: E402
from otel_agent_eval.cli.scripted_agent import ScriptedAgent, Turn  # noqa: E402
from otel_agent_eval.evaluators.judge import JudgeClient, JudgeMetrics, JudgeSettings, TaskCompletion  # noqa: E402
from tests.openai_server import FakeOpenAI, answer  # noqa: E402


def run(server: FakeOpenAI, concurrency: int, traces: int) -> tuple[float, int, int]:
    registry = CollectorRegistry()
    settings = JudgeSettings.load(env={}, model="bench-judge", base_url=server.base_url, api_key="sk-bench",
                                  concurrency=concurrency, timeout_seconds=10, deadline_seconds=20, max_queued=traces + 1)
    judge = JudgeClient(settings, metrics=JudgeMetrics(registry))
    processor = AgentEvalProcessor(
        evaluators=[TaskCompletion(judge)], registry=registry, settle_delay_seconds=0.0, max_traces_per_second=0,
        max_evaluations_per_second=0, max_queued_evaluations=traces + 1, emit_spans=False, emit_logs=False,
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("bench")
    agent = ScriptedAgent("weather", tools={"get_weather": lambda city: {"temp_c": 20}})
    before = server.request_count
    started = time.perf_counter()
    for i in range(traces):
        agent.run(tracer, f"Weather in city {i}?", [Turn(tool_calls=[("get_weather", {"city": f"c{i}"})]), Turn(text=f"{i}C")])
    processor.force_flush(600_000)
    elapsed = time.perf_counter() - started
    evaluated = processor.stats.traces_judged.total()
    processor.shutdown()
    judge.close()
    requests = server.request_count - before
    if evaluated != traces or requests != traces:
        raise SystemExit(f"concurrency {concurrency}: {evaluated} of {traces} traces judged, {requests} requests")
    return evaluated / elapsed, evaluated, requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=int, default=256)
    parser.add_argument("--latency", type=float, default=0.2)
    args = parser.parse_args()
    with FakeOpenAI(default=answer({"agent_failed": "no"}, delay=args.latency)) as server:
        rows = [(c, *run(server, c, args.traces)) for c in (1, 16)]
    print(f"judge latency {args.latency * 1000:.0f} ms, {args.traces} traces, evaluator task_completion\n")
    print(f"{'concurrency':>11} | {'traces/s':>9} | {'ideal':>6} | {'evaluated':>9} | {'requests':>8}")
    print(f"{'-' * 11}-+-{'-' * 9}-+-{'-' * 6}-+-{'-' * 9}-+-{'-' * 8}")
    for concurrency, rate, evaluated, requests in rows:
        print(f"{concurrency:>11} | {rate:>9.1f} | {concurrency / args.latency:>6.1f} | {evaluated:>9} | {requests:>8}")
    print(f"\nspeed-up 16 vs 1: {rows[1][1] / rows[0][1]:.1f}x")


if __name__ == "__main__":
    main()
