"""Datasets and experiments (``core.py``) and the statistics behind their gates (``stats_ci.py``).

``from otel_agent_eval.experiments import Case, run_experiment`` is the public path.
"""

from .core import (
    Case,
    CaseResult,
    EvaluatorSummary,
    ExperimentReport,
    case_evaluators,
    compare,
    failed_gates,
    load_dataset,
    print_text,
    run_case,
    run_experiment,
)

__all__ = [
    "Case", "CaseResult", "EvaluatorSummary", "ExperimentReport", "case_evaluators", "compare", "failed_gates",
    "load_dataset", "print_text", "run_case", "run_experiment",
]
