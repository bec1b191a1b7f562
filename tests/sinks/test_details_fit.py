"""``agent_eval.details`` fits its limit as valid JSON, shortened by structure (sinks/fit.py)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_agent_eval.model import EvalResult
from otel_agent_eval.sinks.fit import SHORTENED_KEY, dumps, fit_json, flat_dumps
from otel_agent_eval.sinks.otel import MAX_DETAILS, log_attributes


def thirty_call_details() -> dict[str, Any]:
    """The shape of a tool_argument_accuracy result on a 30-call trace: over 4,000 characters."""
    return {
        "answers": [
            {"id": f"call_{i}_0", "question": f"Are the arguments of tool call {i}.0 (search) appropriate for the tool and "
             "the task, with no invented values?", "expected": "yes", "answer": "yes", "reason": "the query matches the task"}
            for i in range(30)
        ],
        "judge_view": {"steps_shown": list(range(30)), "steps_summarized": [], "chars": 9000},
        "prompt_version": "tool_argument_accuracy.v1",
        "schema_check": "all arguments valid",
    }


def test_small_details_are_unchanged() -> None:
    details = {"reason": "timeout", "n": 3}
    assert fit_json(details, 4000) == dumps(details)


def test_a_thirty_call_result_stays_valid_json_and_says_what_was_shortened() -> None:
    details = thirty_call_details()
    assert len(dumps(details)) > MAX_DETAILS
    result = EvalResult(evaluator="tool_argument_accuracy", label="pass", score=1.0, details=details)
    text = log_attributes(result)["agent_eval.details"]
    assert len(text) <= MAX_DETAILS
    parsed = json.loads(text)
    shortened = parsed[SHORTENED_KEY]
    assert shortened["original_chars"] == len(dumps(details))
    assert parsed["prompt_version"] == "tool_argument_accuracy.v1"  # short fields survive as they were
    answers = parsed["answers"]
    assert answers[-1] == f"[... {30 - (len(answers) - 1)} more items]"
    assert shortened["items_omitted"] >= 30 - (len(answers) - 1)
    assert answers[0]["id"] == "call_0_0"


def test_long_strings_are_clipped_longest_first_with_the_count_omitted() -> None:
    details = {"long": "a" * 10_000, "short": "kept as is"}
    parsed = json.loads(fit_json(details, 1000))
    assert parsed["short"] == "kept as is"
    head, marker = parsed["long"].split("...[")
    assert marker == f"{10_000 - len(head)} chars omitted]"
    assert parsed[SHORTENED_KEY]["strings_clipped"] == 1


def test_containers_collapse_when_clipping_and_cutting_are_not_enough() -> None:
    details = {"schema_check": {f"call_{i}": ["missing required property 'q'"] for i in range(200)}, "reason": "x"}
    parsed = json.loads(fit_json(details, 500))
    assert parsed["reason"] == "x"
    assert parsed["schema_check"] == "[object of 200 keys omitted]" or parsed[SHORTENED_KEY]["parts_collapsed"]


def test_a_non_dict_value_and_a_tiny_limit_still_give_valid_json() -> None:
    assert json.loads(fit_json(["x" * 100] * 100, 300))["value"]
    assert fit_json({str(i): i for i in range(1000)}, 10) == "{}"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=400),
    lambda children: st.lists(children, max_size=30) | st.dictionaries(st.text(max_size=20), children, max_size=12),
    max_leaves=60,
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.dictionaries(st.text(max_size=20), json_values, max_size=12), st.integers(min_value=2, max_value=5000))
def test_any_details_fit_any_limit_as_valid_json(details: dict[str, Any], limit: int) -> None:
    text = fit_json(details, limit)
    assert len(text) <= limit
    parsed = json.loads(text)
    assert isinstance(parsed, dict)
    if len(dumps(details)) <= limit:
        assert text == dumps(details)
    elif parsed:
        assert parsed[SHORTENED_KEY]["original_chars"] == len(dumps(details))


class _Opaque:
    def __str__(self) -> str:
        return "opaque \u00e9"


any_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40) | st.builds(_Opaque)
    | st.tuples(st.integers()),
    lambda children: st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=8), children, max_size=6)
    | st.dictionaries(st.integers(), children, max_size=3),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(any_values)
def test_dumps_writes_what_json_dumps_writes(value: Any) -> None:
    """``dumps`` calls the C encoder itself: the text is ``json.dumps``'s for any value (NaN, non-JSON objects,
    int keys, non-ASCII text included)."""
    assert dumps(value) == json.dumps(value, default=str, sort_keys=True)


def test_dumps_still_refuses_a_circular_value_and_is_not_left_confused_by_it() -> None:
    circular: dict[str, Any] = {"a": 1}
    circular["self"] = circular
    try:
        dumps(circular)
    except ValueError as exc:
        assert "Circular" in str(exc)
    else:
        raise AssertionError("a circular value was encoded")
    shared = {"x": 1}
    assert dumps({"a": shared, "b": shared}) == '{"a": {"x": 1}, "b": {"x": 1}}'  # seen twice, not a cycle


flat_values = st.none() | st.booleans() | st.integers(min_value=-3, max_value=3) | st.sampled_from([0.0, -0.0, 1.0, 2.5]) \
    | st.floats() | st.sampled_from(["a", "b", "\u00e9"]) | st.builds(_Opaque) | st.tuples(st.integers(max_value=2))


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(st.dictionaries(st.sampled_from(["a", "b", "c"]), flat_values, max_size=3)
                | st.dictionaries(st.integers(0, 1) | st.booleans(), flat_values, max_size=2), min_size=1, max_size=8))
def test_flat_details_kept_encoded_are_written_as_dumps_writes_them(details: list[dict[Any, Any]]) -> None:
    """Details kept encoded (``flat_dumps``) are never confused with others equal to them across types:
    ``1`` / ``1.0`` / ``True``, ``0.0`` / ``-0.0``, ``"1"`` / ``1`` / ``True`` keys, in any order."""
    for value in [*details, *details]:  # each seen twice: the second from the cache when kept
        assert flat_dumps(value) == json.dumps(value, default=str, sort_keys=True)


def test_flat_details_equal_across_types_keep_their_own_text() -> None:
    for value, text in (({"a": 1}, '{"a": 1}'), ({"a": True}, '{"a": true}'), ({"a": 1.0}, '{"a": 1.0}'),
                        ({"a": 0.0}, '{"a": 0.0}'), ({"a": -0.0}, '{"a": -0.0}'), ({1: "x"}, '{"1": "x"}'),
                        ({True: "x"}, '{"true": "x"}'), ({"a": 1}, '{"a": 1}'), ({"a": -0.0}, '{"a": -0.0}')):
        assert flat_dumps(value) == text
