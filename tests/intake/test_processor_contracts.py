"""AgentEvalProcessor keeps the SDK span processors' contracts: shutdown, force_flush, fork.

Real SDK providers throughout; a hang guard (a join or wait this long means the contract is
broken) instead of any timing threshold.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import traceback
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from otel_agent_eval import AgentEvalProcessor, Evaluator, install, isolation
from otel_agent_eval.cli.scripted_agent import ScriptedAgent, Turn
from otel_agent_eval.model import AgentTrace, EvalResult
from otel_agent_eval.sinks.prometheus import PrometheusSink, ResultMetrics
from tests.frameworks.harness import RecordingSink
from tests.openai_server import FakeOpenAI, answer

HANG_GUARD = 60.0
AGENT = ScriptedAgent("calc", {"add": lambda a, b: a + b})
TURNS = [Turn("adding", [("add", {"a": 1, "b": 2})]), Turn("3")]


def quiet(**overrides: Any) -> dict[str, Any]:
    """Keyword arguments for a processor whose results go only to its own registry."""
    return {"registry": CollectorRegistry(), "env": {}, "emit_spans": False, "emit_logs": False,
            "settle_delay_seconds": 0.0, "max_evaluations_per_second": 0, **overrides}


def run_agent(tracer: Any) -> str:
    with tracer.start_as_current_span("POST /agent") as request:
        AGENT.run(tracer, "add 1 and 2", TURNS)
    return format(request.get_span_context().trace_id, "032x")


class Blocked(Evaluator):
    """Blocks until ``release`` is set: an evaluator that outlives any deadline."""

    name = "blocked"

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.started = threading.Event()

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        self.started.set()
        self.release.wait(HANG_GUARD)
        return [self.scored(trace, 1.0, "ok")]


def in_thread(call: Any) -> threading.Thread:
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(HANG_GUARD)
    return thread


# --- shutdown -------------------------------------------------------------------------------------


def test_after_shutdown_spans_and_log_records_are_dropped_counted_and_nothing_is_retained() -> None:
    provider, logs = TracerProvider(), LoggerProvider()
    processor = install(provider, logs, **quiet(max_traces_per_second=5))  # most new traces would be rejected
    tracer = provider.get_tracer("app")
    run_agent(tracer)
    processor.shutdown()
    spans_before = processor.stats.spans_received.value
    for _ in range(300):  # new traces, far above the admission rate: each would leave a rejected id behind
        run_agent(tracer)
    logger = logs.get_logger("app")
    with tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}):
        logger.emit(event_name="gen_ai.client.inference.operation.details", body={"gen_ai.output.messages": "[]"})
    after = processor.stats.spans_received.value - spans_before
    intake = processor.pipeline.intake
    assert after == 300 * 5 + 1
    assert processor.stats.spans_dropped_snapshot()[("already_shutdown",)] == after
    assert processor.stats.log_records_dropped_snapshot()[("already_shutdown",)] == 1
    assert len(intake) == 0 and not intake.active and not intake.rejected and not intake.rejected_earlier
    assert len(processor.pipeline.buffer) == 0 and len(intake.waiting) == 0
    assert not processor.force_flush(1000)  # the SDK's answer once stopped


def evaluating_forever(**settings: Any) -> tuple[AgentEvalProcessor, Blocked]:
    """A processor whose one run is being evaluated, and will be until ``blocked.release`` is set."""
    blocked = Blocked()
    provider = TracerProvider()
    processor = AgentEvalProcessor([blocked], **quiet(evaluator_timeout_seconds=3600, **settings))
    provider.add_span_processor(processor)
    run_agent(provider.get_tracer("app"))
    assert blocked.started.wait(HANG_GUARD)
    return processor, blocked


def test_shutdown_takes_its_own_deadline_is_idempotent_and_the_second_call_returns_at_once() -> None:
    processor, blocked = evaluating_forever(shutdown_timeout_seconds=0.2)
    # The deadline is shutdown_timeout_seconds, not the hour evaluator_timeout_seconds allows.
    assert not in_thread(processor.shutdown).is_alive()
    dropped = processor.stats.dropped.get("shutdown")
    assert dropped == 1  # the run the blocked evaluator held
    # A second call, even with a far longer deadline, returns at once and counts nothing again.
    assert not in_thread(lambda: processor.shutdown(timeout_millis=3_600_000)).is_alive()
    assert processor.stats.dropped.get("shutdown") == dropped
    blocked.release.set()


def test_shutdown_timeout_millis_overrides_the_setting() -> None:
    processor, blocked = evaluating_forever(shutdown_timeout_seconds=3600)
    assert not in_thread(lambda: processor.shutdown(timeout_millis=100)).is_alive()
    assert processor.stats.dropped.get("shutdown") == 1
    blocked.release.set()


def test_settings_object_and_keyword_overrides_combine() -> None:
    from otel_agent_eval import Settings

    settings = Settings.load({}, sample_rate=0.5, workers=2)
    processor = AgentEvalProcessor(settings=settings, registry=CollectorRegistry(), sample_rate=0.25)
    assert (processor.settings.sample_rate, processor.settings.workers) == (0.25, 2)
    processor.shutdown()


def test_settings_overrides_name_every_settings_field_but_evaluators() -> None:
    from otel_agent_eval.config import Settings, SettingsOverrides

    assert set(SettingsOverrides.__annotations__) == set(Settings.model_fields) - {"evaluators"}


def test_evaluators_by_name_are_refused_with_where_names_go() -> None:
    """evaluators= takes objects (README, Configuration): names say so at once, not as an AttributeError."""
    from otel_agent_eval import Settings

    with pytest.raises(TypeError, match=r"give Evaluator objects; evaluators by name go in OTEL_AGENT_EVAL_EVALUATORS"):
        AgentEvalProcessor(["loop_detection"], registry=CollectorRegistry())  # type: ignore[list-item]
    processor = AgentEvalProcessor(settings=Settings.load({}, evaluators="loop_detection"), registry=CollectorRegistry())
    assert [e.name for e in processor.evaluators] == ["loop_detection"]
    processor.shutdown()


# --- fork -----------------------------------------------------------------------------------------


def result_metrics(processor: AgentEvalProcessor) -> ResultMetrics:
    return next(sink.metrics for sink in processor.pipeline.sinks if isinstance(sink, PrometheusSink))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_rebuilds_locks_counters_and_the_judge_client_held_in_the_parent() -> None:
    """At fork, parent threads hold locks the child's evaluation needs: the counters', the label cap's, the
    isolation marks', the stages', the result metrics', and every slot of the judge client. The child must evaluate anyway,
    with counters of its own and a judge client of its own."""
    with FakeOpenAI(answer({"agent_failed": "no"})) as judge_server:
        env = {"OTEL_AGENT_EVAL_JUDGE_MODEL": "judge-1", "OTEL_AGENT_EVAL_JUDGE_BASE_URL": judge_server.base_url,
               "OTEL_AGENT_EVAL_JUDGE_API_KEY": "test", "OTEL_AGENT_EVAL_JUDGE_EVALUATORS": "task_completion",
               "OTEL_AGENT_EVAL_JUDGE_CONCURRENCY": "2"}
        provider, logs = TracerProvider(), LoggerProvider()
        processor = install(provider, logs, **{**quiet(), "env": env})
        sink = RecordingSink()
        processor.pipeline.sinks.append(sink)
        tracer = provider.get_tracer("app")
        run_agent(tracer)
        assert processor.force_flush(20_000)  # the parent evaluated one run (its counters are not the child's)
        parent_judge = processor.judge
        held = [processor.stats.traces_evaluated._lock, processor.stats.traces_judged._lock,
                processor.pipeline.run_labels.agent._lock, processor.pipeline.stages.lock, isolation._lock,
                parent_judge.budget._lock, result_metrics(processor)._lock]
        slots = [parent_judge._slots.acquire(timeout=HANG_GUARD) for _ in range(2)]
        assert all(slots)
        for lock in held:
            assert lock.acquire(timeout=HANG_GUARD)
        sink.evaluated.clear()
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            code = 1
            try:
                os.close(read_end)
                own = run_agent(tracer)
                flushed = processor.force_flush(20_000)
                with tracer.start_as_current_span("chat m") as chat:  # a content log record of a trace of its own
                    logs.get_logger("app").emit(event_name="gen_ai.client.inference.operation.details", body={})
                report = {
                    "log_taken": chat.get_span_context().trace_id in processor.pipeline.intake.active,
                    "own": own, "flushed": flushed,
                    "phases": sorted((e.trace.trace_id, e.phase) for e in sink.evaluated),
                    "judged": [r.label for e in sink.evaluated for r in e.results if r.evaluator == "task_completion"],
                    "evaluated": processor.stats.traces_evaluated.total(), "judged_count": processor.stats.traces_judged.total(),
                    "results_counted": sum(s.buckets[0] for s in result_metrics(processor).results.values()),
                    "results": sum(len(e.results) for e in sink.evaluated),
                    "new_judge": processor.judge is not parent_judge,
                    "judge_shared": all(e.judge is processor.judge for e in processor.evaluators if e.needs_judge),
                }
                os.write(write_end, json.dumps(report).encode())
                code = 0
            except BaseException:  # noqa: BLE001 - the forked child reports everything to the parent, then _exit
                os.write(write_end, json.dumps({"error": traceback.format_exc()}).encode())
            finally:
                os._exit(code)
        os.close(write_end)
        for lock in held:
            lock.release()
        for _ in slots:
            parent_judge._slots.release()
        deadline = time.monotonic() + HANG_GUARD
        status = None
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.02)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child deadlocked on a lock its parent held at fork")
        with os.fdopen(read_end, "rb") as pipe:
            report = json.loads(pipe.read() or b"{}")
        # The parent goes on with its own pipeline and judge.
        run_agent(tracer)
        assert processor.force_flush(20_000)
        provider.shutdown()
    assert status == 0, report
    assert report["flushed"] and report["new_judge"] and report["judge_shared"] and report["log_taken"]
    assert sorted(report["phases"]) == [[report["own"], "deterministic"], [report["own"], "judge"]]  # the stages run side by side
    assert report["judged"] == ["pass"]
    assert (report["evaluated"], report["judged_count"]) == (1, 1)  # the child's own counts, from zero
    assert report["results_counted"] == report["results"] > 0  # its result metrics too
    assert sorted(e.phase for e in sink.evaluated) == ["deterministic", "judge"]  # the parent's run after the fork
