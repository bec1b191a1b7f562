"""The judge evaluator base: render the run, ask the judge, turn every judge problem into a result.

Partial runs (``AgentTrace.cut``: agent span missing, spans dropped as the trace
was too large, JSON values cut short by a value length limit): the record says
what is missing (``render.record_notes``), every result's ``details.judged``
says how much was judged (steps and calls out of the total), and an evaluator
whose questions the missing part makes unanswerable is ``skipped`` with reason
``partial_trace`` rather than failed: those that judge the final response
(``needs_final_response``) when it is missing, and any evaluator left with
nothing to ask because steps were cut or not shown in full.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from ...model import AgentTrace, EvalResult
from ..base import Evaluator
from . import qag
from .client import BudgetExhausted, JudgeClient, JudgeError
from .qag import Question
from .render import JudgeView, inline, render_trace

MAX_ITEM_QUESTIONS = 40
"""Per-step, per-call or per-fact questions asked at most, whole items only (the first ones shown); ``answers`` lists what was asked."""


class JudgeEvaluator(Evaluator):
    """Base of judge evaluators: render, ask, parse, score; failures become results."""

    PROMPT_VERSION: ClassVar[str] = "1"
    instructions: ClassVar[str] = ""
    include_steps: ClassVar[bool] = True
    asks_per: ClassVar[str | None] = None
    """``"step"`` or ``"call"`` when the questions are one per step or call (capped at ``MAX_ITEM_QUESTIONS``)."""
    needs_final_response: ClassVar[bool] = False
    """The questions are about the final response: a cut run without one is skipped (``partial_trace``)."""
    default_threshold = 0.75
    needs_judge = True

    def __init__(self, judge: JudgeClient, threshold: float | None = None) -> None:
        super().__init__(threshold)
        self.judge = judge

    def result_key(self) -> str:
        return f"{self.judge.model}|{self.PROMPT_VERSION}"

    # -- what subclasses define -------------------------------------------------
    def applies(self, trace: AgentTrace) -> str | None:
        """Why the evaluator does not apply (a skip explanation), or None."""
        return None

    def context(self, trace: AgentTrace) -> tuple[str, dict[str, Any]]:
        """Extra record text placed before the run (prior turns, expected facts) and what it showed."""
        return "", {}

    def questions(self, trace: AgentTrace, view: JudgeView) -> list[Question]:
        raise NotImplementedError

    def finish(
        self, trace: AgentTrace, questions: list[Question], answers: dict[str, dict[str, str]], details: dict[str, Any]
    ) -> qag.Verdict:
        """The verdict of the answers (override to combine them with deterministic checks)."""
        return qag.verdict(questions, answers)

    def conclude(self, trace: AgentTrace, verdict: qag.Verdict, details: dict[str, Any]) -> EvalResult:
        """The result of a verdict: skipped without enough evidence, else pass only if the expectation was met."""
        details.update(verdict.describe())
        if verdict.insufficient or verdict.score is None:
            return self.skipped(trace, verdict.explanation, details, reason="insufficient_evidence")
        return self.scored(trace, verdict.score, verdict.explanation, details, passed=verdict.passed(self.threshold_for(trace)))

    # -- the flow --------------------------------------------------------------
    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        nothing = {"judged": judged(trace)}
        if not trace.content_captured:
            return [self.skipped(trace, "message content was not captured; nothing to judge", nothing, reason="content_not_captured")]
        reason = self.applies(trace)
        if reason:
            return [self.skipped(trace, reason, nothing)]
        if self.needs_final_response and trace.cut and not (trace.final_output or "").strip():
            return [self.skipped(trace, f"the run was cut before its final response ({cut_reason(trace)}): nothing to judge it on",
                                 nothing, reason="partial_trace")]
        s = self.judge.settings
        extra, extra_details = self.context(trace)
        view = render_trace(
            trace, max_chars=s.max_prompt_chars, max_field_chars=s.max_field_chars, extra=extra, include_steps=self.include_steps,
            redact=self.judge.redactor.redact, items=(self.asks_per, MAX_ITEM_QUESTIONS) if self.asks_per else None,
        )
        details: dict[str, Any] = {
            "prompt_version": self.PROMPT_VERSION, "judge_model": self.judge.model, "judge_view": view.describe(),
            "judged": judged(trace, view, self.asks_per), **extra_details,
        }
        if not view.fits:
            self._count_error("trace_too_large")
            return [self.error(trace, f"trace does not fit the judge budget even aggregated ({view.chars} chars)", "trace_too_large", details)]
        # Questions may quote run data (tool names): kept to one line without the record's delimiter.
        questions = [replace(q, text=inline(q.text)) for q in self.questions(trace, view)]
        if not questions:
            if trace.cut or view.steps_summarized or view.steps_aggregated:
                why = cut_reason(trace) if trace.cut else "steps not shown in full to fit the judge budget"
                return [self.skipped(trace, f"nothing left to ask about: {why}", details, reason="partial_trace")]
            return [self.skipped(trace, "nothing to ask about in the part of the trace shown", details, reason="nothing_to_ask")]
        details["questions"] = [{"id": q.id, "question": q.text, "expected": q.expected} for q in questions]
        try:
            reply = self.judge.ask(
                evaluator=self.name,
                scope=f"{self.name}\x1f{self.version}\x1f{self.PROMPT_VERSION}",
                system=qag.SYSTEM_PROMPT,
                user=qag.user_prompt(self.instructions, view.text, questions),
                schema=qag.answer_schema(questions),
                parse=lambda content: qag.parse_answers(content, questions),
                expected_output_tokens=40 * len(questions),
            )
        except BudgetExhausted as exc:
            return [self.skipped(trace, str(exc), details, reason="budget_exhausted")]
        except JudgeError as exc:
            return [self.error(trace, str(exc), exc.reason, {**details, **exc.details})]
        except Exception as exc:  # noqa: BLE001 - a bug here must not look like a judge verdict, nor escape
            self._count_error("judge_unavailable")
            return [self.error(trace, f"{type(exc).__name__}: {exc}"[:300], "judge_unavailable", details)]
        answers = reply.parsed
        details["answers"] = qag.transcript(questions, answers)
        details.pop("questions")
        details["judge"] = {
            "input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens, "usage_estimated": reply.usage_estimated,
            "cost_usd": reply.cost_usd, "attempts": reply.attempts, "cached": reply.cached,
            "redactions": view.redactions + reply.redactions,
        }
        return [self.conclude(trace, self.finish(trace, questions, answers, details), details)]

    def _count_error(self, reason: str) -> None:
        if self.judge.metrics is not None:
            self.judge.metrics.errors.labels(self.name, reason).inc()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.judge.model!r}, threshold={self.threshold})"


def cut_reason(trace: AgentTrace) -> str:
    """What is missing from a cut run, in words."""
    parts = []
    if trace.partial:
        parts.append("agent span missing")
    if trace.spans_dropped:
        parts.append(f"{trace.spans_dropped} spans dropped as the trace was too large")
    if trace.values_cut_short:
        parts.append(f"{trace.values_cut_short} recorded values cut short")
    return ", ".join(parts)


def judged(trace: AgentTrace, view: JudgeView | None = None, asks_per: str | None = None) -> dict[str, Any]:
    """How much of the run the judge was asked about: steps and calls judged out of the total.

    Steps judged: shown in full or summarized (per-step questions: in full, up to the question
    limit); calls judged: those whose name and arguments are shown (per-call questions: up to
    the limit). Totals are what the run recorded; a cut run (``spans_dropped``,
    ``agent_span_missing``, ``values_cut_short``) had more; ``attributes_dropped`` /
    ``events_dropped``: what the producer's span limits dropped from the run's spans, when any.
    """
    steps = calls = 0
    if view is not None:
        steps = len(view.steps_shown) + len(view.steps_summarized)
        calls = view.items_visible(trace, "call")
        if asks_per == "step":
            steps = min(view.items_visible(trace, "step"), MAX_ITEM_QUESTIONS)
        elif asks_per == "call":
            calls = min(calls, MAX_ITEM_QUESTIONS)
    out: dict[str, Any] = {"steps": steps, "steps_total": len(trace.steps), "calls": calls, "calls_total": len(trace.tool_calls)}
    if trace.partial:
        out["agent_span_missing"] = True
    out.update(trace.losses)
    return out


def shown_steps(trace: AgentTrace, view: JudgeView) -> list[Any]:
    """Steps rendered in full: per-step questions are asked about these only."""
    shown = set(view.steps_shown)
    return [step for step in trace.steps if step.index in shown]


def shown_calls(trace: AgentTrace, view: JudgeView, *, summarized_too: bool = True) -> list[tuple[Any, int, Any]]:
    """(step, position, call) for calls whose name and arguments the judge sees."""
    visible = set(view.steps_shown) | (set(view.steps_summarized) if summarized_too else set())
    return [(step, i, call) for step in trace.steps if step.index in visible for i, call in enumerate(step.tool_calls)]


def item_id(prefix: str, label: str) -> str:
    return f"{prefix}_{label.replace('.', '_')}"
