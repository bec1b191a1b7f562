"""LLM-judge agent evaluators (QAG): yes/no questions, all asked in one call, score = share as expected.

Each evaluator: a snake_case ``name``, a ``version`` (scoring and labels), a
``PROMPT_VERSION`` (wording; bump it with any change to the questions or
instructions: results get new ids and the cache does not serve old answers),
``instructions``, ``questions(trace, view)`` (some marked critical) and a
``default_threshold`` whose reason is written in docs/judge.md. The label
is pass only when no critical question is missed and the share of known
answers reaches the threshold; when the judge answers ``unknown`` to every
question, or every critical one, the result is ``skipped``
(``insufficient_evidence``). The base class renders the
trace by the large-trace rule (``render.py``), asks the judge, and turns
every judge problem into a result: ``skipped`` with ``reason:
budget_exhausted`` when the hourly budget is spent, ``error`` with a reason
otherwise. It never raises for judge problems.

The base class and what a partial run means for the judge: ``base.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...model import AgentTrace, EvalResult
from . import qag
from .base import (
    MAX_ITEM_QUESTIONS,
    JudgeEvaluator,
    item_id,
    judged,
    shown_calls,
    shown_steps,
)
from .client import JudgeClient
from .qag import Question
from .render import JudgeView, RecordFields, call_label, encode_name
from .schema_check import check_call, tool_schemas


class TaskCompletion(JudgeEvaluator):
    """Did the final output do what the user asked (and, negated: did the agent fail or error)?

    With a ``reference`` (a dataset case's ``expected_output``) the record shows it and one
    more question asks whether the response agrees with it; without one the prompt is unchanged.
    """

    name = "task_completion"
    version = "2"
    PROMPT_VERSION = "task_completion.v2"
    default_threshold = 0.75
    instructions = "Judge whether the agent completed the user's task."
    needs_final_response = True

    def __init__(self, judge: JudgeClient, threshold: float | None = None, *, reference: str | None = None) -> None:
        super().__init__(judge, threshold)
        self.reference = reference or None

    def result_key(self) -> str:
        """A run judged against a reference is a different result from one judged without."""
        return super().result_key() + ("|reference" if self.reference is not None else "")

    def applies(self, trace: AgentTrace) -> str | None:
        if not trace.input and not trace.final_output and not trace.cut:
            return "neither the task nor a final response was recorded"
        return None

    def context(self, trace: AgentTrace) -> tuple[str, dict[str, Any]]:
        if self.reference is None:
            return "", {}
        fields = RecordFields(self.judge.settings.max_field_chars, self.judge.redactor.redact)
        return (f"REFERENCE ANSWER (what a correct final response says; any wording is fine):\n  {fields(self.reference)}",
                {"reference_shown": True})

    def questions(self, trace: AgentTrace, view: JudgeView) -> list[Question]:
        questions = [
            Question("addresses_request", "Does the final response address what the user asked for?", "yes"),
            Question("task_completed", "Did the agent fully accomplish the task, rather than partially, or only promising or describing it?",
                     "yes", critical=True),
            Question("supported_by_steps", "Are the results the final response reports supported by the tool results shown (not claimed without evidence)?", "yes"),
            Question("agent_failed", "Did the agent fail, give up, or end with an error instead of completing the task?", "no", critical=True),
        ]
        if self.reference is not None:
            questions.append(Question("agrees_with_reference", "Does the final response agree with the REFERENCE ANSWER "
                                      "(the same result, in any wording, without contradicting it)?", "yes", critical=True))
        return questions


class PlanQuality(JudgeEvaluator):
    """Addresses the task, logical order, no redundant steps, each step follows, expert-level efficiency."""

    name = "plan_quality"
    version = "2"
    PROMPT_VERSION = "plan_quality.v2"
    default_threshold = 0.8
    instructions = "Judge the quality of the plan the agent followed: the sequence of its steps and tool calls."

    def applies(self, trace: AgentTrace) -> str | None:
        return None if trace.steps else "no LLM turn recorded"

    def questions(self, trace: AgentTrace, view: JudgeView) -> list[Question]:
        return [
            Question("addresses_task", "Does the sequence of steps address the user's task?", "yes", critical=True),
            Question("logical_order", "Are the steps in a logical order?", "yes"),
            Question("redundant_steps", "Does the plan contain redundant or unnecessary steps?", "no"),
            Question("steps_follow", "Does each step follow from the user's task and the results of the steps before it "
                                     "(the first step from the task alone)?", "yes"),
            Question("expert_efficient", "Is the plan about as efficient as an expert would make it?", "yes"),
        ]


class StepFaithfulness(JudgeEvaluator):
    """Each step follows from the task and prior steps, without contradiction or invented facts.

    Three questions per step, one condition each; a step contradicting a tool
    result or an earlier step is critical.
    """

    name = "step_faithfulness"
    version = "2"
    PROMPT_VERSION = "step_faithfulness.v2"
    default_threshold = 0.8
    instructions = (
        "Judge each step shown in full on its own: does it follow from the user's task and from what the earlier "
        "steps and tool results established, without contradicting them and without inventing facts?"
    )
    asks_per = "step"

    def applies(self, trace: AgentTrace) -> str | None:
        return None if trace.steps else "no LLM turn recorded"

    def questions(self, trace: AgentTrace, view: JudgeView) -> list[Question]:
        questions: list[Question] = []
        for step in shown_steps(trace, view)[: MAX_ITEM_QUESTIONS // 3]:
            n = step.index
            questions += [
                Question(f"step_{n}_follows", f"Does STEP {n} follow from the user's task and from what the earlier steps and "
                         "tool results established (for the first step: from the task alone)?", "yes"),
                Question(f"step_{n}_contradicts", f"Does STEP {n} contradict a tool result or an earlier step shown in the record "
                         "(for example, state a value different from the one a tool returned)?", "no", critical=True),
                Question(f"step_{n}_invents", f"Does STEP {n} state a fact found in neither the task, the tool results nor the "
                         "earlier steps?", "no"),
            ]
        return questions


class ToolArgumentAccuracy(JudgeEvaluator):
    """Arguments appropriate for the tool and the task; plus a JSON-schema check when tool definitions are known.

    Two questions per call: appropriate with no invented value, and (critical)
    an argument contradicting the task, an earlier result or the tool's
    definition. The judge is shown the definitions (``context``); a call whose
    arguments fail the schema check counts as contradicting its definition,
    whatever the judge answered. Definitions come from ``tool_definitions``
    (static) or the trace's ``tool_definitions`` (from ``gen_ai.tool.definitions``).
    """

    name = "tool_argument_accuracy"
    version = "2"
    PROMPT_VERSION = "tool_argument_accuracy.v2"
    default_threshold = 0.8
    asks_per = "call"
    instructions = (
        "Judge the arguments of each tool call: are they appropriate for the tool and the task, with values taken "
        "from the task or from earlier results rather than invented, and consistent with the tool's definition when "
        "TOOL DEFINITIONS shows it?"
    )

    def __init__(self, judge: JudgeClient, threshold: float | None = None, tool_definitions: Sequence[Any] | None = None) -> None:
        super().__init__(judge, threshold)
        self.tool_definitions = tool_definitions

    def applies(self, trace: AgentTrace) -> str | None:
        return None if trace.tool_calls else "no tool call"

    def _schemas(self, trace: AgentTrace) -> dict[str, dict[str, Any]]:
        return tool_schemas(self.tool_definitions if self.tool_definitions is not None else trace.tool_definitions)

    def context(self, trace: AgentTrace) -> tuple[str, dict[str, Any]]:
        """The tools' definitions, so appropriateness is judged against them (at most a quarter of the prompt budget)."""
        schemas = self._schemas(trace)
        if not schemas:
            return "", {"tool_definitions_shown": []}
        s = self.judge.settings
        fields = RecordFields(s.max_field_chars, self.judge.redactor.redact)  # definitions are data too: encoded
        budget, used, lines = s.max_prompt_chars // 4, 0, []
        for name, params in schemas.items():
            line = f"- {encode_name(name)}: parameters {fields(json.dumps(params, sort_keys=True, default=str))}"
            if used + len(line) > budget and lines:
                break
            lines.append(line)
            used += len(line)
        shown = list(schemas)[: len(lines)]
        header = "TOOL DEFINITIONS (the tools offered to the agent, with their parameters' JSON schemas):"
        return "\n".join([header, *lines]), {"tool_definitions_shown": shown}

    def questions(self, trace: AgentTrace, view: JudgeView) -> list[Question]:
        questions: list[Question] = []
        for step, i, call in shown_calls(trace, view)[: MAX_ITEM_QUESTIONS // 2]:
            label, qid = call_label(step, i), item_id("call", call_label(step, i))
            questions += [
                Question(qid, f"Are the arguments of tool call {label} ({call.name}) appropriate for the tool and the task, "
                         "with no invented values?", "yes"),
                Question(f"{qid}_conflicts", f"Does an argument of tool call {label} ({call.name}) contradict the user's task, "
                         "an earlier tool result, or the tool's definition in TOOL DEFINITIONS?", "no", critical=True),
            ]
        return questions

    def finish(self, trace, questions, answers, details):  # type: ignore[no-untyped-def]
        schemas = self._schemas(trace)
        if not schemas:
            details["schema_check"] = "no tool definitions in the trace"
            return super().finish(trace, questions, answers, details)
        by_id = {item_id("call", call_label(step, i)): call for step in trace.steps for i, call in enumerate(step.tool_calls)}
        problems = {q.id: check_call(schemas, by_id[q.id]) for q in questions if q.id in by_id}
        details["schema_check"] = {qid: found for qid, found in problems.items() if found} or "all arguments valid"
        # A schema violation is a contradiction of the tool's definition, whatever the judge said.
        answers = {**answers, **{
            f"{qid}_conflicts": {"answer": "yes", "reason": f"schema check: {found[0]}"[:300],
                                 "judge_answer": answers[f"{qid}_conflicts"]["answer"]}
            for qid, found in problems.items() if found
        }}
        details["answers"] = qag.transcript(questions, answers)
        return super().finish(trace, questions, answers, details)


class ToolCallNecessity(JudgeEvaluator):
    """Each call necessary, not redundant given the results of earlier calls."""

    name = "tool_call_necessity"
    version = "2"
    PROMPT_VERSION = "tool_call_necessity.v2"
    default_threshold = 0.8
    asks_per = "call"
    instructions = "Judge whether each tool call was needed for the task, given what earlier calls had already returned."

    def applies(self, trace: AgentTrace) -> str | None:
        return None if trace.tool_calls else "no tool call"

    def questions(self, trace: AgentTrace, view: JudgeView) -> list[Question]:
        return [
            Question(item_id("call", call_label(step, i)),
                     f"Was tool call {call_label(step, i)} ({call.name}) necessary for the task, and not redundant given the results of earlier calls?",
                     "yes")
            for step, i, call in shown_calls(trace, view)[:MAX_ITEM_QUESTIONS]
        ]


class TrajectoryEfficiency(JudgeEvaluator):
    """No detours or repeats, a length proportionate to the task, recovery from (structured) tool errors."""

    name = "trajectory_efficiency"
    version = "2"
    PROMPT_VERSION = "trajectory_efficiency.v2"
    default_threshold = 0.66
    instructions = "Judge the agent's trajectory: the path of steps and tool calls it took to reach its final response."

    def applies(self, trace: AgentTrace) -> str | None:
        return None if trace.steps else "no LLM turn recorded"

    def questions(self, trace: AgentTrace, view: JudgeView) -> list[Question]:
        questions = [
            Question("detours", "Did the agent take detours: steps or calls that did not move it toward the goal?", "no"),
            Question("repeats", "Did the agent repeat a step or tool call whose result it already had?", "no"),
            Question("proportionate", "Is the number of steps proportionate to the difficulty of the task?", "yes"),
        ]
        # Failures come from ToolCall.error (structured), never from matching "error" in the text.
        failed = [(step, i, call) for step, i, call in shown_calls(trace, view) if call.failed]
        questions += [
            Question(item_id("recovered", call_label(step, i)),
                     f"After tool call {call_label(step, i)} ({call.name}) failed with the ERROR shown, did the agent handle it well: "
                     "retry with corrected input, use an alternative, or report the failure honestly, rather than ignore it?",
                     "yes", critical=True)
            for step, i, call in failed[:MAX_ITEM_QUESTIONS]
        ]
        return questions


@dataclass(frozen=True)
class PriorTurn:
    """One earlier turn of the same conversation: what the user said and what the agent answered."""

    input: str | None
    output: str | None


History = Callable[[AgentTrace], Sequence[PriorTurn]]


class AgentMemoryEval(JudgeEvaluator):
    """Uses the prior turns of the same conversation correctly, with no invented or stale facts.

    Prior turns come from the trace's ``prior_turns`` (stitched by conversation
    id, see ``conversations.py``), or ``history(trace)``, or
    ``evaluate_with_history``. Without prior
    turns the evaluator is skipped. The most recent turns that fit a third of
    the prompt budget are shown; ``prior_turns_shown`` / ``prior_turns_total``
    say how many.
    """

    name = "agent_memory"
    version = "2"
    PROMPT_VERSION = "agent_memory.v2"
    default_threshold = 0.75
    needs_final_response = True
    instructions = (
        "The CONVERSATION SO FAR shows earlier turns of the same conversation, oldest first. Judge whether the agent "
        "in the current run uses what was said there correctly."
    )

    def __init__(self, judge: JudgeClient, threshold: float | None = None, history: History | None = None) -> None:
        super().__init__(judge, threshold)
        self.history = history

    def evaluate_with_history(self, trace: AgentTrace, turns: Sequence[PriorTurn]) -> list[EvalResult]:
        return AgentMemoryEval(self.judge, self.threshold, history=lambda _: turns).evaluate(trace)

    def _turns(self, trace: AgentTrace) -> Sequence[PriorTurn]:
        if self.history is not None:
            return list(self.history(trace))
        return [PriorTurn(turn.input, turn.final_output) for turn in trace.prior_turns]

    def applies(self, trace: AgentTrace) -> str | None:
        if not self._turns(trace):
            return "no prior turns of this conversation available"
        return None if trace.final_output or trace.cut else "no final response"

    def context(self, trace: AgentTrace) -> tuple[str, dict[str, Any]]:
        turns = self._turns(trace)
        s = self.judge.settings
        budget = s.max_prompt_chars // 3
        fields = RecordFields(s.max_field_chars, self.judge.redactor.redact)
        rendered: list[str] = []
        used = 0
        for number in range(len(turns) - 1, -1, -1):
            turn = turns[number]
            text = f"TURN {number + 1}:\n  user: {fields(turn.input) or '(none)'}\n  agent: {fields(turn.output) or '(none)'}"
            if used + len(text) > budget and rendered:
                break
            rendered.insert(0, text)
            used += len(text)
        shown = {"prior_turns_total": len(turns), "prior_turns_shown": len(rendered), "prior_turns_redactions": fields.redactions}
        return "CONVERSATION SO FAR:\n" + "\n".join(rendered) + "\n\nCURRENT RUN:", shown

    def questions(self, trace: AgentTrace, view: JudgeView) -> list[Question]:
        return [
            Question("uses_prior", "Does the agent use the information from earlier turns that is relevant to the current request "
                     "correctly? (Answer unknown if nothing said earlier is relevant to it.)", "yes"),
            Question("contradicts_prior", "Does the agent contradict facts established in earlier turns?", "no", critical=True),
            Question("invented_memory", "Does the agent claim something was said or done earlier that the earlier turns do not show?", "no"),
            Question("stale_facts", "Does the agent rely on information from earlier turns that was later corrected or superseded?", "no"),
        ]


FactsFor = Callable[[AgentTrace], Sequence[str] | None]


class ResponseFacts(JudgeEvaluator):
    """The final output contains the expected facts (offline datasets): one question per fact.

    Facts are ``facts`` (the same for every trace) or ``facts_for(trace)``
    (e.g. looked up by ``trace.input`` or trace id in a dataset). No facts:
    skipped. No final output: score 0 without asking the judge (a cut run without one:
    skipped, ``partial_trace``).
    """

    name = "response_facts"
    version = "2"
    PROMPT_VERSION = "response_facts.v2"
    default_threshold = 1.0
    instructions = "Judge only the FINAL RESPONSE: does it state each expected fact (in any wording)?"
    include_steps = False
    needs_final_response = True

    def __init__(
        self, judge: JudgeClient, threshold: float | None = None, *,
        facts: Sequence[str] | None = None, facts_for: FactsFor | Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        super().__init__(judge, threshold)
        self.facts = list(facts or [])
        self.facts_for = facts_for

    def expected(self, trace: AgentTrace) -> list[str]:
        if callable(self.facts_for):
            return list(self.facts_for(trace) or [])
        if isinstance(self.facts_for, Mapping):
            return list(self.facts_for.get(trace.trace_id, self.facts_for.get(trace.input or "", [])) or [])
        return self.facts

    def applies(self, trace: AgentTrace) -> str | None:
        return None if self.expected(trace) else "no expected facts for this trace"

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        facts = self.expected(trace)
        if facts and trace.content_captured and not trace.cut and not (trace.final_output or "").strip():
            return [self.scored(trace, 0.0, "no final response: none of the expected facts stated",
                                {"facts": facts, "prompt_version": self.PROMPT_VERSION, "judge_model": self.judge.model,
                                 "judged": judged(trace)})]
        return super().evaluate(trace)

    def questions(self, trace: AgentTrace, view: JudgeView) -> list[Question]:
        return [
            Question(f"fact_{n}", f"Does the final response state (or clearly imply) this fact, without contradicting it: {fact!r}?",
                     "yes", critical=True)
            for n, fact in enumerate(self.expected(trace)[:MAX_ITEM_QUESTIONS], start=1)
        ]


JUDGE_EVALUATORS: dict[str, type[JudgeEvaluator]] = {
    cls.name: cls
    for cls in (TaskCompletion, PlanQuality, StepFaithfulness, ToolArgumentAccuracy, ToolCallNecessity,
                TrajectoryEfficiency, AgentMemoryEval, ResponseFacts)
}


def build_judge_evaluators(
    judge: JudgeClient, names: Iterable[str], *, thresholds: Mapping[str, float] | None = None, **options: Any
) -> list[JudgeEvaluator]:
    """Instantiate judge evaluators by name, sharing one client (budget, cache, concurrency).

    ``thresholds``: evaluator name -> threshold (unnamed ones keep their default).

    ``options`` go to the evaluators that accept them: ``tool_definitions``
    (tool_argument_accuracy), ``history`` (agent_memory), ``facts`` /
    ``facts_for`` (response_facts), ``reference`` (task_completion: an expected output).
    """
    accepted = {
        "tool_argument_accuracy": ("tool_definitions",),
        "agent_memory": ("history",),
        "response_facts": ("facts", "facts_for"),
        "task_completion": ("reference",),
    }
    built: list[JudgeEvaluator] = []
    for name in names:
        if name not in JUDGE_EVALUATORS:
            raise ValueError(f"unknown judge evaluator {name!r}; allowed: {', '.join(sorted(JUDGE_EVALUATORS))}")
        kwargs = {k: v for k, v in options.items() if k in accepted.get(name, ())}
        built.append(JUDGE_EVALUATORS[name](judge, (thresholds or {}).get(name), **kwargs))
    return built
