"""otel-agent-eval: online evaluation of LLM agents through OpenTelemetry."""

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

__all__ = [
    "AgentEvalProcessor", "AgentStep", "AgentTrace", "ConfigError", "EvalResult", "Evaluator", "ExpectedCall",
    "LoopDetection", "Settings", "SpanRecord", "StepBudget", "TokenUsage", "ToolCall", "ToolCallAccuracy",
    "ToolExpectation", "ToolFailureRecovery", "assemble", "install",
]
__version__ = "0.1.0"
