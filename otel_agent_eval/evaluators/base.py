"""The Evaluator contract: a pure function of an AgentTrace to EvalResults."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, ClassVar

from ..isolation import evaluation_scope, run_evaluator
from ..model import AgentTrace, EvalResult, new_result, result_id
from .view import RunView

if TYPE_CHECKING:
    from .expectations import ToolExpectation


class Evaluator(ABC):
    """Base class for evaluators, built-in and custom.

    Subclasses set ``name`` (snake_case, low cardinality: it becomes a metric
    label) and ``version`` (bump it when scoring changes, so results get new
    ids), and implement ``evaluate``. ``evaluate`` must be a pure function of
    the trace; it may raise: the pipeline turns that into an ``error`` result.
    Build results with ``scored``, ``skipped`` and ``error``. Set
    ``needs_judge`` on evaluators that call an LLM: they run in the pipeline's
    judge stage (its own queue, workers and sample rate), so they never hold
    back the deterministic results.

    ``rules`` (expectation rules, set by the builders) may name a threshold for
    this evaluator: for the runs a rule matches, it overrides ``threshold``.

    ``telemetry_free``, set in a class's own body (it is read there only, never inherited: a
    subclass may do more), says that ``evaluate`` starts no span, writes no log record and reads
    no context, so the isolation ``isolation.py`` gives (a non-recording parent, the thread mark,
    the current run) has nothing to act on: such an evaluator runs without it, which costs more
    than the built-in deterministic evaluators do.
    """

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    default_threshold: ClassVar[float] = 0.5
    needs_judge: ClassVar[bool] = False
    telemetry_free: ClassVar[bool] = False
    rules: Sequence[ToolExpectation] = ()
    _telemetry_free_class: ClassVar[type | None] = None
    """The class itself when its own body declares ``telemetry_free = True`` (``__init_subclass__``): a
    subclass inherits another class, so one attribute read answers ``telemetry_free`` (a read of the
    class's own namespace made a mapping proxy per evaluator per run)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._telemetry_free_class = cls if cls.__dict__.get("telemetry_free") is True else None

    def __init__(self, threshold: float | None = None) -> None:
        self.threshold = self.default_threshold if threshold is None else float(threshold)
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"{self.name}: threshold must be within [0, 1], got {threshold!r}")

    @abstractmethod
    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        """Score one agent trace. Return one result (or more, e.g. one per step)."""

    # -- result builders ------------------------------------------------------
    def threshold_for(self, trace: AgentTrace) -> float:
        """The first matching rule's threshold for this evaluator, else ``threshold``."""
        for rule in self.rules:
            if self.name in rule.thresholds and rule.applies_to(trace):
                return rule.thresholds[self.name]
        return self.threshold

    def scored(
        self, trace: AgentTrace, score: float, explanation: str, details: dict[str, Any] | None = None,
        *, passed: bool | None = None,
    ) -> EvalResult:
        """A pass or fail. By default ``score >= threshold`` passes, the threshold being
        ``threshold_for(trace)`` (a matching rule's, else the evaluator's).

        ``passed`` decides the label when the expectation is more than a share
        (a critical check missed, a forbidden tool called, fails a run whatever its
        score): the score keeps its partial credit for dashboards, the label says
        whether the expectation was met.
        """
        if type(score) is not float:
            score = float(score)
        if not 0.0 < score <= 1.0:  # as min(1, max(0, score)) gives it (0.0 for -0.0 and NaN)
            score = min(1.0, max(0.0, score))
        threshold = self.threshold_for(trace)
        if passed is None:
            passed = score >= threshold
        details = dict(details) if details else {}
        if "threshold" not in details:
            details["threshold"] = threshold
        return self._result(trace, "pass" if passed else "fail", score, explanation, details)

    def skipped(
        self, trace: AgentTrace, explanation: str, details: dict[str, Any] | None = None, *, reason: str = "not_applicable"
    ) -> EvalResult:
        """The evaluator does not apply: neither a pass nor a fail. ``reason`` is a metric label."""
        return self._result(trace, "skipped", None, explanation, {**(details or {}), "reason": reason}, reason)

    def error(self, trace: AgentTrace, explanation: str, reason: str, details: dict[str, Any] | None = None) -> EvalResult:
        """The evaluator could not decide (it raised, timed out, its judge failed). ``reason`` is a metric label."""
        return self._result(trace, "error", None, explanation, {**(details or {}), "reason": reason}, reason)

    def _result(
        self, trace: AgentTrace, label: str, score: float | None, explanation: str, details: dict[str, Any] | None,
        reason: str | None = None,
    ) -> EvalResult:
        trace_id, span_id, name, version = trace.trace_id, trace.agent_span_id, self.name, self.version
        return new_result(
            name, version, score, label, explanation, details if details is not None else {},  # type: ignore[arg-type]
            trace_id, span_id, trace.agent_name, result_id(trace_id, span_id, name, version, self.result_key(), trace.partial),
            reason,
        )

    def result_key(self) -> str:
        """Extra identity for result ids (judge evaluators: model and prompt version)."""
        return ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(threshold={self.threshold})"


def safe_evaluate(evaluator: Evaluator, trace: AgentTrace) -> tuple[list[EvalResult], bool]:
    """Run one evaluator; an exception or a wrong return type becomes an ``error`` result.

    The evaluator runs isolated (``run_evaluator``, see ``isolation.py``), unless it is
    ``telemetry_free``: whatever it calls is neither exported by the app's default sampler nor
    evaluated, and what it leaves attached does not reach the next evaluator.
    Returns the results and whether the evaluator failed (for error counters).
    """
    try:
        if telemetry_free(evaluator):
            results = evaluator.evaluate(trace)
        else:
            results = run_evaluator(evaluator.evaluate, trace, (evaluator.name, trace.trace_id, trace.agent_span_id))
        if not isinstance(results, list):
            raise TypeError(f"{type(evaluator).__name__}.evaluate must return list[EvalResult], got {type(results).__name__}")
        for result in results:  # a loop, not all(): this runs for every evaluator on every trace
            if not isinstance(result, EvalResult):
                raise TypeError(
                    f"{type(evaluator).__name__}.evaluate must return list[EvalResult], got a {type(result).__name__} in it"
                )
        return results, False
    except Exception as exc:  # noqa: BLE001 - an evaluator's failure is its error result, never the host's
        return [evaluator.error(trace, f"{type(exc).__name__}: {exc}"[:500], "exception")], True



def telemetry_free(evaluator: Evaluator) -> bool:
    """Is ``evaluator``'s class one that declares, in its own body, ``telemetry_free = True``?"""
    cls = type(evaluator)
    try:
        return cls._telemetry_free_class is cls
    except AttributeError:  # not an ``Evaluator`` subclass
        return cls.__dict__.get("telemetry_free") is True


def run_scope(evaluators: Sequence[Evaluator]) -> AbstractContextManager[object]:
    """The isolation scope for the evaluators of one run: one ``evaluation_scope`` (entered once per
    run, not once per evaluator), or none when every evaluator is ``telemetry_free``."""
    for evaluator in evaluators:
        if not telemetry_free(evaluator):
            return evaluation_scope()
    return _NO_SCOPE


_NO_SCOPE = nullcontext()
"""``run_scope``'s scope when none is needed: one, reused (it holds nothing)."""


def evaluate_run(evaluators: Sequence[Evaluator], trace: AgentTrace) -> list[EvalResult]:
    """Every evaluator on one agent run, each through ``safe_evaluate``, in one ``run_scope``, as
    the pipeline's workers run them.

    The evaluators share one ``RunView`` of the trace (``view.py``): facts several of them read are
    computed once per run."""
    with RunView(trace), run_scope(evaluators):
        return [result for evaluator in evaluators for result in safe_evaluate(evaluator, trace)[0]]