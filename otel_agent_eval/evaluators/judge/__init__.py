"""LLM-judge evaluators through any OpenAI-compatible endpoint, with cost control.

    from otel_agent_eval.evaluators.judge import JudgeClient, JudgeSettings, TaskCompletion
    judge = JudgeClient(JudgeSettings.load())          # OTEL_AGENT_EVAL_JUDGE_* variables
    evaluators = [TaskCompletion(judge), ...]

See docs/judge.md. The ``openai`` package (the ``judge`` extra) is imported only
when a ``JudgeClient`` is built. The public names are imported on first use (PEP 562):
every command asks ``JudgeSettings`` whether a judge is configured, and most runs have
none, so the client, the evaluators and their Prometheus metrics are not imported for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...lazy import lazy_names

if TYPE_CHECKING:
    from .base import JudgeEvaluator
    from .client import REASONS, BudgetExhausted, JudgeClient, JudgeError, JudgeReply, suppress_instrumentation
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
        build_judge_evaluators,
    )
    from .metrics import JudgeMetrics
    from .qag import Question
    from .redaction import Redactor
    from .render import JudgeView, render_trace
    from .schema_check import check_call, tool_schemas
    from .settings import DEFAULT_JUDGE_EVALUATORS, JudgeSettings, ModelPrice

_WHERE = {
    ".base": ("JudgeEvaluator",),
    ".client": ("REASONS", "BudgetExhausted", "JudgeClient", "JudgeError", "JudgeReply", "suppress_instrumentation"),
    ".evaluators": ("JUDGE_EVALUATORS", "AgentMemoryEval", "PlanQuality", "PriorTurn", "ResponseFacts", "StepFaithfulness",
                    "TaskCompletion", "ToolArgumentAccuracy", "ToolCallNecessity", "TrajectoryEfficiency",
                    "build_judge_evaluators"),
    ".metrics": ("JudgeMetrics",),
    ".qag": ("Question",),
    ".redaction": ("Redactor",),
    ".render": ("JudgeView", "render_trace"),
    ".schema_check": ("check_call", "tool_schemas"),
    ".settings": ("DEFAULT_JUDGE_EVALUATORS", "JudgeSettings", "ModelPrice"),
}


__getattr__, __dir__ = lazy_names(__name__, globals(), _WHERE)


__all__ = [
    "DEFAULT_JUDGE_EVALUATORS", "JUDGE_EVALUATORS", "REASONS", "AgentMemoryEval", "BudgetExhausted", "JudgeClient",
    "JudgeError", "JudgeEvaluator", "JudgeMetrics", "JudgeReply", "JudgeSettings", "JudgeView", "ModelPrice",
    "PlanQuality", "PriorTurn", "Question", "Redactor", "ResponseFacts", "StepFaithfulness", "TaskCompletion",
    "ToolArgumentAccuracy", "ToolCallNecessity", "TrajectoryEfficiency", "build_judge_evaluators", "check_call",
    "render_trace", "suppress_instrumentation", "tool_schemas",
]
