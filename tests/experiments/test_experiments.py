"""Datasets and experiments: capture per case, evaluation with the case's expectations, Wilson
intervals, comparison and gates, with manual tracing and a real framework (pydantic-ai)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from otel_agent_eval import ToolCallAccuracy
from otel_agent_eval.evaluators import LoopDetection
from otel_agent_eval.experiments.core import Case, compare, failed_gates, load_dataset, run_experiment
from otel_agent_eval.experiments.stats_ci import Gate, two_proportion_test, wilson_interval
from otel_agent_eval.manual import agent_run
from tests.frameworks import pydantic_ai_scenarios as pa


def test_wilson_interval_matches_the_closed_form() -> None:
    # Published values (Newcombe 1998, table I; Wilson without continuity correction).
    for passed, total, low, high in ((81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718)):
        interval = wilson_interval(passed, total)
        assert interval is not None
        assert (round(interval.low, 4), round(interval.high, 4)) == (low, high)
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_two_proportion_test_matches_the_closed_form() -> None:
    test = two_proportion_test(45, 100, 60, 100)
    assert test is not None
    pooled = 105 / 200
    z = 0.15 / math.sqrt(pooled * (1 - pooled) * (2 / 100))
    assert test.difference == pytest.approx(0.15) and test.z == pytest.approx(z)
    assert test.p_value == pytest.approx(0.0337, abs=1e-4)
    assert two_proportion_test(5, 5, 7, 7) is not None and two_proportion_test(5, 5, 7, 7).p_value == 1.0  # type: ignore[union-attr]
    assert two_proportion_test(0, 0, 1, 2) is None


def write_dataset(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


ORDERS = [{"id": f"order-{n}", "input": f"refund order {n}", "expected_tool_calls": ["lookup_order", "refund_order"],
           "require_order": True} for n in range(6)]


def refund_task(provider: TracerProvider, broken: set[str] = frozenset()):  # type: ignore[no-untyped-def]
    """A hand-traced agent; for the cases in ``broken`` it forgets to look the order up."""

    def task(case: Case) -> str:
        with agent_run("refunds", input=case.input, tracer_provider=provider) as run:
            with run.step() as step:
                if case.id not in broken:
                    step.tool_call("lookup_order", {"order": case.id}, result="paid")
                step.tool_call("refund_order", {"order": case.id}, result="ok")
            with run.step() as step:
                step.output("done")
        return "refunded"  # no run.finish(): the task's return value is the final output

    return task


def by_case(case: Case) -> list:  # type: ignore[type-arg]
    rule = case.expectation()
    return [ToolCallAccuracy(rules=[rule] if rule else []), LoopDetection()]


def test_dataset_cases_alias_and_errors(tmp_path: Path) -> None:
    cases = load_dataset(write_dataset(tmp_path, ORDERS))
    assert [c.id for c in cases] == [f"order-{n}" for n in range(6)]
    rule = cases[0].expectation()
    assert rule is not None and [e.name for e in rule.expected_tools or []] == ["lookup_order", "refund_order"] and rule.require_order
    bad = write_dataset(tmp_path, [{"id": 1, "input": "x"}, {"id": 1, "input": "y"}])
    with pytest.raises(ValueError, match=r"cases.jsonl:2: duplicate case id"):
        load_dataset(bad)
    with pytest.raises(ValueError, match=r"cases.jsonl:1"):
        load_dataset(write_dataset(tmp_path, [{"input": "no id"}]))


def test_manual_tracing_experiment_and_a_comparison_with_a_known_difference(tmp_path: Path) -> None:
    provider = TracerProvider()
    dataset = write_dataset(tmp_path, ORDERS)
    good = run_experiment(dataset, refund_task(provider), by_case, tracer_provider=provider, concurrency=3)
    broken = {"order-0", "order-1", "order-2"}
    worse = run_experiment(dataset, refund_task(provider, broken), by_case, tracer_provider=provider, concurrency=3)

    assert [c.runs for c in good.cases] == [1] * 6
    assert all(c.output == "refunded" for c in good.cases)
    accuracy = good.summaries["tool_call_accuracy"]
    assert (accuracy.counts["pass"], accuracy.judged, accuracy.pass_rate) == (6, 6, 1.0)
    assert accuracy.interval == wilson_interval(6, 6)
    assert worse.summaries["tool_call_accuracy"].counts["pass"] == 3

    diff = compare(good.to_json(), worse)
    assert diff["evaluators"]["tool_call_accuracy"]["difference"] == pytest.approx(-0.5)
    assert diff["evaluators"]["tool_call_accuracy"]["p_value"] == pytest.approx(two_proportion_test(6, 6, 3, 6).p_value)  # type: ignore[union-attr]
    assert sorted(f["case"] for f in diff["flipped"]) == sorted(broken)
    gate = Gate.parse("tool_call_accuracy=0.9")
    assert failed_gates(worse, [gate]) == ["tool_call_accuracy: pass rate 50.0% < 90.0%"]
    assert failed_gates(good, [gate]) == []
    assert failed_gates(good, [Gate.parse("tool_call_accuracy=0.9", lower_bound=True)]) == [  # 6/6: lower bound 0.61
        "tool_call_accuracy: pass-rate lower bound (Wilson 95%) 61.0% < 90.0%"]
    json.dumps(worse.to_json())  # what --format json writes


def test_cases_without_an_agent_run_or_with_a_failing_task_are_reported() -> None:
    provider = TracerProvider()

    def task(case: Case) -> str:
        if case.id == "boom":
            raise RuntimeError("agent crashed")
        return "answered without any instrumented call"

    report = run_experiment([Case(id="quiet", input="hi"), Case(id="boom", input="x")], task, by_case, tracer_provider=provider)
    quiet, boom = report.cases
    assert quiet.no_agent_run and quiet.results == []
    assert boom.task_error == "RuntimeError: agent crashed" and not boom.no_agent_run


def test_a_real_framework_experiment_pydantic_ai() -> None:
    provider = TracerProvider()
    cases = [Case.model_validate({"id": "weather", "input": "weather and time in Paris",
                                  "expected_tools": ["get_weather", "get_time"]})]
    report = run_experiment(cases, lambda case: pa.run_weather_with_parallel_tools(provider), by_case, tracer_provider=provider)
    (case,) = report.cases
    assert case.runs == 1 and case.output == pa.WEATHER_ANSWER
    labels = {r.evaluator: r.label for r in case.results}
    assert labels == {"tool_call_accuracy": "pass", "loop_detection": "pass"}


def test_evaluators_by_name_are_built_per_case_with_the_case_expectations() -> None:
    """``run_experiment(dataset, task, ["tool_call_accuracy"])``: names, each case's own rule applied."""
    provider = TracerProvider()
    cases = [Case.model_validate(row) for row in ORDERS[:2]]
    cases[1] = Case.model_validate({**ORDERS[1], "expected_tool_calls": ["refund_order", "lookup_order"]})
    report = run_experiment(cases, refund_task(provider), ["tool_call_accuracy"], tracer_provider=provider)
    assert [{r.evaluator: r.label for r in c.results} for c in report.cases] == [
        {"tool_call_accuracy": "pass"}, {"tool_call_accuracy": "fail"}  # the second case expects the other order
    ]
