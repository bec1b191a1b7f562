"""Datasets and experiments: run an agent over a dataset of cases, evaluate every run, report pass
rates with Wilson confidence intervals, compare with a saved run, gate CI on the result.

A dataset is a JSON-lines file of cases: ``id``, ``input``, optional ``metadata`` and
``expected_output``, and the fields of an expectation rule (``expected_tools``,
``require_order``, ``forbidden_tools``, ...; multivon's ``expected_tool_calls`` is an
alias of ``expected_tools``). ``run_experiment`` calls ``task(case)`` for each case under
a context of its own: whatever the task emits as OpenTelemetry spans (any instrumented
framework, or ``otel_agent_eval.manual``) through the tracer provider is captured per case
and assembled into agent runs, which the evaluators score with that case's expectations.
Spans the task emits on threads that do not carry its context are not captured.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..assembly import assemble
from ..evaluators.base import Evaluator, evaluate_run
from ..evaluators.tool_calls import ToolExpectation
from ..model import LABELS, EvalResult
from ..pipeline.completion import flatten
from ..records import OWN_SCOPE, from_readable_span
from .stats_ci import Gate, Interval, two_proportion_test, wilson_interval

CASE_ID_KEY = "experiment.case_id"
"""``AgentTrace.metadata`` key naming the case a run belongs to."""


class Case(BaseModel):
    """One dataset case: an input, and what is expected of the agent's run on it."""

    model_config = ConfigDict(extra="allow")
    id: str
    input: Any
    metadata: dict[str, Any] = Field(default_factory=dict)
    expected_output: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if isinstance(data, dict) and "expected_tool_calls" in data:
            data = dict(data)
            if "expected_tools" in data:
                raise ValueError("give expected_tools or expected_tool_calls (its alias), not both")
            data["expected_tools"] = data.pop("expected_tool_calls")
        if isinstance(data, dict) and "id" in data:
            data = {**data, "id": str(data["id"])}
        return data

    def expectation(self) -> ToolExpectation | None:
        """The case's expectation rule (any agent of the case's run), or None when it sets none."""
        fields = dict(self.model_extra or {})
        if not fields:
            return None
        return ToolExpectation.model_validate({"agent": "*", **fields})


def load_dataset(path: str | Path) -> list[Case]:
    """Read a JSON-lines dataset; errors name the file and line."""
    cases: list[Case] = []
    seen: set[str] = set()
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            case = Case.model_validate(json.loads(line))
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: not a valid case: {exc}") from None
        if case.id in seen:
            raise ValueError(f"{path}:{number}: duplicate case id {case.id!r}")
        seen.add(case.id)
        cases.append(case)
    if not cases:
        raise ValueError(f"{path}: no cases")
    return cases


# --- capture ----------------------------------------------------------------------------------------


class _CaseCapture(SpanProcessor):
    """Collects the spans of registered trace ids (one per running case); ignores everything else."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: dict[int, list[ReadableSpan]] = {}

    def open(self, trace_id: int) -> None:
        with self._lock:
            self._spans[trace_id] = []

    def close(self, trace_id: int) -> list[ReadableSpan]:
        with self._lock:
            return self._spans.pop(trace_id, [])

    def on_end(self, span: ReadableSpan) -> None:
        bucket = self._spans.get(span.context.trace_id)
        if bucket is not None:
            bucket.append(span)


_captures: weakref.WeakKeyDictionary[Any, _CaseCapture] = weakref.WeakKeyDictionary()
_captures_lock = threading.Lock()


def _capture_for(provider: TracerProvider | None) -> _CaseCapture:
    """One capture processor per tracer provider (the global one, made an SDK provider if unset)."""
    if provider is None:
        provider = trace.get_tracer_provider()  # type: ignore[assignment]
        if not isinstance(provider, TracerProvider):
            trace.set_tracer_provider(TracerProvider())
            provider = trace.get_tracer_provider()  # type: ignore[assignment]
        if not isinstance(provider, TracerProvider):
            raise RuntimeError("the global tracer provider is not an OpenTelemetry SDK TracerProvider; pass tracer_provider=")
    with _captures_lock:
        capture = _captures.get(provider)
        if capture is None:
            capture = _captures[provider] = _CaseCapture()
            provider.add_span_processor(capture)
    return capture


# --- results ----------------------------------------------------------------------------------------


@dataclass
class CaseResult:
    case_id: str
    runs: int
    results: list[EvalResult]
    output: Any = None
    task_error: str | None = None
    seconds: float = 0.0

    @property
    def no_agent_run(self) -> bool:
        return self.task_error is None and self.runs == 0


@dataclass
class EvaluatorSummary:
    evaluator: str
    counts: dict[str, int]

    @property
    def judged(self) -> int:
        """Results that count towards the pass rate: pass and fail (skipped and error do not)."""
        return self.counts["pass"] + self.counts["fail"]

    @property
    def pass_rate(self) -> float | None:
        return self.counts["pass"] / self.judged if self.judged else None

    @property
    def interval(self) -> Interval | None:
        return wilson_interval(self.counts["pass"], self.judged)


@dataclass
class ExperimentReport:
    cases: list[CaseResult]
    summaries: dict[str, EvaluatorSummary] = field(default_factory=dict)

    @classmethod
    def of(cls, cases: list[CaseResult]) -> ExperimentReport:
        summaries: dict[str, EvaluatorSummary] = {}
        for case in cases:
            for result in case.results:
                summary = summaries.setdefault(result.evaluator, EvaluatorSummary(result.evaluator, dict.fromkeys(LABELS, 0)))
                summary.counts[result.label] += 1
        return cls(cases, dict(sorted(summaries.items())))

    def to_json(self) -> dict[str, Any]:
        evaluators = {}
        for name, s in self.summaries.items():
            interval = s.interval
            evaluators[name] = {
                "counts": s.counts, "judged": s.judged, "pass_rate": s.pass_rate,
                "ci95": None if interval is None else [interval.low, interval.high],
            }
        return {
            "evaluators": evaluators,
            "cases": [
                {"id": c.case_id, "runs": c.runs, "no_agent_run": c.no_agent_run, "task_error": c.task_error,
                 "seconds": round(c.seconds, 3), "output": c.output if isinstance(c.output, (str, int, float, bool, type(None))) else repr(c.output),
                 "labels": {r.evaluator: r.label for r in c.results},
                 "results": [r.model_dump(mode="json") for r in c.results]}
                for c in self.cases
            ],
        }


# --- the run ---------------------------------------------------------------------------------------

EvaluatorsFor = Callable[[Case], Sequence[Evaluator]]


def _case_context() -> tuple[Any, int]:
    """A context whose parent is a remote, sampled span of a fresh trace: the case's spans share its id."""
    rng = random.SystemRandom()
    trace_id = rng.getrandbits(128) or 1
    parent = NonRecordingSpan(SpanContext(trace_id=trace_id, span_id=rng.getrandbits(64) or 1, is_remote=True,
                                          trace_flags=TraceFlags(TraceFlags.SAMPLED)))
    return trace.set_span_in_context(parent, otel_context.Context()), trace_id


def _final_output(output: Any) -> str | None:
    if output is None:
        return None
    return output if isinstance(output, str) else json.dumps(output, default=str)


def run_case(case: Case, task: Callable[[Case], Any], evaluators: Sequence[Evaluator], capture: _CaseCapture) -> CaseResult:
    """Run one case under its own trace, assemble what it emitted, evaluate every run."""
    ctx, trace_id = _case_context()
    capture.open(trace_id)
    started = time.perf_counter()
    output, task_error = None, None
    token = otel_context.attach(ctx)
    try:
        output = task(case)
    except Exception as exc:  # noqa: BLE001 - the case fails, the experiment goes on
        task_error = f"{type(exc).__name__}: {exc}"[:500]
    finally:
        otel_context.detach(token)
        spans = capture.close(trace_id)
    seconds = time.perf_counter() - started
    records = [from_readable_span(s) for s in spans if s.instrumentation_scope is None or s.instrumentation_scope.name != OWN_SCOPE]
    runs = flatten(assemble(records))
    results: list[EvalResult] = []
    for run in runs:
        run = run.model_copy(update={"metadata": {**run.metadata, CASE_ID_KEY: case.id}})
        if run.final_output is None and run.parent_step_index is None:
            run = run.model_copy(update={"final_output": _final_output(output)})
        results.extend(evaluate_run(evaluators, run))
    return CaseResult(case.id, len(runs), results, output, task_error, seconds)


def case_evaluators(factory: Any) -> EvaluatorsFor:
    """Each case's evaluators from an ``EvaluatorFactory`` (``evaluators.configure_evaluators``):
    the case's own expectation rule first, its ``expected_output`` as task_completion's reference."""

    def evaluators_for(case: Case) -> Sequence[Evaluator]:
        rule = case.expectation()
        return factory.build([rule] if rule else [], reference=case.expected_output)  # type: ignore[no-any-return]

    return evaluators_for


def run_experiment(
    dataset: Sequence[Case] | str | Path,
    task: Callable[[Case], Any],
    evaluators: EvaluatorsFor | Sequence[str],
    *,
    concurrency: int = 1,
    tracer_provider: TracerProvider | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ExperimentReport:
    """Run ``task`` over every case (``concurrency`` at a time) and evaluate each case's runs.

    ``evaluators``: names (any evaluator name or spec, built per case with the case's expectations,
    judge ones through the configured judge) or a function ``case -> evaluators``. Spans are captured
    from ``tracer_provider`` (default: the global one).
    """
    if not callable(evaluators):
        from ..config import Settings
        from ..pipeline.build import evaluation

        built = evaluation(Settings.load(evaluators=tuple(evaluators)))
        try:
            return run_experiment(dataset, task, case_evaluators(built.factory), concurrency=concurrency,
                                  tracer_provider=tracer_provider, progress=progress)
        finally:
            built.close()
    evaluators_for = evaluators
    cases = load_dataset(dataset) if isinstance(dataset, (str, Path)) else list(dataset)
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    capture = _capture_for(tracer_provider)
    done = 0
    lock = threading.Lock()

    def one(case: Case) -> CaseResult:
        nonlocal done
        result = run_case(case, task, evaluators_for(case), capture)
        with lock:
            done += 1
            if progress is not None:
                progress(done, len(cases))
        return result

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="otel-agent-eval-experiment") as pool:
        results = list(pool.map(one, cases))
    return ExperimentReport.of(results)


# --- comparison, gates, output -------------------------------------------------------------------


def compare(baseline: dict[str, Any], report: ExperimentReport) -> dict[str, Any]:
    """Per evaluator: pass rate now vs the saved run, the difference and its two-proportion test;
    and the cases whose label flipped."""
    evaluators = {}
    for name, summary in report.summaries.items():
        before = baseline.get("evaluators", {}).get(name)
        if before is None:
            continue
        test = two_proportion_test(before["counts"]["pass"], before["judged"], summary.counts["pass"], summary.judged)
        evaluators[name] = {
            "baseline_pass_rate": before["pass_rate"], "pass_rate": summary.pass_rate,
            "difference": None if test is None else test.difference,
            "z": None if test is None else test.z, "p_value": None if test is None else test.p_value,
        }
    before_labels = {c["id"]: c.get("labels", {}) for c in baseline.get("cases", [])}
    flipped = []
    for case in report.cases:
        old = before_labels.get(case.case_id, {})
        for result in case.results:
            was = old.get(result.evaluator)
            if was is not None and was != result.label:
                flipped.append({"case": case.case_id, "evaluator": result.evaluator, "before": was, "after": result.label})
    return {"evaluators": evaluators, "flipped": flipped}


def failed_gates(report: ExperimentReport, gates: Sequence[Gate]) -> list[str]:
    """Human-readable failures of the gates (``--gate``, ``--gate-lower-bound``)."""
    failures = []
    for gate in gates:
        summary = report.summaries.get(gate.evaluator)
        failure = gate.failure(summary.counts["pass"], summary.judged) if summary else gate.failure(0, 0)
        if failure:
            failures.append(failure)
    return failures


def print_text(report: ExperimentReport, out: TextIO, comparison: dict[str, Any] | None = None) -> None:
    no_run = [c.case_id for c in report.cases if c.no_agent_run]
    errors = [c for c in report.cases if c.task_error]
    out.write(f"{len(report.cases)} cases, {sum(c.runs for c in report.cases)} agent runs\n")
    out.write(f"{'evaluator':<26} {'pass rate':>9} {'95% CI':>15} {'pass':>5} {'fail':>5} {'skip':>5} {'error':>5}\n")
    for name, s in report.summaries.items():
        rate = "-" if s.pass_rate is None else f"{s.pass_rate:.1%}"
        ci = "-" if s.interval is None else f"[{s.interval.low:.1%}, {s.interval.high:.1%}]"
        c = s.counts
        out.write(f"{name:<26} {rate:>9} {ci:>15} {c['pass']:>5} {c['fail']:>5} {c['skipped']:>5} {c['error']:>5}\n")
    if comparison:
        for name, diff in comparison["evaluators"].items():
            if diff["difference"] is not None:
                out.write(f"  vs baseline {name}: {diff['difference']:+.1%} (p={diff['p_value']:.3f})\n")
        out.writelines(f"  flipped: case {flip['case']} {flip['evaluator']}: {flip['before']} -> {flip['after']}\n"
                       for flip in comparison["flipped"])
    for case in report.cases:
        for r in case.results:
            if r.label in ("fail", "error"):
                out.write(f"  case {case.case_id}: {r.evaluator} {r.label}: {r.explanation[:100]}\n")
    if no_run:
        out.write(f"no agent run recorded for case(s): {', '.join(no_run)}\n")
    for case in errors:
        out.write(f"task failed for case {case.case_id}: {case.task_error}\n")


def progress_bar(stream: TextIO = sys.stderr) -> Callable[[int, int], None] | None:
    """A one-line progress bar on a terminal; None when the stream is not one."""
    if not stream.isatty():
        return None

    def show(done: int, total: int) -> None:
        filled = int(30 * done / total) if total else 30
        stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{total}")
        if done == total:
            stream.write("\n")
        stream.flush()

    return show
