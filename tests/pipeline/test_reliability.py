"""Reliability of AgentEvalProcessor under overload, faults, process events and hostile input.

No wall-clock thresholds: every assertion is about counts, bounds and outcomes. Joins and
waits carry generous timeouts only so that a hang fails the test instead of blocking the run.
Complements tests/intake/test_processor.py (crash, hang, small flood, shutdown, one fork) and
tests/serve/test_server.py (server SIGTERM drain).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry, generate_latest

from otel_agent_eval import AgentEvalProcessor, AgentTrace, EvalResult, Evaluator, assemble
from otel_agent_eval.cli.scripted_agent import ScriptedAgent, Turn
from otel_agent_eval.evaluators import LoopDetection, StepBudget, ToolFailureRecovery
from otel_agent_eval.model import EvaluatedTrace
from otel_agent_eval.records import SpanRecord

AGENT = ScriptedAgent("calc", {"add": lambda a, b: a + b})
GOOD = [Turn("adding", [("add", {"a": 1, "b": 2})]), Turn("3")]
HANG_GUARD = 60.0  # a join/wait this long means a hang: the test fails instead of blocking


class RecordingSink:
    """Appended to ``processor.pipeline.sinks``: every evaluated agent trace, thread-safely."""

    name = "recording"

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.evaluated: list[EvaluatedTrace] = []

    def emit(self, evaluated: EvaluatedTrace) -> None:
        with self.lock:
            self.evaluated.append(evaluated)

    def trace_ids(self) -> Counter[str]:
        with self.lock:
            return Counter(e.trace.trace_id for e in self.evaluated)

    def results(self, evaluator: str) -> list[EvalResult]:
        with self.lock:
            return [r for e in self.evaluated for r in e.results if r.evaluator == evaluator]


def make_processor(evaluators: list[Evaluator] | None = None, **settings: Any) -> tuple[TracerProvider, AgentEvalProcessor, RecordingSink]:
    settings.setdefault("settle_delay_seconds", 0.0)
    settings.setdefault("max_evaluations_per_second", 0)
    settings.setdefault("max_traces_per_second", 0)
    settings.setdefault("emit_spans", False)
    settings.setdefault("emit_logs", False)
    provider = TracerProvider()
    processor = AgentEvalProcessor(evaluators, registry=CollectorRegistry(), env={}, **settings)
    provider.add_span_processor(processor)
    sink = RecordingSink()
    processor.pipeline.sinks.append(sink)
    return provider, processor, sink


def run_agent(tracer: Any, agent: ScriptedAgent = AGENT, turns: list[Turn] = GOOD) -> str:
    """One agent run under a request span; returns its trace id (hex)."""
    with tracer.start_as_current_span("POST /agent") as request:
        agent.run(tracer, "add 1 and 2", turns)
    return format(request.get_span_context().trace_id, "032x")


class Blocking(Evaluator):
    """Blocks on ``release`` (an Event) or on ``lock`` (a Lock held elsewhere: a deadlock)."""

    name = "blocking"

    def __init__(self, lock: threading.Lock | None = None) -> None:
        super().__init__()
        self.release = threading.Event()
        self.lock = lock
        self.entered = 0

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        self.entered += 1
        if self.lock is not None:
            with self.lock:  # held by the test: never acquired
                pass
        else:
            # Every test releases it in a finally; the guard only frees the daemon thread if one does not.
            # It must outlast the slowest test that holds it (the 100k flood on a loaded machine).
            self.release.wait(10 * HANG_GUARD)
        return [self.scored(trace, 1.0, "late")]


# --- flood ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_flood_of_100k_traces_stays_within_bounds_counts_every_drop_and_never_blocks_the_app() -> None:
    """100,000 agent traces through a real TracerProvider with small bounds, while the only
    evaluation worker is stuck in an evaluator: the app thread finishes the whole flood (so
    ``on_end`` never waits for a worker), the intake, buffer and queue never exceed their
    bounds, and every trace is accounted for by a stage counter or a drop reason."""
    bounds = dict(max_intake_spans=200, max_buffered_traces=20, max_spans_per_trace=3, max_queued_evaluations=5)
    stuck = Blocking()
    provider, processor, sink = make_processor(
        [stuck, LoopDetection()], idle_timeout_seconds=0.05, evaluator_timeout_seconds=600, workers=1, **bounds
    )
    pipeline, stats = processor.pipeline, processor.stats
    tracer = provider.get_tracer("app")
    agent_attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "flood"}
    chat_attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 10}
    n_traces, spans_sent = 100_000, 0
    peaks: Counter[str] = Counter()
    try:
        for i in range(n_traces):
            chats = 1 + i % 3  # every third trace has 4 spans: one over max_spans_per_trace
            with tracer.start_as_current_span("invoke_agent flood", attributes=agent_attrs):
                for _ in range(chats):
                    with tracer.start_as_current_span("chat m", attributes=chat_attrs):
                        pass
            spans_sent += chats + 1
            if i % 250 == 0:
                for key, size in (("intake", len(pipeline.intake)), ("buffer", len(pipeline.buffer)),
                                  ("queue", len(pipeline._queue)), ("active", len(pipeline.intake.active)),
                                  ("completed_ids", len(pipeline.buffer._completed))):
                    peaks[key] = max(peaks[key], size)
        # the app got through 100k traces while the worker never returned
        assert stats.spans_received.value == spans_sent
        assert stuck.entered == 1 and not stuck.release.is_set()
        assert sink.evaluated == []
    finally:
        stuck.release.set()
    assert processor.force_flush(30_000)
    provider.shutdown()

    assert peaks["intake"] <= bounds["max_intake_spans"]
    assert peaks["buffer"] <= bounds["max_buffered_traces"]
    assert peaks["queue"] <= bounds["max_queued_evaluations"]
    assert peaks["completed_ids"] <= 10_000  # the late-span window
    assert peaks["active"] < n_traces // 2, peaks  # the hot path's trace-id set does not grow with the flood

    # spans: every span is kept or dropped at the intake with a reason
    assert stats.spans_kept.value + stats.intake_full.value == spans_sent
    dropped = stats.dropped.snapshot()
    assert stats.intake_full.value > 0
    assert stats.spans_dropped.get("trace_too_large") > 0
    assert dropped.get(("buffer_full",), 0) > 0 and dropped.get(("queue_full",), 0) > 0
    # traces: every trace that reached the buffer was completed or evicted; every completed one
    # assembled to one agent run (or a counted drop); every agent run sampled; every sampled run
    # evaluated or dropped (queue_full / shutdown)
    completed = stats.traces_completed.total()
    entered = completed + dropped.get(("buffer_full",), 0)
    assert entered <= n_traces
    # a trace that never reached the buffer lost all its spans (>= 2) at the intake
    assert 2 * (n_traces - entered) <= stats.intake_full.value
    assert completed == stats.agent_traces.total() + dropped.get(("no_agent",), 0) + dropped.get(("assembly_error",), 0)
    sampled = sum(v for (decision, _), v in stats.sampling.snapshot().items() if decision == "sampled")
    assert sampled == stats.agent_traces.total()  # sample_rate 1, no rate limit
    evaluated = stats.traces_evaluated.total()
    assert evaluated == len(sink.evaluated) == sum(sink.trace_ids().values())
    assert sampled == evaluated + dropped.get(("queue_full",), 0) + dropped.get(("shutdown",), 0)
    assert stats.processor_errors.value == 0


# --- judge outage --------------------------------------------------------------------------------


def test_judge_outage_gives_error_results_and_recovery_gives_verdicts_again() -> None:
    pytest.importorskip("openai")
    from otel_agent_eval.evaluators.judge import JudgeClient, JudgeSettings, TaskCompletion
    from tests.openai_server import FakeOpenAI, answer, status

    with FakeOpenAI() as server:
        settings = JudgeSettings.load(env={
            "OTEL_AGENT_EVAL_JUDGE_MODEL": "judge-1", "OTEL_AGENT_EVAL_JUDGE_BASE_URL": server.base_url,
            "OTEL_AGENT_EVAL_JUDGE_API_KEY": "sk-test", "OTEL_AGENT_EVAL_JUDGE_MAX_RETRIES": "1",
            "OTEL_AGENT_EVAL_JUDGE_BACKOFF_SECONDS": "0.01",
        })
        judge = JudgeClient(settings)
        provider, processor, sink = make_processor([TaskCompletion(judge), LoopDetection(), ToolFailureRecovery()])
        tracer = provider.get_tracer("app")
        try:
            server.set_default(status(503))
            outage = {run_agent(tracer) for _ in range(3)}
            assert processor.force_flush(30_000)
            server.set_default(answer({"agent_failed": "no"}))
            recovered = {run_agent(tracer) for _ in range(3)}
            assert processor.force_flush(30_000)
        finally:
            provider.shutdown()
            judge.close()
        by_trace: dict[str, dict[str, EvalResult]] = {}
        for e in sink.evaluated:  # two phases per run: deterministic, then judge
            by_trace.setdefault(e.trace.trace_id, {}).update({r.evaluator: r for r in e.results})
        assert set(by_trace) == outage | recovered
        assert Counter(e.phase for e in sink.evaluated) == {"deterministic": 6, "judge": 6}
        for trace_id in outage:
            judged = by_trace[trace_id]["task_completion"]
            assert judged.label == "error" and judged.details["reason"], judged
            assert by_trace[trace_id]["loop_detection"].label == "pass"
            assert by_trace[trace_id]["tool_failure_recovery"].label == "pass"
        for trace_id in recovered:
            assert by_trace[trace_id]["task_completion"].label == "pass", by_trace[trace_id]["task_completion"]
        assert processor.stats.evaluator_errors.snapshot() == {}  # judge errors are results, not evaluator crashes
        assert len(server.requests) >= 3 + 3


# --- deadlock ------------------------------------------------------------------------------------


def test_deadlocked_evaluator_times_out_the_rest_runs_and_shutdown_returns() -> None:
    held = threading.Lock()
    held.acquire()  # never released while the pipeline runs: the evaluator deadlocks
    deadlocked = Blocking(lock=held)
    provider, processor, sink = make_processor([deadlocked, LoopDetection(), StepBudget()], evaluator_timeout_seconds=0.3)
    tracer = provider.get_tracer("app")
    try:
        first = {run_agent(tracer) for _ in range(3)}
        assert processor.force_flush(30_000)
        assert Counter(r.label for r in sink.results("blocking")) == {"error": 3}
        assert all(r.details["reason"] == "timeout" for r in sink.results("blocking"))
        assert Counter(r.label for r in sink.results("loop_detection")) == {"pass": 3}
        assert set(sink.trace_ids()) == first
        assert processor.stats.evaluator_errors.snapshot() == {("blocking", "timeout"): 3}

        # more runs, then shutdown while a worker is stuck again: it must return (bounded by its
        # timeout per stuck evaluator), and every run is evaluated or counted as dropped
        second = {run_agent(tracer) for _ in range(3)}
        done = threading.Event()
        shutdown = threading.Thread(target=lambda: (provider.shutdown(), done.set()), daemon=True)
        shutdown.start()
        shutdown.join(HANG_GUARD)
        assert done.is_set(), "provider.shutdown() did not return with a deadlocked evaluator"
        evaluated_second = set(sink.trace_ids()) & second
        accounted = len(evaluated_second) + processor.stats.dropped.get("shutdown")
        assert accounted == 3  # evaluated, or counted as dropped (the job a worker held included)
    finally:
        held.release()


# --- SIGTERM -------------------------------------------------------------------------------------

SIGTERM_APP = textwrap.dedent('''
    """An app that owns a TracerProvider with AgentEvalProcessor and drains it on SIGTERM.

    What the app must do: install a SIGTERM handler that calls provider.shutdown() (which
    shuts the processor down: evaluate what it can within shutdown_timeout_seconds, count
    the rest as dropped 'shutdown'). Python's default SIGTERM action kills the process at
    once, without running atexit hooks, so nothing would be drained.
    """
    import json, signal, sys, time
    from opentelemetry.sdk.trace import TracerProvider
    from prometheus_client import CollectorRegistry
    from otel_agent_eval import AgentEvalProcessor, Evaluator
    from otel_agent_eval.evaluators import LoopDetection
    from otel_agent_eval.cli.scripted_agent import ScriptedAgent, Turn

    class Slow(Evaluator):
        name = "slow"
        def evaluate(self, trace):
            time.sleep(0.1)
            return [self.scored(trace, 1.0, "ok")]

    provider = TracerProvider()
    processor = AgentEvalProcessor([Slow(), LoopDetection()], registry=CollectorRegistry(), env={},
                                   settle_delay_seconds=0, max_evaluations_per_second=0, emit_spans=False,
                                   emit_logs=False, shutdown_timeout_seconds=1.0, max_queued_evaluations=1000)
    provider.add_span_processor(processor)

    def on_sigterm(signum, frame):
        provider.shutdown()
        s = processor.stats
        print(json.dumps({"evaluated": s.traces_evaluated.total(), "agent_traces": s.agent_traces.total(),
                          "dropped": {k[0]: v for k, v in s.dropped.snapshot().items()},
                          "completed": {k[0]: v for k, v in s.traces_completed.snapshot().items()},
                          "spans_kept": s.spans_kept.value, "errors": s.processor_errors.value}), flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_sigterm)
    agent = ScriptedAgent("calc", {"add": lambda a, b: a + b})
    tracer = provider.get_tracer("app")
    for _ in range(N):
        agent.run(tracer, "add", [Turn("adding", [("add", {"a": 1, "b": 2})]), Turn("3")])
    print("READY", flush=True)
    while True:
        time.sleep(0.05)
''')


def test_a_run_being_handed_to_the_sinks_at_the_deadline_is_counted_before_shutdown_returns() -> None:
    """The drain deadline passes while a worker hands a finished run to the sinks: that run is neither
    lost nor evaluated until they have it, so ``shutdown`` waits for it (briefly) before returning, and
    the figures read right after add up (a SIGTERM handler prints them and exits)."""

    class SlowSink(RecordingSink):
        def __init__(self) -> None:
            super().__init__()
            self.entered, self.release = threading.Event(), threading.Event()

        def emit(self, evaluated: EvaluatedTrace) -> None:
            self.entered.set()
            self.release.wait(10)
            super().emit(evaluated)

    provider, processor, _ = make_processor([LoopDetection()])
    sink = SlowSink()
    processor.pipeline.sinks.append(sink)
    run_agent(provider.get_tracer("app"))
    assert sink.entered.wait(HANG_GUARD)
    threading.Timer(0.3, sink.release.set).start()  # the sink takes the run after the drain deadline
    processor.shutdown(timeout_millis=50)
    stats = processor.stats
    assert stats.traces_evaluated.total() + stats.dropped.get("shutdown") == 1
    assert stats.traces_evaluated.total() == 1 and sink.trace_ids()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_during_evaluation_drains_or_counts_every_buffered_trace(tmp_path: Any) -> None:
    n = 40  # 40 runs x 0.1 s of evaluation: far more than the 1 s shutdown allows
    script = tmp_path / "app.py"
    script.write_text(SIGTERM_APP.replace("range(N)", f"range({n})"))
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # this checkout's package, not an installed one
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": here})
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "READY"
        proc.send_signal(signal.SIGTERM)  # evaluation is under way: the slow evaluator has a backlog
        out, err = proc.communicate(timeout=HANG_GUARD)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    counters = json.loads(out.strip().splitlines()[-1])
    assert counters["errors"] == 0
    assert counters["agent_traces"] == n
    assert counters["evaluated"] >= 1
    # every trace completed: by its root (settled before the signal; how many depends on how fast the app
    # ran on a loaded machine) or by the drain, which completes whatever is still buffered
    assert sum(counters["completed"].values()) == n, counters
    assert set(counters["completed"]) <= {"root_ended", "shutdown"}, counters
    # every agent run: evaluated before exit, or dropped with reason shutdown (a held one included)
    assert counters["evaluated"] + counters["dropped"].get("shutdown", 0) == n, counters


# --- pre-fork server -----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_prefork_workers_each_evaluate_exactly_their_own_traces() -> None:
    """Gunicorn style: the processor is installed in the master, which then forks N workers."""
    provider, processor, sink = make_processor(settle_delay_seconds=30)
    tracer = provider.get_tracer("app")
    pending_in_master = {run_agent(tracer) for _ in range(2)}  # buffered (settle delay) at fork time
    workers: dict[int, int] = {}  # pid -> read end of its pipe
    for number in range(4):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # worker: serve its own agent traffic, report, exit without cleanup
            code = 1
            try:
                os.close(read_end)
                own = [run_agent(tracer) for _ in range(3 + number)]
                flushed = processor.force_flush(20_000)
                report = {"own": own, "flushed": flushed, "evaluated": list(sink.trace_ids().elements()),
                          "stats_evaluated": processor.stats.traces_evaluated.total(),
                          "collector_alive": processor.pipeline.alive}
                os.write(write_end, json.dumps(report).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        workers[pid] = read_end

    reports = {}
    deadline = time.monotonic() + HANG_GUARD
    while workers and time.monotonic() < deadline:
        for pid in list(workers):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                with os.fdopen(workers.pop(pid), "rb") as pipe:
                    reports[pid] = (status, json.loads(pipe.read() or b"{}"))
        time.sleep(0.02)
    for pid in workers:  # a deadlocked worker: kill it and fail
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert not workers, "a forked worker deadlocked"

    seen: Counter[str] = Counter()
    for status, report in reports.values():
        assert status == 0
        assert report["flushed"] and report["collector_alive"]
        assert sorted(report["evaluated"]) == sorted(report["own"])  # exactly its own, each once
        assert report["stats_evaluated"] == len(report["own"])
        seen.update(report["own"])
    assert all(v == 1 for v in seen.values()) and not set(seen) & pending_in_master
    assert len(seen) == 3 + 4 + 5 + 6

    # the master is unaffected: its pending traces and new traffic are evaluated there, once
    more = {run_agent(tracer) for _ in range(2)}
    assert processor.force_flush(20_000)
    assert sink.trace_ids() == Counter(pending_in_master | more)
    provider.shutdown()


# --- concurrency ---------------------------------------------------------------------------------


async def _async_agent(tracer: Any, number: int) -> str:
    """An agent run whose spans interleave with other tasks' at every await."""
    with tracer.start_as_current_span("invoke_agent async", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "async"}) as agent:
        await asyncio.sleep(0)
        call = {"type": "tool_call", "id": f"c{number}", "name": "add", "arguments": {"a": number}}
        with tracer.start_as_current_span("chat m", attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [call]}])}):
            await asyncio.sleep(0)
        with tracer.start_as_current_span("execute_tool add", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "add", "gen_ai.tool.call.id": f"c{number}"}):
            await asyncio.sleep(0)
        with tracer.start_as_current_span("chat m", attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "ok"}]}])}):
            await asyncio.sleep(0)
    return format(agent.get_span_context().trace_id, "032x")


def test_many_threads_and_asyncio_tasks_each_run_evaluated_exactly_once() -> None:
    provider, processor, sink = make_processor(workers=2, max_queued_evaluations=10_000)
    tracer = provider.get_tracer("app")
    threads_n, runs_per_thread, tasks_n = 16, 25, 200
    produced: list[str] = []
    produced_lock = threading.Lock()
    start = threading.Barrier(threads_n + 1)

    def thread_body() -> None:
        start.wait(HANG_GUARD)
        own = [run_agent(tracer) for _ in range(runs_per_thread)]
        with produced_lock:
            produced.extend(own)

    async def all_tasks() -> list[str]:
        return list(await asyncio.gather(*(_async_agent(tracer, i) for i in range(tasks_n))))

    def asyncio_body() -> None:
        start.wait(HANG_GUARD)
        ids = asyncio.run(all_tasks())
        with produced_lock:
            produced.extend(ids)

    threads = [threading.Thread(target=thread_body) for _ in range(threads_n)] + [threading.Thread(target=asyncio_body)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_GUARD)
    assert not any(t.is_alive() for t in threads)
    assert processor.force_flush(30_000)
    provider.shutdown()

    assert len(produced) == len(set(produced)) == threads_n * runs_per_thread + tasks_n
    assert sink.trace_ids() == Counter(produced)  # every run once, none twice, nothing foreign
    for evaluated in sink.evaluated:  # and each assembled as a whole run, not mixed with others
        if evaluated.trace.agent_name == "async":
            (step0, step1) = evaluated.trace.steps
            assert [c.executed for c in step0.tool_calls] == [True] and step1.output == "ok"
        else:
            assert [len(s.tool_calls) for s in evaluated.trace.steps] == [1, 0]
    assert processor.stats.processor_errors.value == 0 and processor.stats.dropped.total() == 0


# --- hostile input -------------------------------------------------------------------------------

MB10 = "x" * (10 * 1024 * 1024)
DEEP_OPEN = "[" * 100_000
DEEP_VALID = "[" * 100_000 + "]" * 100_000
AGENT_ATTRS = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "hostile"}


def _rec(trace_id: int, span_id: int, parent: int | None, name: str, start: int, end: int, **attrs: Any) -> SpanRecord:
    return SpanRecord(trace_id=trace_id, span_id=span_id, parent_span_id=parent, name=name,
                      start_time_unix_nano=start, end_time_unix_nano=end, attributes=attrs)


def _chat(trace_id: int, span_id: int, parent: int | None = 1, start: int = 10, end: int = 20, call_id: str | None = "c1",
          **extra: Any) -> SpanRecord:
    part: dict[str, Any] = {"type": "tool_call", "name": "t", "arguments": {"x": 1}}
    if call_id is not None:
        part["id"] = call_id
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [part]}])}
    return _rec(trace_id, span_id, parent, "chat m", start, end, **{**attrs, **extra})


def _tool(trace_id: int, span_id: int, parent: int | None = 1, start: int = 30, end: int = 40, call_id: str | None = "c1",
          **extra: Any) -> SpanRecord:
    attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}
    if call_id is not None:
        attrs["gen_ai.tool.call.id"] = call_id
    return _rec(trace_id, span_id, parent, "execute_tool t", start, end, **{**attrs, **extra})


def hostile_traces() -> dict[str, list[SpanRecord]]:
    """One trace per hostile shape, as SpanRecords (what OTLP or the SDK can deliver)."""
    cases: dict[str, Any] = {
        "10MB strings": lambda t: [
            _rec(t, 1, None, "invoke_agent", 0, 100, **{**AGENT_ATTRS, "gen_ai.input.messages": MB10}),
            _chat(t, 2, **{"gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": MB10}]}])}),
            _tool(t, 3, **{"gen_ai.tool.call.arguments": MB10, "gen_ai.tool.call.result": MB10})],
        "deeply nested JSON": lambda t: [
            _rec(t, 1, None, "invoke_agent", 0, 100, **{**AGENT_ATTRS, "gen_ai.output.messages": DEEP_VALID}),
            _chat(t, 2, **{"gen_ai.input.messages": DEEP_OPEN, "gen_ai.output.messages": DEEP_VALID}),
            _tool(t, 3, **{"gen_ai.tool.call.arguments": DEEP_VALID, "gen_ai.tool.call.result": DEEP_OPEN})],
        "invalid UTF-8 bytes": lambda t: [
            _rec(t, 1, None, "invoke_agent", 0, 100, **{**AGENT_ATTRS, "gen_ai.agent.name": b"\xff\xfe"}),
            _chat(t, 2, **{"gen_ai.input.messages": b"\xc3\x28", "gen_ai.output.messages": b"\xff"}),
            _tool(t, 3, **{"gen_ai.tool.name": b"\xff", "gen_ai.tool.call.arguments": b"\xfe", "gen_ai.tool.call.result": b"\xff"})],
        "lone surrogates": lambda t: [
            _rec(t, 1, None, "invoke_agent \udcff", 0, 100, **AGENT_ATTRS),
            _chat(t, 2, call_id="c\udcff", **{"gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "\\ud800"}]}]'}),
            _tool(t, 3, call_id="c\udcff", **{"gen_ai.tool.call.arguments": '{"x": "\\udcff"}', "gen_ai.tool.call.result": "\ud800"})],
        "NaN and infinities": lambda t: [
            _rec(t, 1, None, "invoke_agent", 0, 100, **{**AGENT_ATTRS, "gen_ai.usage.input_tokens": math.inf}),
            _chat(t, 2, **{"gen_ai.usage.input_tokens": math.nan, "gen_ai.usage.output_tokens": math.inf}),
            _chat(t, 4, start=50, end=60, call_id="c2", **{"gen_ai.usage.input_tokens": -math.inf, "gen_ai.usage.output_tokens": -1.5}),
            _tool(t, 3, **{"gen_ai.tool.call.arguments": '{"x": NaN, "y": -Infinity}', "gen_ai.tool.call.result": math.nan}),
            _tool(t, 5, start=70, end=80, call_id="c2", **{"gen_ai.tool.call.result": math.inf})],
        "cycle in parent ids": lambda t: [
            _rec(t, 1, 3, "invoke_agent", 0, 100, **AGENT_ATTRS), _chat(t, 2, parent=1), _tool(t, 3, parent=2)],
        "span is its own parent": lambda t: [
            _rec(t, 1, 1, "invoke_agent", 0, 100, **AGENT_ATTRS), _chat(t, 2, parent=2), _tool(t, 3, parent=3)],
        "duplicate span ids": lambda t: [
            _rec(t, 1, None, "invoke_agent", 0, 100, **AGENT_ATTRS), _chat(t, 2), _chat(t, 2, start=50, end=60),
            _tool(t, 2), _tool(t, 3), _tool(t, 3, start=31), _rec(t, 1, None, "invoke_agent", 0, 100)],
        "missing end times": lambda t: [
            _rec(t, 1, None, "invoke_agent", 0, 0, **AGENT_ATTRS), _chat(t, 2, end=0), _tool(t, 3, start=0, end=0)],
        "absurd times": lambda t: [
            _rec(t, 1, None, "invoke_agent", -5, -10, **AGENT_ATTRS), _chat(t, 2, start=2**70, end=-1), _tool(t, 3, start=2**64)],
    }
    return {name: build(1000 + i) for i, (name, build) in enumerate(cases.items())}


@pytest.mark.parametrize("name", list(hostile_traces()))
def test_hostile_spans_never_raise_from_assemble_or_the_evaluators(name: str) -> None:
    from otel_agent_eval.evaluators import ToolCallAccuracy
    from otel_agent_eval.evaluators.base import safe_evaluate

    traces = assemble(hostile_traces()[name])
    assert traces, "a trace with an agent span yields an agent run"
    for trace in traces:
        for evaluator in (ToolCallAccuracy(), ToolFailureRecovery(), LoopDetection(), StepBudget()):
            results, failed = safe_evaluate(evaluator, trace)  # an exception would become an error result
            assert not failed, (evaluator.name, results)
            assert [(r.evaluator, r.label in ("pass", "fail", "skipped")) for r in results] == [(evaluator.name, True)]


@pytest.mark.slow
def test_hostile_spans_through_the_processor_each_end_with_an_outcome() -> None:
    """SpanRecords enter the processor's pipeline as the server's intake does (cycles, duplicate ids
    and missing end times cannot be produced through the SDK); every trace gets an outcome."""
    provider, processor, sink = make_processor()
    cases = hostile_traces()
    for spans in cases.values():
        processor.pipeline.intake.offer_records(spans)
    assert processor.force_flush(60_000)
    provider.shutdown()
    stats = processor.stats
    assert stats.traces_completed.total() == len(cases)
    assert stats.dropped.snapshot() == {} and stats.processor_errors.value == 0
    runs = Counter({format(spans[0].trace_id, "032x"): len(assemble(spans)) for spans in cases.values()})
    assert sink.trace_ids() == runs  # every run of every hostile trace evaluated, exactly once
    assert stats.traces_evaluated.total() == stats.agent_traces.total() == sum(runs.values())


def test_hostile_attributes_through_the_sdk_hot_path() -> None:
    """The same content set by an app through the real SDK: 10 MB, nested, bytes, surrogates, NaN."""
    provider, processor, sink = make_processor()
    tracer = provider.get_tracer("app")
    hostile = {
        "gen_ai.input.messages": MB10, "gen_ai.output.messages": DEEP_OPEN, "gen_ai.usage.input_tokens": math.nan,
        "gen_ai.usage.output_tokens": math.inf, "gen_ai.request.model": b"\xff\xfe", "x.text": "\udcff",
    }
    ids = []
    for value_set in ({}, hostile):
        with tracer.start_as_current_span("invoke_agent h", attributes=AGENT_ATTRS) as agent:
            with tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat", **value_set}):
                pass
            with tracer.start_as_current_span("execute_tool t", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t",
                "gen_ai.tool.call.arguments": DEEP_VALID, "gen_ai.tool.call.result": "\ud800"}):
                pass
        ids.append(format(agent.get_span_context().trace_id, "032x"))
    assert processor.force_flush(60_000)
    provider.shutdown()
    assert processor.stats.processor_errors.value == 0
    assert set(sink.trace_ids()) == set(ids)
    for evaluated in sink.evaluated:
        assert {r.label for r in evaluated.results} <= {"pass", "fail", "skipped", "error"}


# --- deeply nested arguments without call ids; a surrogate in an agent name ---------------------------


def test_assemble_survives_deeply_nested_arguments_without_call_ids() -> None:
    spans = [_rec(1, 1, None, "invoke_agent", 0, 100, **AGENT_ATTRS), _chat(1, 2, call_id=None),
             _tool(1, 3, call_id=None, **{"gen_ai.tool.call.arguments": DEEP_OPEN})]
    (trace,) = assemble(spans)
    (call,) = trace.steps[0].tool_calls
    assert (call.arguments, call.requested, call.executed) == ({"x": 1}, True, True)  # the request's, not the unreadable span's
    (issue,) = trace.steps[0].issues
    assert issue.startswith("gen_ai.tool.call.arguments: malformed JSON (RecursionError") and issue.endswith("kept raw")


def test_surrogate_agent_name_does_not_break_the_metrics_exposition() -> None:
    provider, processor, _ = make_processor()
    ScriptedAgent("bad\udcff", {"add": lambda a, b: a + b}).run(provider.get_tracer("app"), "add", GOOD)
    assert processor.force_flush(10_000)
    provider.shutdown()
    exposition = generate_latest(processor.registry).decode()
    assert 'agent_eval_traces_evaluated_total{agent="bad?",service="unknown"} 1.0' in exposition.splitlines()


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as None: how JSON (which has neither) carries them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


HOSTILE_VALUES_KEPT = {
    # what survives of the hostile values, cleaned: invalid UTF-8 replaced, lone surrogates as "?"
    "invalid UTF-8 bytes": lambda t: (t.agent_name, [(c.name, c.arguments, c.result) for c in t.tool_calls]) == (
        "\ufffd\ufffd", [("\ufffd", "\ufffd", "\ufffd")]),
    "lone surrogates": lambda t: (t.input, [(c.call_id, c.arguments, c.result) for c in t.tool_calls]) == (
        "?", [("c?", {"x": "?"}, "?")]),
    "NaN and infinities": lambda t: [(c.arguments, c.result) for c in t.tool_calls] == [
        ({"x": None, "y": None}, None), ({"x": 1}, None)],
    "10MB strings": lambda t: t.tool_calls[0].result == MB10 and "over the 1000000 parse limit" in t.steps[0].issues[0],
}


@pytest.mark.parametrize("name", list(hostile_traces()))
def test_assembled_hostile_traces_serialize_to_json(name: str) -> None:
    """Every assembled hostile trace is strict JSON (valid UTF-8, no NaN token) and reads back equal,
    non-finite numbers as null; the cleaned hostile values are still in it."""
    traces = assemble(hostile_traces()[name])
    assert traces
    for trace in traces:
        text = trace.model_dump_json()
        text.encode("utf-8")  # strict: a lone surrogate would raise
        json.loads(text, parse_constant=lambda token: pytest.fail(f"{token} in the JSON"))
        restored = AgentTrace.model_validate_json(text)
        assert restored.model_dump() == _finite(trace.model_dump())
        if name in HOSTILE_VALUES_KEPT:
            assert HOSTILE_VALUES_KEPT[name](restored), restored


def test_shutdown_counts_the_job_a_worker_holds() -> None:
    slow = Blocking()  # blocks on an Event; the watchdog (30 s) never fires during the test
    provider, processor, _sink = make_processor([slow], evaluator_timeout_seconds=30, workers=1)
    tracer = provider.get_tracer("app")
    try:
        for _ in range(3):
            run_agent(tracer)
        deadline = time.monotonic() + HANG_GUARD
        while slow.entered == 0 and time.monotonic() < deadline:  # a worker holds the first run
            time.sleep(0.01)
        assert slow.entered == 1
        assert not processor.pipeline.shutdown(timeout=0.2)
        stats = processor.stats
        assert stats.traces_evaluated.total() + stats.dropped.get("shutdown") == 3
    finally:
        slow.release.set()
        provider.shutdown()
