"""otel-agent-eval: online evaluation of LLM agents through OpenTelemetry.

The public names are imported on first use (PEP 562): ``python -m otel_agent_eval evaluate``
imports this package but needs neither the processor nor the SDK and Prometheus client it
brings in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_names

if TYPE_CHECKING:
    from .assembly import assemble
    from .config import ConfigError, Settings
    from .evaluators import (
        Evaluator,
        ExpectedCall,
        LoopDetection,
        StepBudget,
        ToolCallAccuracy,
        ToolExpectation,
        ToolFailureRecovery,
    )
    from .intake.processor import AgentEvalProcessor, install
    from .model import AgentStep, AgentTrace, EvalResult, TokenUsage, ToolCall
    from .records import SpanRecord

_WHERE = {
    ".assembly": ("assemble",),
    ".config": ("ConfigError", "Settings"),
    ".evaluators": ("Evaluator", "ExpectedCall", "LoopDetection", "StepBudget", "ToolCallAccuracy", "ToolExpectation",
                    "ToolFailureRecovery"),
    ".intake.processor": ("AgentEvalProcessor", "install"),
    ".model": ("AgentStep", "AgentTrace", "EvalResult", "TokenUsage", "ToolCall"),
    ".records": ("SpanRecord",),
}

__all__ = [
    "AgentEvalProcessor", "AgentStep", "AgentTrace", "ConfigError", "EvalResult", "Evaluator", "ExpectedCall",
    "LoopDetection", "Settings", "SpanRecord", "StepBudget", "TokenUsage", "ToolCall", "ToolCallAccuracy",
    "ToolExpectation", "ToolFailureRecovery", "assemble", "install",
]
__version__ = "0.1.0"


__getattr__, __dir__ = lazy_names(__name__, globals(), _WHERE)
