"""LLM-judge evaluators through any OpenAI-compatible endpoint, with cost control.

    from otel_agent_eval.evaluators.judge import JudgeClient, JudgeSettings, TaskCompletion
    judge = JudgeClient(JudgeSettings.load())          # OTEL_AGENT_EVAL_JUDGE_* variables
    evaluators = [TaskCompletion(judge), ...]

See docs/judge.md. The ``openai`` package (the ``judge`` extra) is imported only
when a ``JudgeClient`` is built.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .base import JudgeEvaluator
from .client import (
    REASONS,
    BudgetExhausted,
    JudgeClient,
    JudgeError,
    JudgeReply,
    suppress_instrumentation,
)
from .evaluators import (
    JUDGE_EVALUATORS,
    AgentMemoryEval,
    PlanQuality,
    PriorTurn,
    ResponseFacts,
    StepFaithfulness,
    TaskCompletion,
    ToolArgumentAccuracy,
    ToolCallNecessity,
    TrajectoryEfficiency,
)
from .metrics import JudgeMetrics
from .qag import Question
from .redaction import Redactor
from .render import JudgeView, render_trace
from .schema_check import check_call, tool_schemas
from .settings import DEFAULT_JUDGE_EVALUATORS, JudgeSettings, ModelPrice


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


__all__ = [
    "DEFAULT_JUDGE_EVALUATORS", "JUDGE_EVALUATORS", "REASONS", "AgentMemoryEval", "BudgetExhausted", "JudgeClient",
    "JudgeError", "JudgeEvaluator", "JudgeMetrics", "JudgeReply", "JudgeSettings", "JudgeView", "ModelPrice",
    "PlanQuality", "PriorTurn", "Question", "Redactor", "ResponseFacts", "StepFaithfulness", "TaskCompletion",
    "ToolArgumentAccuracy", "ToolCallNecessity", "TrajectoryEfficiency", "build_judge_evaluators", "check_call",
    "render_trace", "suppress_instrumentation", "tool_schemas",
]
