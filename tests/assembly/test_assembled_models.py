"""``model.assembled_trace`` builds assembly's tree without pydantic's validation: it must give exactly what
``AgentTrace.model_validate`` gives for the same fields (every value and its type, ``model_fields_set``,
``__dict__`` order, which ``model_dump_json`` writes in, equality, dumps with ``exclude_unset``), and validate
(or reject) as before whatever is not already of its field's exact type.

Compared on every run assembled from the benchmark's workload shapes and the repository's recorded traces (the
builder's inputs captured as assembly hands them over), and on random field values of exact and inexact types.
"""

from __future__ import annotations

import copy
import enum
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from otel_agent_eval import assemble
from otel_agent_eval.assembly import core
from otel_agent_eval.assembly import steps as assembly_steps
from otel_agent_eval.formats.otlp import read_trace_file
from otel_agent_eval.model import (
    AgentStep,
    AgentTrace,
    ToolCall,
    assembled_step,
    assembled_trace,
    built_step,
    tool_call_fields,
)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import pipeline  # noqa: E402


def assert_same(built: Any, validated: Any, where: str = "trace") -> None:
    """Field by field: the same types and values, fields set, ``__dict__`` order and slots."""
    assert type(built) is type(validated), where
    if isinstance(validated, BaseModel):
        assert list(built.__dict__) == list(validated.__dict__) == list(type(validated).model_fields), where
        assert built.model_fields_set == validated.model_fields_set, where
        assert built.model_fields_set is not validated.model_fields_set
        assert built.__pydantic_extra__ == validated.__pydantic_extra__, where
        assert built.__pydantic_private__ == validated.__pydantic_private__, where
        for name, value in validated.__dict__.items():
            assert_same(built.__dict__[name], value, f"{where}.{name}")
        assert built == validated, where
    elif isinstance(validated, list):
        assert len(built) == len(validated), where
        for i, (one, other) in enumerate(zip(built, validated)):
            assert_same(one, other, f"{where}[{i}]")
    else:
        assert built == validated, where


def assert_equivalent(built: AgentTrace, validated: AgentTrace) -> None:
    assert_same(built, validated)
    assert built.model_dump_json() == validated.model_dump_json()
    assert built.model_dump(exclude_unset=True) == validated.model_dump(exclude_unset=True)
    assert built.model_dump(exclude_defaults=True) == validated.model_dump(exclude_defaults=True)


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every tree assembly builds is compared with the validation of a copy of the same fields, and so is
    every step (``StepDraft.to_step`` builds it through ``built_step``, or ``assembled_step`` when a value is
    inexact: the trace's steps reach ``assembled_trace`` built)."""
    count = [0, 0]

    def checking(build: Any) -> Any:
        def checked_step(*fields: Any) -> AgentStep | dict[str, Any]:
            names = ("index", "thought", "output", "tool_calls", "model", "input_tokens", "output_tokens", "span_ids",
                     "error", "issues")
            values = dict(zip(names, copy.deepcopy(fields)))
            values["usage"] = {"input_tokens": values.pop("input_tokens"), "output_tokens": values.pop("output_tokens")}
            validated = AgentStep.model_validate(values)
            built = build(*fields)
            assert type(built) is AgentStep  # every step of these traces is exact
            assert_same(built, validated, "step")
            count[1] += 1
            return built
        return checked_step

    def checked(**fields: Any) -> AgentTrace:
        validated = AgentTrace.model_validate(copy.deepcopy(fields))
        built = assembled_trace(**fields)
        assert_equivalent(built, validated)
        count[0] += 1
        return built

    monkeypatch.setattr(core, "assembled_trace", checked)
    monkeypatch.setattr(assembly_steps, "assembled_step", checking(assembled_step))
    monkeypatch.setattr(assembly_steps, "built_step", checking(built_step))
    return count


@pytest.mark.parametrize("shape", list(pipeline.SHAPES))
def test_every_benchmark_shape_builds_what_validation_gives(compared: list[int], shape: str) -> None:
    for spans in (4, 20, 33):
        for records in pipeline.dataset(spans, 3, shape) + pipeline.dataset(spans, 2, shape, tool_definitions=True):
            runs = assemble(records)
            assert runs and all(type(run) is AgentTrace for run in runs)
    assert compared[0] >= 15 and compared[1] >= compared[0]


def test_recorded_traces_build_what_validation_gives(compared: list[int]) -> None:
    files = sorted((ROOT / "tests" / "data" / "otlp").glob("*.json*"))
    assert files
    for path in files:
        assemble(read_trace_file(path))
    assert compared[0] >= 1


def test_later_assignment_and_nesting_behave_as_on_a_validated_trace() -> None:
    records = pipeline.dataset(20, 1, "semconv")[0]
    built = assemble(records)[0]
    validated = AgentTrace.model_validate(json.loads(built.model_dump_json(exclude_unset=True)))
    for trace in (built, validated):
        trace.parent_step_index = 1
        trace.steps[0].tool_calls[0].result = "changed"
        trace.children.append(AgentTrace(trace_id="x"))
    assert "parent_step_index" in built.model_fields_set
    assert built.model_fields_set == validated.model_fields_set
    # a step's, a call's and a step usage's fields set is every field (shared by the models ``built_step`` makes):
    # assignment leaves it so
    for step in built.steps:
        assert step.model_fields_set == set(AgentStep.model_fields)
        assert step.usage.model_fields_set == {"input_tokens", "output_tokens"}
        for call in step.tool_calls:
            assert call.model_fields_set == set(ToolCall.model_fields)
    copied = built.steps[0].tool_calls[0].model_copy(update={"error": "x"})
    assert copied.model_fields_set == set(ToolCall.model_fields)
    assert copied.model_fields_set is not built.steps[0].tool_calls[0].model_fields_set
    assert built.model_dump_json() == validated.model_dump_json()
    assert built.model_copy(deep=True) == built


class Colour(str, enum.Enum):
    RED = "red"


class Text(str):
    pass


def call_fields(name: Any = "search", **changes: Any) -> dict[str, Any]:
    call = tool_call_fields(name, {"q": "x"}, "c1")
    call.update(result=[1, {"a": None}], span_id="00000000000000aa", start_time_unix_nano=1, end_time_unix_nano=2,
                executed=True)
    call.update(changes)
    assert list(call) == list(ToolCall.model_fields)
    return call


def step_fields(index: Any = 0, calls: Any = None, **changes: Any) -> dict[str, Any]:
    step = {
        "index": index, "thought": None, "output": "done", "tool_calls": [call_fields()] if calls is None else calls,
        "model": "m", "usage": {"input_tokens": 3, "output_tokens": 4}, "span_ids": ["00000000000000ab"],
        "error": None, "issues": [],
    }
    step.update(changes)
    return step


def trace_fields(**changes: Any) -> dict[str, Any]:
    fields = dict(
        trace_id="0" * 32, agent_span_id="00000000000000ac", agent_name="agent", conversation_id=None,
        input="hi", final_output="done", steps=[step_fields()], status="ok", error=None, start_time_unix_nano=0,
        end_time_unix_nano=5, usage={"input_tokens": 3, "output_tokens": 4}, content_captured=True,
        tool_definitions=None, issues=[], partial=False, metadata={"service.name": "svc"}, attributes_dropped=0,
        events_dropped=0, values_cut_short=0,
    )
    fields.update(changes)
    return fields


INEXACT = [
    # each validated (converted) as before, or rejected alike
    {"agent_name": Text("agent")},
    {"agent_name": Colour.RED},
    {"agent_name": None},
    {"status": "failed"},
    {"start_time_unix_nano": True},
    {"start_time_unix_nano": 5.0},
    {"end_time_unix_nano": "5"},
    {"tool_definitions": ({"name": "t"},)},
    {"tool_definitions": [{"name": "t"}]},
    {"issues": ["a", Text("b")]},
    {"metadata": {1: "x"}},
    {"content_captured": 1},
    {"attributes_dropped": True},
    {"attributes_dropped": 2.0},
    {"events_dropped": "2"},
    {"events_dropped": -1.5},
    {"values_cut_short": False},
    {"usage": {"input_tokens": 3.0, "output_tokens": 4}},
    {"steps": [step_fields(index=True)]},
    {"steps": [step_fields(thought=Text("t"))]},
    {"steps": [step_fields(usage={"input_tokens": "3", "output_tokens": 4})]},
    {"steps": [step_fields(span_ids=("x",))]},
    {"steps": [step_fields(issues=[1])]},
    {"steps": [step_fields(calls=[call_fields(Colour.RED)])]},
    {"steps": [step_fields(calls=[call_fields(None)])]},
    {"steps": [step_fields(calls=[call_fields(requested=1)])]},
    {"steps": [step_fields(calls=[call_fields(start_time_unix_nano=2.5)])]},
    {"steps": [step_fields(calls=[call_fields(call_id=7)])]},
    {"steps": [step_fields(), step_fields(index=1, calls=[call_fields(error=Text("boom"))])]},
]


@pytest.mark.parametrize("changes", [{}, *INEXACT], ids=repr)
def test_inexact_values_are_validated_as_before(changes: dict[str, Any]) -> None:
    assert_built_as_validated(trace_fields(**changes))


def through_steps(**fields: Any) -> AgentTrace:
    """``assembled_trace`` of ``fields`` with each step made by ``assembled_step`` first, as assembly does it."""
    fields["steps"] = [assembled_step(
        step["index"], step["thought"], step["output"], step["tool_calls"], step["model"],
        step["usage"]["input_tokens"], step["usage"]["output_tokens"], step["span_ids"], step["error"], step["issues"],
    ) for step in fields["steps"]]
    return assembled_trace(**fields)


def assert_built_as_validated(fields: dict[str, Any]) -> None:
    """``assembled_trace`` of ``fields`` (its steps as dicts, or made by ``assembled_step``) is what validating
    them gives, or raises what validation raises."""
    try:
        validated = AgentTrace.model_validate(copy.deepcopy(fields))
    except ValidationError as expected:
        for build in (assembled_trace, through_steps):
            with pytest.raises(ValidationError) as raised:
                build(**copy.deepcopy(fields))
            assert raised.value.errors() == expected.errors()
        return
    assert_equivalent(through_steps(**copy.deepcopy(fields)), validated)
    assert_equivalent(assembled_trace(**fields), validated)


optional_text = st.one_of(st.none(), st.text(max_size=4), st.builds(Text, st.text(max_size=4)))
optional_int = st.one_of(st.none(), st.integers(-5, 2**70), st.booleans(), st.floats(0, 10))
any_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=4)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=6,
)
calls = st.builds(
    call_fields, name=st.one_of(st.text(max_size=4), st.builds(Text, st.text(max_size=2))), arguments=any_value,
    result=any_value, error=optional_text, call_id=optional_text, span_id=optional_text,
    start_time_unix_nano=optional_int, end_time_unix_nano=optional_int,
    requested=st.one_of(st.booleans(), st.sampled_from([0, 1])), executed=st.booleans(),
)
usages = st.fixed_dictionaries({
    "input_tokens": st.one_of(st.integers(0, 10), st.booleans()), "output_tokens": st.integers(0, 10),
})
steps = st.builds(
    step_fields, index=st.one_of(st.integers(0, 5), st.booleans()), calls=st.lists(calls, max_size=3),
    thought=optional_text, output=optional_text, model=optional_text, error=optional_text, usage=usages,
    span_ids=st.lists(st.one_of(st.text(max_size=3), st.builds(Text, st.text(max_size=2))), max_size=3),
    issues=st.lists(st.text(max_size=3), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(steps, max_size=3), agent_name=st.one_of(st.text(max_size=4), st.builds(Text, st.text(max_size=2))),
    final_output=optional_text, status=st.sampled_from(["ok", "error", "other"]), end=optional_int, usage=usages,
    tool_definitions=st.one_of(st.none(), st.lists(any_value, max_size=2)),
    metadata=st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 3)), any_value, max_size=2),
    partial=st.one_of(st.booleans(), st.sampled_from([0, 1])),
    attributes_dropped=st.one_of(st.integers(0, 200), st.booleans(), st.floats(0, 3)), events_dropped=optional_int,
    values_cut_short=st.one_of(st.integers(0, 3), st.booleans()),
)
def test_random_fields_build_what_validation_gives(**drawn: Any) -> None:
    end = drawn.pop("end")
    assert_built_as_validated(trace_fields(end_time_unix_nano=end if end is not None else 0, **drawn))
