"""Expectation rules: what a run of an agent (optionally, for a matching input) is expected to do.

One rule carries every expectation the evaluators read: expected and forbidden tool
calls (tool_call_accuracy), retry keys and fallback tools (tool_failure_recovery),
facts the answer must state (response_facts), and per-evaluator thresholds. Each
evaluator takes the first matching rule that says something about it, so a rule
with only facts never hides a later rule's expected tools.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..assembly.dialects.base import canonical_json
from ..config_base import threshold_values
from ..model import AgentTrace, ToolCall


class ExpectedCall(BaseModel):
    """An expected tool call: a name, optionally with exact arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    arguments: Any = None

    def matches(self, call: ToolCall) -> bool:
        if call.name != self.name:
            return False
        return self.arguments is None or canonical_json(self.arguments) == canonical_json(call.arguments)


class ToolExpectation(BaseModel):
    """A rule for runs of ``agent`` (``*`` for any) whose input matches ``input_pattern``.

    - ``expected_tools``, ``require_order``, ``penalize_unexpected``, ``forbidden_tools``:
      tool_call_accuracy;
    - ``retry_keys`` (tool -> the arguments that identify a call; ``*`` for any tool; default:
      all arguments) and ``fallback_tools`` (tool -> tools whose success recovers its failure):
      tool_failure_recovery;
    - ``facts``: what the final answer must state (response_facts);
    - ``thresholds``: evaluator -> threshold for runs this rule matches (over every other setting).
    """

    model_config = ConfigDict(extra="forbid")
    agent: str = "*"
    input_pattern: str | None = None
    expected_tools: list[ExpectedCall] | None = None
    require_order: bool = False
    penalize_unexpected: bool = False
    forbidden_tools: list[str] = Field(default_factory=list)
    retry_keys: dict[str, list[str]] = Field(default_factory=dict)
    fallback_tools: dict[str, list[str]] = Field(default_factory=dict)
    facts: list[str] | None = None
    thresholds: dict[str, float] = Field(default_factory=dict)

    @field_validator("expected_tools", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("input_pattern")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            re.compile(value)
        return value

    @field_validator("thresholds")
    @classmethod
    def _thresholds(cls, value: dict[str, float]) -> dict[str, float]:
        return threshold_values(value)  # names are checked against the registry in ``expectation_rules``

    @property
    def about_tool_calls(self) -> bool:
        return self.expected_tools is not None or bool(self.forbidden_tools)

    @property
    def about_recovery(self) -> bool:
        return bool(self.retry_keys or self.fallback_tools)

    def applies_to(self, trace: AgentTrace) -> bool:
        if self.agent not in ("*", trace.agent_name):
            return False
        return self.input_pattern is None or re.search(self.input_pattern, trace.input or "") is not None


def first_rule(
    rules: Sequence[ToolExpectation], trace: AgentTrace, about: Callable[[ToolExpectation], bool]
) -> ToolExpectation | None:
    """The first rule that says something (``about``) and matches the trace."""
    for rule in rules:
        if about(rule) and rule.applies_to(trace):
            return rule
    return None


def load_expectations(path: str | Path) -> list[ToolExpectation]:
    """Read expectation rules from a JSON file: a list of ToolExpectation objects."""
    data = json.loads(Path(path).read_text())
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of expectation rules")
    return [ToolExpectation.model_validate(item) for item in data]
