"""Result records and evaluation spans encoded from templates are byte for byte what the general path encodes.

``RecordTemplates`` (``otlp_attributes.py``, for serve's direct sink) writes a ``gen_ai.evaluation.result`` record's attributes from a
template derived from ``otel.log_attributes`` and keeps them by the values that recur; the general path builds
the attribute dict and encodes it (itself pinned against the SDK by ``test_otlp_direct.py``). Generated results
(labels, scores with their zeros and ones, non-ASCII text, details of every kind, odd value types) go through
both, twice each (the second time from what was kept), under attribute limits from ``OTEL_*ATTRIBUTE*_LIMIT``;
so do generated runs (agents, phases, services, partial runs, dropped spans, attributes and events, with and without an agent span) for
``SpanTemplates``.
"""

from __future__ import annotations

import dataclasses
import os
import random
from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_agent_eval.model import AgentTrace, EvalResult, EvaluatedTrace
from otel_agent_eval.sinks import otlp_attributes
from otel_agent_eval.sinks.otel import LABEL_RANK, log_attributes
from otel_agent_eval.sinks.otlp_attributes import (
    Limits,
    RecordTemplates,
    SpanTemplates,
    log_limits,
    span_limits,
)
from otel_agent_eval.sinks.otlp_direct import evaluation_span, result_records

text = st.text(alphabet=st.sampled_from("ab é✓\"\\\n{}\x00"), max_size=12) | st.sampled_from(
    ["", "no tool call failed", "x" * 1500, "évalué ✓" * 40])
scalar = (st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.0, -0.0, 1.0, 0.5, float("inf")])
          | text)
details = st.one_of(
    st.just({}),
    st.dictionaries(st.sampled_from(["reason", "failed", "threshold", "steps", "é"]), scalar, max_size=4),
    st.dictionaries(st.sampled_from(["reason", "calls", "nested"]),
                    st.recursive(scalar, lambda inner: st.lists(inner, max_size=3)
                                 | st.dictionaries(text, inner, max_size=3), max_leaves=6), max_size=3),
    st.builds(lambda n: {"missing": ["refund_order"] * n}, st.sampled_from([1, 900])),  # shortened to fit
    st.builds(lambda k: {k: object.__new__(type("Opaque", (), {"__str__": lambda self: "opaque ✓"}))},
              st.sampled_from(["obj", "reason"])),
)
score = st.none() | st.sampled_from([0.0, -0.0, 1.0, 0.25]) | st.floats(0.0, 1.0)


@st.composite
def results(draw: Any) -> EvalResult:
    fields = {
        "evaluator": draw(st.sampled_from(["tool_call_accuracy", "step_budget", "custom ✓"])),
        "evaluator_version": draw(st.sampled_from(["1", "2"])),
        "label": draw(st.sampled_from(list(LABEL_RANK))),
        "score": draw(score),
        "explanation": draw(text),
        "details": draw(details),
        "agent_name": draw(st.sampled_from(["support-agent", "agent é"])),
        "result_id": draw(st.sampled_from(["", "ab" * 16, "id ✓"])),
        "trace_id": "ab" * 16,
        "reason": draw(st.none() | st.just("timeout")),
    }
    odd = draw(st.sampled_from([None, None, None, ("score", 1), ("score", True), ("result_id", 12),
                                ("result_id", None), ("details", {"k": b"bytes"}),
                                ("details", {1: "int keys", 2: 1.0})]))
    if odd is None:
        return EvalResult(**fields)
    fields[odd[0]] = odd[1]
    return EvalResult.model_construct(**fields)  # what a custom evaluator may hand over unvalidated


_ONES: dict[type, Any] = {int: 1.0, float: True, bool: 1}
"""``1 == 1.0 == True``, as ``0.0 == -0.0``: equal values of other bytes."""


def twins(result: EvalResult) -> list[EvalResult]:
    """``result`` with the equal-but-other values swapped, in its score, then in its flat details: what is kept by
    value must tell them apart."""
    def swap(value: Any) -> Any:
        if type(value) is float and not value:
            return -value
        if type(value) in _ONES and value == 1:
            return _ONES[type(value)]
        return value
    details = result.details
    swapped = {k: swap(v) for k, v in details.items()} if isinstance(details, dict) else details
    return [EvalResult.model_construct(**{**result.__dict__, "score": swap(result.score)}),
            EvalResult.model_construct(**{**result.__dict__, "details": swapped})]


limits = st.sampled_from([{}, {"OTEL_ATTRIBUTE_COUNT_LIMIT": "7"}, {"OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT": "8"},
                          {"OTEL_ATTRIBUTE_COUNT_LIMIT": "100"}, {"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "20"},
                          {"OTEL_LOGRECORD_ATTRIBUTE_VALUE_LENGTH_LIMIT": "5000"}])


def run(found: list[EvalResult], service: Any) -> EvaluatedTrace:
    metadata = {} if service is None else {"service.name": service}
    trace = AgentTrace(trace_id="ab" * 16, agent_span_id="cd" * 8, agent_name="support-agent", metadata=metadata)
    return EvaluatedTrace(trace=trace, results=found, durations={}, started_ns=1, ended_ns=2)


@settings(max_examples=300, deadline=None)
@given(st.lists(results(), min_size=1, max_size=6), st.none() | st.sampled_from(["shop", "boutique é"]),
       limits)
def test_template_records_are_the_general_records(found: list[EvalResult], service: Any, env: dict[str, str]) -> None:
    with mock.patch.dict(os.environ, env):
        configured = log_limits()
    templates = RecordTemplates(configured)
    evaluated = run([r for result in found for r in (result, *twins(result))], service)
    general = result_records(evaluated, configured, 5)
    assert result_records(evaluated, configured, 5, templates) == general
    assert result_records(evaluated, configured, 5, templates) == general  # from what was kept


span_limits_env = st.sampled_from([{}, {"OTEL_ATTRIBUTE_COUNT_LIMIT": "9"}, {"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "12"},
                                   {"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT": "8"},
                                   {"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "5000"}])


@st.composite
def runs(draw: Any) -> EvaluatedTrace:
    found = draw(st.lists(results(), max_size=5))
    service = draw(st.none() | st.sampled_from(["shop", "boutique é"]))
    trace = AgentTrace(trace_id="ab" * 16, agent_span_id=draw(st.none() | st.sampled_from(["cd" * 8, "0f" * 8])),
                       agent_name=draw(st.sampled_from(["support-agent", "agent é"])),
                       metadata={} if service is None else {"service.name": service}, partial=draw(st.booleans()),
                       spans_dropped=draw(st.sampled_from([0, 1, 3])),
                       attributes_dropped=draw(st.sampled_from([0, 1, 85])), events_dropped=draw(st.sampled_from([0, 2])),
                       values_cut_short=draw(st.sampled_from([0, 1])))
    return EvaluatedTrace(trace=trace, results=found, durations={}, started_ns=1, ended_ns=2,
                          phase=draw(st.sampled_from(["deterministic", "judge"])))


def variants(evaluated: EvaluatedTrace) -> list[EvaluatedTrace]:
    """``evaluated`` and runs that differ from it in one thing a span's attributes are kept by: its scores'
    equal-but-other twins, the agent span present or not, the phase."""
    trace = evaluated.trace
    return [evaluated,
            dataclasses.replace(evaluated, results=[twins(r)[0] for r in evaluated.results]),
            dataclasses.replace(evaluated, trace=trace.model_copy(
                update={"agent_span_id": None if trace.agent_span_id else "cd" * 8})),
            dataclasses.replace(evaluated, phase="judge" if evaluated.phase == "deterministic" else "deterministic")]


def seeded_span(evaluated: EvaluatedTrace, limits: Limits, templates: SpanTemplates | None) -> bytes:
    random.seed(3)  # the same random ids for both ways
    return evaluation_span(evaluated, limits, templates)


@settings(max_examples=300, deadline=None)
@given(st.lists(runs(), min_size=1, max_size=3), span_limits_env)
def test_template_spans_are_the_general_spans(evaluated: list[EvaluatedTrace], env: dict[str, str]) -> None:
    with mock.patch.dict(os.environ, env):
        configured = span_limits()
    templates = SpanTemplates(configured)
    for run_ in [v for e in evaluated for v in variants(e)] * 2:  # the second time from what was kept
        assert seeded_span(run_, configured, templates) == seeded_span(run_, configured, None)


def common_results() -> list[EvalResult]:
    return [EvalResult(evaluator="step_budget", label="pass", score=1.0, explanation="2 steps (budget 20)",
                       details={"steps": 2, "max_steps": 20, "threshold": 1.0}, agent_name="a", result_id="ab" * 16),
            EvalResult(evaluator="tool_call_accuracy", label="skipped", explanation="no expectation",
                       details={"reason": "no_expectation"}, agent_name="a", result_id="cd" * 16),
            EvalResult(evaluator="loop_detection", label="fail", score=0.0, explanation="search called 4 times",
                       details={"repeated_calls": {"search": 4}}, agent_name="a", result_id="ef" * 16)]


def test_the_common_results_take_the_template() -> None:
    """The equality above would hold with every record going the general way: the usual results do not."""
    templates = RecordTemplates(Limits(128, None))
    for result in common_results():
        assert templates.encode(result, "shop") is not None
    evaluated = run(common_results(), "shop")
    assert SpanTemplates(Limits(128, None)).encode(evaluated, evaluated.trace.__dict__) is not None


def test_a_limit_in_reach_or_an_attribute_outside_the_template_goes_the_general_way() -> None:
    result = common_results()[0]
    assert RecordTemplates(Limits(3, None)).encode(result, "shop") is None
    assert RecordTemplates(Limits(None, 1000)).encode(result, "shop") is None

    def with_trace_id(found: EvalResult, service: Any = None) -> dict[str, Any]:
        return {**log_attributes(found, service), "agent_eval.trace": found.trace_id}

    with mock.patch.object(otlp_attributes, "log_attributes", with_trace_id):  # what otel.py emits changed
        assert RecordTemplates(Limits(128, None)).encode(result, "shop") is None
