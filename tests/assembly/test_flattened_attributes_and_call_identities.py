"""What the speed pass (issue 15, item 2) replaced keeps its results.

* ``indexed_fields`` (flattened ``{prefix}{index}{infix}{field}`` attributes, each key split by
  ``partition`` once and remembered) reads what the regex per key read: gaps in the
  indices kept in order, ``00`` is index 0, a non-decimal index or an empty field is no field;
* a LangChain tool's ``traceloop.entity.output``, now parsed once, reports one issue when malformed;
* ``tool_failure_recovery`` without retry keys compares calls whose arguments are dicts of
  scalars by (key, type, value), as canonical JSON compares them: key order does not matter,
  ``1`` and ``True`` differ; other arguments (a float) still go through canonical JSON.
"""

from __future__ import annotations

from typing import Any

from otel_agent_eval import AgentStep, AgentTrace, ToolCall
from otel_agent_eval.assembly.dialects import read_operation
from otel_agent_eval.assembly.dialects.base import TOOL
from otel_agent_eval.assembly.dialects.indexed import indexed_fields
from otel_agent_eval.evaluators import ToolFailureRecovery
from otel_agent_eval.records import SpanRecord


def test_indexed_fields_reads_what_a_regex_per_key_read() -> None:
    attrs = {
        "gen_ai.completion.2.role": "tool",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.tool_calls.0.name": "search",
        "gen_ai.completion.00.content": "zero",  # the same index, spelled 00
        "gen_ai.completion.x.role": "not an index",
        "gen_ai.completion.3.": "no field",
        "gen_ai.completion.4": "no separator",
        "gen_ai.prompt.0.role": "user",
        "llm.output_messages.1.message.role": "assistant",
        "llm.output_messages.1.other.role": "not the infix",
    }
    assert indexed_fields(attrs, "gen_ai.completion.") == {
        2: {"role": "tool"},
        0: {"role": "assistant", "tool_calls.0.name": "search", "content": "zero"},
    }
    assert indexed_fields(attrs, "llm.output_messages.", ".message.") == {1: {"role": "assistant"}}
    assert indexed_fields({}, "gen_ai.prompt.") == {}


def test_traceloop_tool_output_parsed_once_reports_one_issue() -> None:
    record = SpanRecord(trace_id=1, span_id=2, parent_span_id=None, name="search.tool", start_time_unix_nano=0,
                        end_time_unix_nano=1, attributes={
                            "traceloop.span.kind": "tool", "traceloop.entity.name": "search",
                            "traceloop.entity.input": '{"inputs": {"q": "x"}, "input_str": "x", "kwargs": {}}',
                            "traceloop.entity.output": '{"output": {"lc": 1',  # cut off
                        })
    op = read_operation(record)
    assert op is not None and op.kind == TOOL
    assert op.tool_arguments == {"q": "x"}
    assert op.tool_result == '{"output": {"lc": 1'
    assert [issue.split(" (")[0] for issue in op.issues] == ["traceloop.entity.output: JSON cut short at 19 characters"]


def _run(*calls: tuple[dict[str, Any] | None, bool]) -> AgentTrace:
    tool_calls = [ToolCall(name="book", arguments=args, error="timeout" if failed else None) for args, failed in calls]
    return AgentTrace(trace_id="t", steps=[AgentStep(index=0, tool_calls=tool_calls)])


def test_recovery_identities_compare_as_canonical_json() -> None:
    recovery = ToolFailureRecovery()
    # key order does not matter
    assert recovery.evaluate(_run(({"a": 1, "b": "x"}, True), ({"b": "x", "a": 1}, False)))[0].label == "pass"
    # 1 and True are different arguments in JSON
    assert recovery.evaluate(_run(({"a": 1}, True), ({"a": True}, False)))[0].label == "fail"
    # a float: every call compared by canonical JSON
    assert recovery.evaluate(_run(({"a": 1.5}, True), ({"a": 1.5}, False)))[0].label == "pass"
    assert recovery.evaluate(_run(({"a": 1.5}, True), ({"a": 2.5}, False)))[0].label == "fail"
    # no arguments, and a non-dict: canonical JSON too
    assert recovery.evaluate(_run((None, True), (None, False)))[0].label == "pass"
