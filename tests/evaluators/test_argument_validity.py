"""tool_argument_validity: each call's arguments against the run's tool schemas, with jsonschema."""

from __future__ import annotations

import pytest

from otel_agent_eval import AgentStep, AgentTrace, ToolCall
from otel_agent_eval.evaluators import ToolArgumentValidity
from otel_agent_eval.evaluators.arguments import check_call, checker, tool_schemas

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
           "required": ["city"], "additionalProperties": False}
DEFINITIONS = [
    {"type": "function", "name": "get_weather", "parameters": WEATHER},  # semconv
    {"type": "function", "function": {"name": "search", "parameters": {  # OpenAI
        "type": "object", "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/item"}}},
        "$defs": {"item": {"type": "object", "required": ["id"]}}}}},
    {"name": "lookup", "input_schema": {"type": "object", "properties": {"id": {"type": "integer"}}}},  # Anthropic
]


def run(*calls: ToolCall, definitions: list | None = DEFINITIONS) -> AgentTrace:  # type: ignore[type-arg]
    return AgentTrace(trace_id="0" * 31 + "1", agent_name="a", tool_definitions=definitions,
                      steps=[AgentStep(index=0, tool_calls=list(calls)), AgentStep(index=1, output="done")])


def test_valid_calls_pass() -> None:
    (result,) = ToolArgumentValidity().evaluate(run(
        ToolCall(name="get_weather", arguments={"city": "Paris", "days": 2}),
        ToolCall(name="search", arguments='{"items": [{"id": 1}]}'),
        ToolCall(name="lookup", arguments={"id": 3}),
    ))
    assert (result.label, result.score, result.details["invalid"]) == ("pass", 1.0, {})


@pytest.mark.parametrize(("call", "problem"), [
    (ToolCall(name="get_weather", arguments={"days": 2}), "arguments: missing required 'city'"),
    (ToolCall(name="get_weather", arguments={"city": 3}), "arguments.city: expected string, got integer"),
    (ToolCall(name="get_weather", arguments={"city": "P", "days": 0}), "arguments.days: 0 < minimum 1"),
    (ToolCall(name="get_weather", arguments={"city": "P", "town": "x"}), "arguments: unexpected property 'town'"),
    (ToolCall(name="search", arguments={"items": [{"name": "x"}]}), "arguments.items[0]: missing required 'id'"),
    (ToolCall(name="get_weather", arguments="{city"), "arguments are not valid JSON"),
    (ToolCall(name="delete_all", arguments={}), "tool 'delete_all' is not among the defined tools"),
])
def test_invalid_call_fails_with_partial_credit_naming_the_argument(call: ToolCall, problem: str) -> None:
    (result,) = ToolArgumentValidity().evaluate(run(ToolCall(name="lookup", arguments={"id": 1}), call))
    assert (result.label, result.score) == ("fail", 0.5)
    assert list(result.details["invalid"].values()) == [[problem]]


def test_skipped_without_definitions_or_calls() -> None:
    (none,) = ToolArgumentValidity().evaluate(run(ToolCall(name="x"), definitions=None))
    assert (none.label, none.reason) == ("skipped", "no_tool_definitions")
    (no_calls,) = ToolArgumentValidity().evaluate(run())
    assert (no_calls.label, no_calls.reason) == ("skipped", "no_tool_calls")


def test_static_definitions_override_the_runs() -> None:
    (result,) = ToolArgumentValidity(tool_definitions=DEFINITIONS).evaluate(
        run(ToolCall(name="get_weather", arguments={}), definitions=None))
    assert result.label == "fail"


def test_a_validator_is_built_once_per_schema() -> None:
    reordered = dict(reversed(list(WEATHER.items())))
    assert checker(WEATHER) is checker(reordered)


def test_an_invalid_schema_is_not_checked_and_said_so() -> None:
    definitions = [{"name": "odd", "parameters": {"type": "no-such-type"}}]
    (result,) = ToolArgumentValidity().evaluate(run(ToolCall(name="odd", arguments={"a": 1}), definitions=definitions))
    assert (result.label, result.details["invalid_schemas"]) == ("pass", ["odd"])
    assert check_call(tool_schemas(definitions), ToolCall(name="odd", arguments={})) == []


def test_the_judge_schema_check_is_this_code() -> None:
    from otel_agent_eval.evaluators.judge import schema_check

    assert (schema_check.check_call, schema_check.tool_schemas) == (check_call, tool_schemas)
