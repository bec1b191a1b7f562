"""AgentEvalProcessor on a real SDK TracerProvider: bounds, failures, shutdown, fork, bad input."""

from __future__ import annotations

import json
import os
import threading
import time
import tracemalloc
from collections import Counter
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from otel_agent_eval import AgentEvalProcessor, AgentTrace, EvalResult, Evaluator
from otel_agent_eval.cli.scripted_agent import ScriptedAgent, Turn
from otel_agent_eval.evaluators import LoopDetection

AGENT = ScriptedAgent("calc", {"add": lambda a, b: a + b})
GOOD = [Turn("adding", [("add", {"a": 1, "b": 2})]), Turn("3")]


class Setup:
    def __init__(self, capture: bool = True, **settings: Any) -> None:
        self.spans = InMemorySpanExporter()
        self.logs = InMemoryLogRecordExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "shop"}))
        self.logger_provider = LoggerProvider()
        if capture:  # in-memory exporters keep everything: off for memory measurements
            self.provider.add_span_processor(SimpleSpanProcessor(self.spans))
            self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))
        evaluators = settings.pop("evaluators", None)
        settings.setdefault("settle_delay_seconds", 0.0)
        settings.setdefault("max_evaluations_per_second", 0)
        settings.setdefault("max_traces_per_second", 0)
        self.processor = AgentEvalProcessor(
            evaluators, tracer_provider=self.provider, logger_provider=self.logger_provider,
            registry=CollectorRegistry(), env={}, **settings,
        )
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("app")

    def run(self, n: int = 1, turns: list[Turn] = GOOD) -> None:
        for _ in range(n):
            AGENT.run(self.tracer, "add 1 and 2", turns)

    def samples(self, name: str) -> dict[tuple[tuple[str, str], ...], float]:
        text = generate_latest(self.processor.registry).decode()
        return {
            tuple(sorted(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples if s.name == name
        }

    def evaluation_spans(self) -> list[Any]:
        return [s for s in self.spans.get_finished_spans() if s.instrumentation_scope.name == "otel_agent_eval"]

    def close(self) -> None:
        self.provider.shutdown()


@pytest.fixture
def make() -> Any:
    setups: list[Setup] = []

    def factory(**settings: Any) -> Setup:
        setups.append(Setup(**settings))
        return setups[-1]

    yield factory
    for s in setups:
        s.close()


class Crashing(Evaluator):
    name = "crashing"

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        raise RuntimeError("evaluator bug")


class Hanging(Evaluator):
    name = "hanging"

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        self.release.wait(60)
        return [self.scored(trace, 1.0, "late")]


def wait_for(predicate: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def labels(setup: Setup, name: str) -> dict[str, float]:
    return {"|".join(v for _, v in k): val for k, val in setup.samples(name).items()}


def test_one_evaluation_span_and_log_per_result_tied_to_the_agent_span(make: Any) -> None:
    s = make()
    s.run()
    assert s.processor.force_flush(10_000)
    assert s.processor.force_flush(10_000)  # a second flush must not evaluate our own spans
    (evaluation,) = s.evaluation_spans()
    agent_span = next(sp for sp in s.spans.get_finished_spans() if sp.name == "invoke_agent calc")
    assert evaluation.context.trace_id == agent_span.context.trace_id
    assert evaluation.parent.span_id == agent_span.context.span_id
    assert evaluation.attributes["agent_eval.loop_detection.label"] == "pass"
    assert evaluation.attributes["agent_eval.tool_call_accuracy.label"] == "skipped"
    assert "agent_eval.tool_call_accuracy.score" not in evaluation.attributes
    logs = [data.log_record for data in s.logs.get_finished_logs()]
    assert sorted(log.attributes["gen_ai.evaluation.name"] for log in logs) == sorted(
        ["tool_call_accuracy", "tool_failure_recovery", "loop_detection", "step_budget"]
    )
    for log in logs:
        assert log.event_name == "gen_ai.evaluation.result"
        assert (log.trace_id, log.span_id) == (agent_span.context.trace_id, agent_span.context.span_id)
    assert labels(s, "agent_eval_traces_evaluated_total") == {"calc|shop": 1.0}


def test_plain_traces_are_dropped_on_the_hot_path(make: Any) -> None:
    s = make()
    for _ in range(50):
        with s.tracer.start_as_current_span("GET /"):
            with s.tracer.start_as_current_span("db"):
                pass
    s.processor.force_flush(5000)
    assert s.processor.stats.spans_received.value == 100
    assert s.processor.stats.spans_kept.value == 0
    assert s.processor.stats.traces_completed.total() == 0


def test_ancestors_of_genai_spans_are_kept_through_plain_spans(make: Any) -> None:
    s = make()
    with s.tracer.start_as_current_span("POST /chat"):
        with s.tracer.start_as_current_span("middleware"):
            s.run()
    assert wait_for(lambda: s.processor.stats.traces_evaluated.total() == 1)
    # 1 agent + 2 chat + 1 tool + the 2 plain ancestors; the root ends last and completes the trace
    assert s.processor.stats.spans_kept.value == 6
    assert labels(s, "agent_eval_traces_completed_total") == {"root_ended": 1.0}


def test_crashing_evaluator_yields_error_result_and_pipeline_goes_on(make: Any) -> None:
    s = make(evaluators=[Crashing(), LoopDetection()])
    s.run(3)
    assert s.processor.force_flush(10_000)
    outcomes = labels(s, "agent_eval_results_total")
    assert outcomes["calc|crashing|error|exception|shop"] == 3.0 and outcomes["calc|loop_detection|pass||shop"] == 3.0
    assert labels(s, "agent_eval_evaluator_errors_total") == {"crashing|exception": 3.0}
    error_logs = [d.log_record for d in s.logs.get_finished_logs() if d.log_record.attributes["gen_ai.evaluation.name"] == "crashing"]
    assert all(log.attributes["error.type"] == "exception" for log in error_logs) and len(error_logs) == 3


def test_hanging_evaluator_times_out_and_the_rest_still_runs(make: Any) -> None:
    hanging = Hanging()
    s = make(evaluators=[hanging, LoopDetection()], evaluator_timeout_seconds=0.3)
    try:
        s.run(2)
        assert s.processor.force_flush(20_000)
        outcomes = labels(s, "agent_eval_results_total")
        assert outcomes["calc|hanging|error|timeout|shop"] == 2.0
        assert outcomes["calc|loop_detection|pass||shop"] == 2.0
        assert labels(s, "agent_eval_evaluator_errors_total") == {"hanging|timeout": 2.0}
    finally:
        hanging.release.set()
    time.sleep(0.2)  # the abandoned workers finish late: their results must be discarded
    assert labels(s, "agent_eval_results_total").get("calc|hanging|pass||shop") is None


def test_flood_against_small_bounds_stays_bounded_and_counts_drops(make: Any) -> None:
    s = make(
        capture=False,
        max_intake_spans=50, max_buffered_traces=5, max_spans_per_trace=3, max_queued_evaluations=2,
        settle_delay_seconds=60, idle_timeout_seconds=60,
    )
    tracemalloc.start()
    s.run(20)
    base, _ = tracemalloc.get_traced_memory()
    s.run(500)
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    stats = s.processor.stats
    time.sleep(0.3)  # let the collector drain the intake
    assert len(s.processor.pipeline.buffer) <= 5
    assert all(len(e.spans) <= 3 for e in s.processor.pipeline.buffer._entries.values())
    spans_dropped = labels(s, "agent_eval_spans_dropped_total")
    dropped = labels(s, "agent_eval_dropped_total")
    assert spans_dropped["trace_too_large"] > 0
    assert dropped["buffer_full"] > 0
    # every kept span is accounted for: buffered, evicted with its trace, or dropped with a reason
    assert stats.spans_received.value == 520 * 4
    assert current - base < 1_000_000, f"memory grew by {current - base} bytes under a flood"


def test_intake_full_is_counted_when_the_background_thread_lags(make: Any, monkeypatch: Any) -> None:
    s = make(max_intake_spans=10)
    monkeypatch.setattr(s.processor.pipeline, "_drain_intake", lambda now: None)  # the collector lags
    s.run(10)
    assert len(s.processor.pipeline.intake) == 10
    assert labels(s, "agent_eval_spans_dropped_total")["intake_full"] == 30.0
    monkeypatch.undo()
    assert s.processor.force_flush(5000)
    # whatever was kept is still evaluated: runs 1 and 2 whole, run 3 from its first two spans
    assert s.processor.stats.traces_evaluated.total() == 3


def test_shutdown_evaluates_pending_traces(make: Any) -> None:
    """Runs still waiting for their settle delay are evaluated by ``shutdown()``: before it returns,
    each has its evaluation span and its result records exported, and is counted."""
    s = make(settle_delay_seconds=30)
    s.run(4)
    agent_spans = {sp.context.trace_id: sp.context.span_id for sp in s.spans.get_finished_spans() if sp.name == "invoke_agent calc"}
    assert len(agent_spans) == 4
    assert s.evaluation_spans() == [] and s.processor.stats.traces_evaluated.total() == 0  # all four pending
    s.processor.shutdown()
    evaluations = s.evaluation_spans()
    assert sorted(e.context.trace_id for e in evaluations) == sorted(agent_spans)  # exactly one per run
    assert all(e.parent.span_id == agent_spans[e.context.trace_id] for e in evaluations)
    results = Counter((r.log_record.trace_id, r.log_record.attributes["gen_ai.evaluation.name"])
                      for r in s.logs.get_finished_logs() if r.log_record.event_name == "gen_ai.evaluation.result")
    evaluators = ("tool_call_accuracy", "tool_failure_recovery", "loop_detection", "step_budget")
    assert results == Counter({(trace_id, name): 1 for trace_id in agent_spans for name in evaluators})
    assert labels(s, "agent_eval_traces_evaluated_total") == {"calc|shop": 4.0}
    assert labels(s, "agent_eval_traces_completed_total") == {"shutdown": 4.0}
    s.run(1)  # spans after shutdown are ignored, never an error
    assert len(s.evaluation_spans()) == 4
    assert s.processor.stats.processor_errors.value == 0


def test_malformed_genai_json_is_recorded_as_an_issue_not_a_crash(make: Any) -> None:
    s = make()
    with s.tracer.start_as_current_span("invoke_agent x", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "x"}):
        with s.tracer.start_as_current_span("chat m", attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]]',
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "tool_call", "name": "t", "arguments": "{bad"}]}]),
        }):
            pass
        with s.tracer.start_as_current_span("execute_tool t", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": "{bad",
        }):
            pass
    assert s.processor.force_flush(5000)
    assert s.processor.stats.traces_evaluated.total() == 1
    from otel_agent_eval import assemble

    (trace,) = assemble(sp for sp in s.spans.get_finished_spans() if sp.instrumentation_scope.name != "otel_agent_eval")
    (step,) = trace.steps
    assert step.tool_calls[0].arguments == "{bad" and step.tool_calls[0].executed
    assert any("gen_ai.input.messages: malformed JSON" in issue for issue in step.issues)


def test_hot_path_never_raises_into_the_app(make: Any) -> None:
    s = make()

    class Broken:
        @property
        def context(self) -> Any:
            raise RuntimeError("broken span")

    s.processor.on_end(Broken())  # type: ignore[arg-type]
    assert s.processor.stats.processor_errors.value == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_child_evaluates_with_its_own_threads(make: Any) -> None:
    s = make()
    s.run(1)  # parent state, pending at fork time
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: the processor must work without the parent's threads
        try:
            s.run(2)
            ok = s.processor.force_flush(10_000)
            os.write(write_end, f"{ok},{s.processor.stats.traces_evaluated.total()}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    child_report = os.read(read_end, 100).decode()
    os.close(read_end)
    assert status == 0
    assert child_report == "True,2"  # the child starts empty: only its own two runs
    assert s.processor.force_flush(10_000)
    assert s.processor.stats.traces_evaluated.total() == 1


def test_agent_names_beyond_the_limit_fold_into_other(make: Any) -> None:
    s = make(max_agent_labels=2)
    for name in ("a", "b", "c", "d"):
        ScriptedAgent(name, {"add": lambda a, b: a + b}).run(s.tracer, "add", GOOD)
    assert s.processor.force_flush(10_000)
    assert labels(s, "agent_eval_traces_evaluated_total") == {"a|shop": 1.0, "b|shop": 1.0, "other|shop": 2.0}
    assert labels(s, "agent_eval_agent_traces_total") == {"a|shop": 1.0, "b|shop": 1.0, "other|shop": 2.0}


def test_score_histogram_carries_trace_id_exemplars(make: Any) -> None:
    from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest

    s = make()
    s.run()
    assert s.processor.force_flush(10_000)
    agent_span = next(sp for sp in s.spans.get_finished_spans() if sp.name == "invoke_agent calc")
    text = openmetrics_latest(s.processor.registry).decode()
    assert f'# {{trace_id="{agent_span.context.trace_id:032x}"}}' in text


def test_a_taken_metrics_port_does_not_stop_the_app(caplog: pytest.LogCaptureFixture) -> None:
    """Each worker of a multi-process app given the same port: the first serves /metrics, the others start
    and evaluate without it, and say so once at ERROR, naming the setting (the OSError stopped the app)."""
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        with caplog.at_level("ERROR", logger="otel_agent_eval"):
            setup = Setup(prometheus_port=taken.getsockname()[1], prometheus_host="127.0.0.1")
        assert setup.processor.metrics_port is None
        (message,) = [r.getMessage() for r in caplog.records if "cannot serve /metrics" in r.getMessage()]
        assert "OTEL_AGENT_EVAL_PROMETHEUS_PORT" in message
        setup.run()
        assert setup.processor.force_flush(10_000)
        assert sum(setup.samples("agent_eval_traces_evaluated_total").values()) == 1
        setup.processor.shutdown()
    finally:
        taken.close()


def test_the_metrics_server_serves_the_registry() -> None:
    import urllib.request

    setup = Setup(prometheus_port=0, prometheus_host="127.0.0.1")
    try:
        setup.run()
        assert setup.processor.force_flush(10_000)
        port = setup.processor.metrics_port
        assert port
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        assert "agent_eval_traces_evaluated_total{" in text and "agent_eval_score_bucket{" in text
    finally:
        setup.processor.shutdown()


def test_installing_twice_on_one_provider_says_so(caplog: pytest.LogCaptureFixture) -> None:
    """A notebook cell run twice: two processors evaluate every trace; the second install says so (the first,
    once shut down, is no longer counted)."""
    from otel_agent_eval import install

    provider = TracerProvider()
    first = install(provider, registry=CollectorRegistry(), env={})
    with caplog.at_level("WARNING", logger="otel_agent_eval"):
        second = install(provider, registry=CollectorRegistry(), env={})
    assert [r.getMessage() for r in caplog.records if "already has an AgentEvalProcessor" in r.getMessage()]
    first.shutdown()
    second.shutdown()
    caplog.clear()
    with caplog.at_level("WARNING", logger="otel_agent_eval"):
        third = install(provider, registry=CollectorRegistry(), env={})
    assert not [r for r in caplog.records if "already has an AgentEvalProcessor" in r.getMessage()]
    third.shutdown()
