"""Issue 13, items 1, 2 and 9: nothing an evaluator does is evaluated, and by default it stays out of the app's traces.

The app instruments the ``openai`` client with a real instrumentation (the contrib
``opentelemetry-instrumentation-openai-v2`` with content capture and the latest GenAI
conventions, or OpenLLMetry's ``opentelemetry-instrumentation-openai``) on its own
TracerProvider, and the processor is installed on that provider with two judge evaluators
against a local OpenAI-compatible server, plus a custom evaluator calling the app's instrumented
client. Before the fix every judge call became a ``chat`` span the app kept, assembled as an
agent run and judged again, without end.

Each scenario runs the app's agent three times, then flushes the processor ``FLUSH_ROUNDS``
times: a feedback loop shows up as more evaluations and requests on every round, so the counts
below are exact and the test ends whatever happens.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import openai
import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace as trace_api
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Sampler
from prometheus_client import CollectorRegistry, generate_latest

from otel_agent_eval import AgentEvalProcessor, AgentTrace, EvalResult, Evaluator, Settings, install, isolation
from otel_agent_eval.cli.scripted_agent import ScriptedAgent, Turn
from otel_agent_eval.evaluators import (
    LoopDetection,
    StepBudget,
    ToolArgumentValidity,
    ToolCallAccuracy,
    ToolFailureRecovery,
    build_configured_evaluators,
    view,
)
from otel_agent_eval.evaluators.base import evaluate_run, safe_evaluate, telemetry_free
from otel_agent_eval.evaluators.view import RunView, run_view
from otel_agent_eval.isolation import EvaluationRun, evaluation_run, is_evaluator_telemetry
from otel_agent_eval.records import OWN_SCOPE
from tests.conftest import Telemetry, make_logging
from tests.frameworks.harness import RecordingSink
from tests.openai_server import FakeOpenAI, status

pytest.importorskip("opentelemetry.instrumentation.openai_v2")
pytest.importorskip("opentelemetry.instrumentation.openai")

from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetryInstrumentor
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as ContribInstrumentor

RUNS = 3
FLUSH_ROUNDS = 3
JUDGE_MODEL = "judge-1"
JUDGE_EVALUATORS = ("task_completion", "trajectory_efficiency")
TONE_MODEL = "tone-model"
INSTRUMENTATIONS: dict[str, Callable[[], Any]] = {"openai_v2": ContribInstrumentor, "openllmetry": OpenLLMetryInstrumentor}


class ToneCheck(Evaluator):
    """The usual custom evaluator: asks an LLM through the app's own (instrumented) client."""

    name = "tone_check"

    def __init__(self, base_url: str) -> None:
        super().__init__()
        self.client = openai.OpenAI(base_url=base_url, api_key="test", max_retries=0)

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        self.client.chat.completions.create(
            model=TONE_MODEL, messages=[{"role": "user", "content": f"Is this polite? {trace.final_output}"}]
        )
        return [self.scored(trace, 1.0, "polite")]


@dataclass
class Outcome:
    telemetry: Telemetry
    processor: AgentEvalProcessor
    recorder: RecordingSink
    app_trace_ids: set[str]
    requests: list[dict[str, Any]]

    def requests_for(self, model: str) -> int:
        return sum(1 for r in self.requests if r["body"].get("model") == model)

    def evaluated_trace_ids(self, phase: str) -> list[str]:
        """Runs whose results of one phase (``deterministic`` or ``judge``) were emitted."""
        return sorted(e.trace.trace_id for e in self.recorder.evaluated if e.phase == phase)

    def exported_trace_ids(self) -> set[str]:
        return {format(s.context.trace_id, "032x") for s in self.telemetry.span_exporter.get_finished_spans()}


def _telemetry(sampler: Sampler | None) -> Telemetry:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler) if sampler is not None else TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    logger_provider, log_exporter = make_logging()
    return Telemetry(provider, exporter, logger_provider, log_exporter)


@contextmanager
def _instrumented(name: str, telemetry: Telemetry) -> Iterator[None]:
    instrumentor = INSTRUMENTATIONS[name]()
    instrumentor.instrument(tracer_provider=telemetry.tracer_provider, logger_provider=telemetry.logger_provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()


@pytest.fixture
def genai_env(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Content capture on, latest GenAI conventions: what a user of these instrumentations sets."""

    def set_mode(mode: str) -> None:
        monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", mode)
        monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT", raising=False)

    set_mode("SPAN_ONLY")
    return set_mode


def run_app(
    instrumentation: str,
    *,
    sampler: Sampler | None = None,
    judges: tuple[str, ...] = JUDGE_EVALUATORS,
    tone: bool = True,
    judge_tracer_provider: Any = None,
) -> Outcome:
    """Three agent runs on an instrumented app with the processor installed; flushed ``FLUSH_ROUNDS`` times.

    ``judge_tracer_provider="app"``: the judge's spans go to the app's own provider.
    """
    telemetry = _telemetry(sampler)
    if judge_tracer_provider == "app":
        judge_tracer_provider = telemetry.tracer_provider
    tp = telemetry.tracer_provider
    with FakeOpenAI() as server, _instrumented(instrumentation, telemetry):
        env = {"OTEL_AGENT_EVAL_JUDGE_MODEL": JUDGE_MODEL, "OTEL_AGENT_EVAL_JUDGE_BASE_URL": server.base_url,
               "OTEL_AGENT_EVAL_JUDGE_API_KEY": "test", "OTEL_AGENT_EVAL_JUDGE_EVALUATORS": ",".join(judges)}
        registry = CollectorRegistry()
        settings = Settings.load(env, settle_delay_seconds=0.05)
        evaluators, judge = build_configured_evaluators(
            settings, registry=registry, env=env if judges else {}, judge_tracer_provider=judge_tracer_provider
        )
        if tone:
            evaluators.append(ToneCheck(server.base_url))
        processor = install(tp, telemetry.logger_provider, evaluators=evaluators, settings=settings, registry=registry)
        recorder = RecordingSink()
        processor.pipeline.sinks.append(recorder)
        tracer = tp.get_tracer("app")
        for n in range(RUNS):
            ScriptedAgent("calc", {"add": lambda a, b: a + b}).run(
                tracer, f"add {n} and 2", [Turn(None, [("add", {"a": n, "b": 2})]), Turn(str(n + 2))]
            )
        app_trace_ids = {format(s.context.trace_id, "032x") for s in telemetry.span_exporter.get_finished_spans()
                         if s.instrumentation_scope.name == "app"}
        for _ in range(FLUSH_ROUNDS):
            assert processor.force_flush(10_000)
        processor.shutdown()
        if judge is not None:
            judge.close()
        requests = list(server.requests)
    telemetry.shutdown()
    return Outcome(telemetry, processor, recorder, app_trace_ids, requests)


def assert_only_the_app_was_evaluated(outcome: Outcome, judges: tuple[str, ...] = JUDGE_EVALUATORS, tone: bool = True) -> None:
    assert len(outcome.app_trace_ids) == RUNS
    assert outcome.evaluated_trace_ids("deterministic") == sorted(outcome.app_trace_ids)
    assert outcome.evaluated_trace_ids("judge") == sorted(outcome.app_trace_ids)  # the judge and tone evaluators' phase
    assert outcome.requests_for(JUDGE_MODEL) == len(judges) * RUNS  # one request per judge evaluator per run
    assert outcome.requests_for(TONE_MODEL) == (RUNS if tone else 0)
    for evaluated in outcome.recorder.evaluated:
        labels = {r.evaluator: r.label for r in evaluated.results}
        if evaluated.phase == "judge":
            assert all(labels[name] in ("pass", "fail") for name in judges), labels  # the judge answered
        else:
            assert labels.get("tone_check", "pass") == "pass"  # a custom evaluator runs with the deterministic ones


# --- default sampler: evaluator-made spans are never recorded, never evaluated -------------------


@pytest.mark.parametrize("instrumentation", sorted(INSTRUMENTATIONS))
def test_judge_and_custom_evaluator_calls_are_never_evaluated_nor_exported(
    instrumentation: str, genai_env: Callable[[str], None]
) -> None:
    outcome = run_app(instrumentation)
    assert_only_the_app_was_evaluated(outcome)
    # The app exported its own runs (and our evaluation spans in them), nothing from the evaluators.
    assert outcome.exported_trace_ids() == outcome.app_trace_ids
    exported = outcome.telemetry.span_exporter.get_finished_spans()
    assert [s.name for s in exported if s.name.startswith("chat ") and s.instrumentation_scope.name != "app"] == []


# --- a sampler that ignores the parent: recorded and exported, still never evaluated -------------


@pytest.mark.parametrize("instrumentation", sorted(INSTRUMENTATIONS))
def test_with_an_always_on_sampler_evaluator_spans_are_exported_but_never_evaluated(
    instrumentation: str, genai_env: Callable[[str], None]
) -> None:
    outcome = run_app(instrumentation, sampler=ALWAYS_ON)
    assert_only_the_app_was_evaluated(outcome)
    evaluator_spans = [
        s for s in outcome.telemetry.span_exporter.get_finished_spans()
        if format(s.context.trace_id, "032x") not in outcome.app_trace_ids
    ]
    models = {s.attributes.get("gen_ai.request.model") for s in evaluator_spans}
    assert TONE_MODEL in models  # the sampler recorded the custom evaluator's call: the intake rule is what held
    dropped = outcome.processor.stats.spans_dropped.get("evaluator_telemetry")
    assert dropped == sum(1 for s in evaluator_spans if s.attributes.get("gen_ai.request.model"))
    metrics = generate_latest(outcome.processor.registry).decode()
    assert f'agent_eval_spans_dropped_total{{reason="evaluator_telemetry"}} {dropped}.0' in metrics


# --- log records ---------------------------------------------------------------------------------


def test_log_records_from_evaluator_calls_are_dropped_at_intake(genai_env: Callable[[str], None]) -> None:
    """Event-only content: each call emits a details log record with the evaluation context's trace id.

    Log records have no sampler: they reach the app's log exporter (documented), but the
    processor drops and counts them, and evaluates only the app's runs.
    """
    genai_env("EVENT_ONLY")
    outcome = run_app("openai_v2")
    assert_only_the_app_was_evaluated(outcome)
    details = [r.log_record for r in outcome.telemetry.logs()
               if r.log_record.event_name == "gen_ai.client.inference.operation.details"]
    evaluator_logs = [r for r in details if format(r.trace_id, "032x") not in outcome.app_trace_ids]
    assert len(evaluator_logs) == RUNS * (len(JUDGE_EVALUATORS) + 1)
    assert outcome.processor.stats.log_records_dropped.get("evaluator_telemetry") == len(evaluator_logs)
    metrics = generate_latest(outcome.processor.registry).decode()
    assert f'agent_eval_log_records_dropped_total{{reason="evaluator_telemetry"}} {len(evaluator_logs)}.0' in metrics


# --- the judge's own spans, on request ------------------------------------------------------------


def test_judge_spans_go_to_the_provider_given() -> None:
    judge_tp = TracerProvider()
    judge_exporter = InMemorySpanExporter()
    judge_tp.add_span_processor(SimpleSpanProcessor(judge_exporter))
    outcome = run_app("openai_v2", judge_tracer_provider=judge_tp)
    assert_only_the_app_was_evaluated(outcome)
    assert outcome.exported_trace_ids() == outcome.app_trace_ids  # none on the app's provider

    spans = judge_exporter.get_finished_spans()
    assert len(spans) == len(JUDGE_EVALUATORS) * RUNS  # one per judge request, nothing from the instrumentation
    agent_spans = {e.trace.agent_span_id for e in outcome.recorder.evaluated}
    for span in spans:
        assert span.name == f"chat {JUDGE_MODEL}"
        assert span.kind.name == "CLIENT"
        assert span.instrumentation_scope.name == OWN_SCOPE
        assert span.parent is None
        attributes = dict(span.attributes)
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "openai"
        assert attributes["gen_ai.request.model"] == attributes["gen_ai.response.model"] == JUDGE_MODEL
        assert attributes["gen_ai.usage.input_tokens"] > 0 and attributes["gen_ai.usage.output_tokens"] > 0
        assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
        assert attributes["server.address"] == "127.0.0.1"
        assert format(span.links[0].context.span_id, "016x") in agent_spans
    assert sorted(s.attributes["agent_eval.evaluator.name"] for s in spans) == sorted(JUDGE_EVALUATORS * RUNS)
    judge_tp.shutdown()


def test_judge_spans_on_the_apps_own_provider_are_exported_but_never_evaluated() -> None:
    outcome = run_app("openai_v2", judge_tracer_provider="app", tone=False)
    assert_only_the_app_was_evaluated(outcome, tone=False)
    judge_spans = [s for s in outcome.telemetry.span_exporter.get_finished_spans() if s.name == f"chat {JUDGE_MODEL}"]
    assert len(judge_spans) == len(JUDGE_EVALUATORS) * RUNS


def test_a_failed_judge_request_is_an_error_span() -> None:
    judge_tp = TracerProvider()
    judge_exporter = InMemorySpanExporter()
    judge_tp.add_span_processor(SimpleSpanProcessor(judge_exporter))
    with FakeOpenAI(status(400)) as server:
        env = {"OTEL_AGENT_EVAL_JUDGE_MODEL": JUDGE_MODEL, "OTEL_AGENT_EVAL_JUDGE_BASE_URL": server.base_url,
               "OTEL_AGENT_EVAL_JUDGE_API_KEY": "test", "OTEL_AGENT_EVAL_JUDGE_EVALUATORS": "task_completion"}
        evaluators, judge = build_configured_evaluators(Settings.load(env), env=env, judge_tracer_provider=judge_tp)
        trace = AgentTrace(trace_id="1" * 32, agent_span_id="2" * 16, agent_name="calc", input="hi", final_output="hello")
        (result,), _ = safe_evaluate(evaluators[-1], trace)
        judge.close()
    assert result.label == "error"
    (span,) = judge_exporter.get_finished_spans()
    assert span.status.status_code.name == "ERROR"
    assert span.attributes["error.type"] == "BadRequestError"
    judge_tp.shutdown()


# --- item 9: the first thing a user tries shows results, or says why not ---------------------------


def test_the_processor_says_once_when_results_have_nowhere_to_go(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    # The API's global providers as in a fresh process, whatever an earlier test set (restored afterwards).
    from opentelemetry._logs import _internal as logs_api

    monkeypatch.setattr(trace_api, "_TRACER_PROVIDER", None)
    monkeypatch.setattr(logs_api, "_LOGGER_PROVIDER", None)
    monkeypatch.delenv("OTEL_PYTHON_TRACER_PROVIDER", raising=False)
    monkeypatch.delenv("OTEL_PYTHON_LOGGER_PROVIDER", raising=False)
    assert isinstance(trace_api.get_tracer_provider(), trace_api.ProxyTracerProvider)
    caplog.set_level(logging.WARNING, logger="otel_agent_eval")
    nowhere = AgentEvalProcessor(env={})
    nowhere.shutdown()
    warnings = [r.getMessage() for r in caplog.records if "nowhere to go" in r.getMessage()]
    assert len(warnings) == 1 and "install(provider" in warnings[0]

    caplog.clear()
    provider = TracerProvider()
    install(provider, env={}).shutdown()
    AgentEvalProcessor(env={}, prometheus_port=0).shutdown()
    assert not [r for r in caplog.records if "nowhere to go" in r.getMessage()]
    provider.shutdown()


# --- the thread rule and the bounds --------------------------------------------------------------


class FreshRootEvaluator(Evaluator):
    """Starts a GenAI span in a brand-new root context, as instrumentations that keep their own context do."""

    name = "fresh_root"

    def __init__(self, provider: TracerProvider) -> None:
        super().__init__()
        self.tracer = provider.get_tracer("their-instrumentation")

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        with self.tracer.start_as_current_span("chat other", context=Context(), attributes={"gen_ai.operation.name": "chat"}):
            pass
        return [self.scored(trace, 1.0, "ok")]


def test_spans_in_a_fresh_root_context_on_an_evaluator_thread_are_never_evaluated() -> None:
    telemetry = _telemetry(None)
    tp = telemetry.tracer_provider
    processor = install(tp, evaluators=[FreshRootEvaluator(tp)], settle_delay_seconds=0.05, registry=CollectorRegistry())
    recorder = RecordingSink()
    processor.pipeline.sinks.append(recorder)
    for n in range(RUNS):
        ScriptedAgent("calc", {"add": lambda a, b: a + b}).run(tp.get_tracer("app"), f"add {n}", [Turn(str(n))])
    for _ in range(FLUSH_ROUNDS):
        assert processor.force_flush(10_000)
    processor.shutdown()
    telemetry.shutdown()
    assert len(recorder.evaluated) == RUNS
    # a root span is sampled by the default sampler, so it is exported; the thread rule keeps it out
    assert len([s for s in telemetry.span_exporter.get_finished_spans() if s.name == "chat other"]) == RUNS
    assert processor.stats.spans_dropped.get("evaluator_telemetry") == RUNS


def test_the_evaluation_trace_id_memory_is_bounded_and_threads_are_unmarked_after_a_run() -> None:
    run = EvaluationRun("x", "1" * 32, None)
    seen = []
    for _ in range(isolation.MAX_TRACE_IDS + 10):
        with evaluation_run(run):
            seen.append(trace_api.get_current_span().get_span_context().trace_id)
            with evaluation_run(run):  # nested: the thread stays marked until the outer run ends
                pass
            assert is_evaluator_telemetry(None)
            assert isolation.current_run() is run
    assert not is_evaluator_telemetry(None)
    assert isolation.current_run() is None
    assert len(isolation._trace_ids) == isolation.MAX_TRACE_IDS
    assert not is_evaluator_telemetry(seen[0]) and is_evaluator_telemetry(seen[-1])
    assert not trace_api.get_current_span().get_span_context().is_valid


class _Observer(Evaluator):
    """Records what it runs under: the current span and run, and whether the thread is marked."""

    name = "observer"

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[Any, bool, Any]] = []

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        span = trace_api.get_current_span()
        self.seen.append((span.get_span_context(), span.is_recording(), isolation.current_run()))
        assert is_evaluator_telemetry(None)
        return [self.scored(trace, 1.0, "seen")]


class _Leaky(Evaluator):
    """Attaches a context with a recording span of its own and never detaches it."""

    name = "leaky"

    def __init__(self, provider: TracerProvider) -> None:
        super().__init__()
        self.tracer = provider.get_tracer("leaky")

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        span = self.tracer.start_span("leaked", context=Context())
        otel_context.attach(trace_api.set_span_in_context(span))
        return [self.scored(trace, 1.0, "leaked a context")]


def test_one_scope_for_a_runs_evaluators_still_isolates_each_one() -> None:
    """The pipeline's workers open one ``evaluation_scope`` for all the evaluators of a run: each
    still runs under a non-recording, not-sampled parent, as its own run, on a marked thread, even
    after an evaluator that left a recording span's context attached."""
    provider = TracerProvider()
    first, after_leak = _Observer(), _Observer()
    trace = AgentTrace(trace_id="ab" * 16, agent_span_id="cd" * 8, agent_name="a")
    before = otel_context.get_current()
    with isolation.evaluation_scope():
        for evaluator in (first, _Leaky(provider), after_leak):
            results, failed = safe_evaluate(evaluator, trace)
            assert not failed and results[0].label == "pass"
    for observer in (first, after_leak):
        (context, recording, run), = observer.seen
        assert context.is_valid and not context.trace_flags.sampled and not recording
        assert is_evaluator_telemetry(context.trace_id)
        assert run == EvaluationRun("observer", "ab" * 16, "cd" * 8)
    assert otel_context.get_current() is before
    assert isolation.current_run() is None and not is_evaluator_telemetry(None)


class _Failing(Evaluator):
    """Leaves an evaluation run of its own entered, a recording span's context attached and another
    run's view open, then raises."""

    name = "failing"

    def __init__(self, provider: TracerProvider, other: AgentTrace) -> None:
        super().__init__()
        self.tracer, self.other = provider.get_tracer("failing"), other

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        evaluation_run(EvaluationRun("failing", "ef" * 16, None)).__enter__()
        otel_context.attach(trace_api.set_span_in_context(self.tracer.start_span("leaked", context=Context())))
        RunView(self.other).__enter__()
        raise RuntimeError("broken")


def test_a_failing_evaluator_cannot_break_the_others_of_its_run() -> None:
    """``evaluate_run``: an evaluator that raises after leaving an evaluation run entered, a context
    attached and a view open gets its ``error`` result; the evaluators after it still run isolated, as
    their own run, with their results, and nothing it left survives the run."""
    provider = TracerProvider()
    trace = AgentTrace(trace_id="ab" * 16, agent_span_id="cd" * 8, agent_name="a")
    first, after = _Observer(), _Observer()
    before = otel_context.get_current()
    results = evaluate_run([first, _Failing(provider, AgentTrace(trace_id="12" * 16)), after], trace)
    assert [(r.evaluator, r.label) for r in results] == [("observer", "pass"), ("failing", "error"), ("observer", "pass")]
    assert results[1].explanation == "RuntimeError: broken"
    (seen_first,), (seen_after,) = first.seen, after.seen
    assert seen_after[0] == seen_first[0] and not seen_after[1]  # the run's own non-recording parent
    assert seen_after[2] == EvaluationRun("observer", "ab" * 16, "cd" * 8)
    assert otel_context.get_current() is before
    assert isolation.current_run() is None and not is_evaluator_telemetry(None)
    assert run_view(trace).trace is trace and view._current.get() is None


class _TracedLoopDetection(LoopDetection):
    """A user's subclass of a built-in that does more: it starts a span of its own."""

    def __init__(self, provider: TracerProvider) -> None:
        super().__init__()
        self.tracer, self.seen = provider.get_tracer("traced"), []

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        with self.tracer.start_as_current_span("evaluating") as span:
            self.seen.append((span.is_recording(), is_evaluator_telemetry(None), isolation.current_run()))
        return super().evaluate(trace)


def test_telemetry_free_builtins_run_without_a_scope_and_their_subclasses_still_isolated() -> None:
    """The built-in deterministic evaluators declare ``telemetry_free``: a run of only those opens no
    isolation scope (no evaluation trace id, no thread mark). The declaration is not inherited: a
    user's subclass runs isolated, in a scope ``evaluate_run`` opens for it."""
    provider = TracerProvider()
    trace = AgentTrace(trace_id="ab" * 16, agent_span_id="cd" * 8, agent_name="a")
    builtins = [ToolCallAccuracy(), ToolFailureRecovery(), LoopDetection(), StepBudget(), ToolArgumentValidity()]
    assert all(telemetry_free(e) for e in builtins)
    scopes = len(isolation._trace_ids), next(reversed(isolation._trace_ids), None)
    assert [r.label for r in evaluate_run(builtins, trace)] == ["skipped", "skipped", "pass", "skipped", "skipped"]
    assert (len(isolation._trace_ids), next(reversed(isolation._trace_ids), None)) == scopes
    traced = _TracedLoopDetection(provider)
    assert not telemetry_free(traced)
    results = evaluate_run([LoopDetection(), traced], trace)
    assert [(r.evaluator, r.label) for r in results] == [("loop_detection", "pass")] * 2
    assert traced.seen == [(False, True, EvaluationRun("loop_detection", "ab" * 16, "cd" * 8))]
    assert next(reversed(isolation._trace_ids)) != scopes[1]  # the scope opened for it
    assert not is_evaluator_telemetry(None)


def test_telemetry_free_is_read_from_the_class_own_body_whatever_the_class() -> None:
    """``telemetry_free`` answers from one class attribute that ``Evaluator.__init_subclass__`` sets: a
    subclass that declares it again is free, one that only inherits it is not, and an object that is
    no ``Evaluator`` is read from its class's own namespace as before."""

    class Declared(LoopDetection):
        telemetry_free = True

    class Duck:
        name = "duck"
        telemetry_free = True

        def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
            return []

    class Inheriting(Duck):
        pass

    assert telemetry_free(Declared()) and not telemetry_free(_TracedLoopDetection(TracerProvider()))
    assert telemetry_free(Duck()) and not telemetry_free(Inheriting())  # type: ignore[arg-type]
