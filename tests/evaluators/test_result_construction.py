"""Results are built without pydantic's validation only when validation would keep every value as it is
(``model.new_result``): the same result as ``EvalResult(...)``, and what validation rejects is still rejected."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import pytest
from pydantic import ValidationError

from otel_agent_eval import AgentStep, AgentTrace, EvalResult, Evaluator, ToolCall
from otel_agent_eval.evaluators.base import evaluate_run
from otel_agent_eval.model import new_result

FIELDS = ("evaluator", "evaluator_version", "score", "label", "explanation", "details", "trace_id", "span_id",
          "agent_name", "result_id", "reason")


def fields(**changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "evaluator": "loop_detection", "evaluator_version": "1", "score": 0.5, "label": "fail",
        "explanation": "x called 3 times", "details": {"threshold": 1.0, "repeated_calls": {"x({})": 3}},
        "trace_id": "0" * 32, "span_id": "1" * 16, "agent_name": "support", "result_id": "2" * 32, "reason": None,
    }
    values.update(changes)
    return values


def both(**changes: Any) -> tuple[EvalResult, EvalResult]:
    values = fields(**changes)
    built = new_result(*(values[name] for name in FIELDS))
    validated = EvalResult(**{**values, "details": dict(values["details"]) if isinstance(values["details"], dict) else values["details"]})
    return built, validated


@pytest.mark.parametrize("changes", [
    {}, {"score": None, "label": "skipped", "reason": "no_steps"}, {"score": 0.0}, {"score": 1.0}, {"span_id": None},
    {"details": {}}, {"label": "error", "score": None, "reason": "exception"},
])
def test_a_result_built_equals_the_validated_one(changes: dict[str, Any]) -> None:
    built, validated = both(**changes)
    assert built == validated
    assert built.model_dump_json() == validated.model_dump_json()
    assert repr(built) == repr(validated)
    assert built.model_fields_set == validated.model_fields_set
    assert EvalResult.model_validate_json(built.model_dump_json()) == built
    built.score = 0.25  # still an ordinary model: assignment, copies
    assert built.model_copy(update={"label": "pass"}).label == "pass" and built.model_fields_set == set(FIELDS)


@pytest.mark.parametrize("changes", [
    {"score": 1}, {"score": True}, {"label": type("Label", (str,), {})("pass")}, {"details": OrderedDict(a=1)},
])
def test_values_validation_converts_are_converted_alike(changes: dict[str, Any]) -> None:
    built, validated = both(**changes)
    assert built == validated and built.model_dump_json() == validated.model_dump_json()
    assert type(built.score) is type(validated.score) and type(built.label) is str and type(built.details) is dict


@pytest.mark.parametrize("changes", [
    {"score": 1.5}, {"score": -0.1}, {"score": float("nan")}, {"label": "maybe"}, {"explanation": None},
    {"details": {1: "x"}}, {"details": ["x"]}, {"trace_id": None}, {"agent_name": 3}, {"reason": 2},
])
def test_what_validation_rejects_is_rejected(changes: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        EvalResult(**fields(**changes))
    with pytest.raises(ValidationError):
        new_result(*(fields(**changes)[name] for name in FIELDS))


class IntKeys(Evaluator):
    """A user evaluator whose details have a key validation rejects."""

    name = "int_keys"

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        return [self.scored(trace, 1.0, "ok", {1: "one"})]  # type: ignore[dict-item]


def test_a_user_evaluators_invalid_result_is_still_an_error_result() -> None:
    run = AgentTrace(trace_id="t", steps=[AgentStep(index=0, tool_calls=[ToolCall(name="x")])])
    (result,) = evaluate_run([IntKeys()], run)
    assert (result.label, result.reason) == ("error", "exception")
    assert result.explanation.startswith("ValidationError")
