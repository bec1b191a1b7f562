"""Dialect helpers give exactly the results their definitions state.

* ``canonical_json``: the text of ``json.dumps(sort_keys=True, separators=(",", ":"), default=str)``,
  and ``repr`` for what JSON cannot encode (cycles included);
* ``unwrap_tool_payload``: a dict without any wrapper key is returned as it is, every wrapper is stripped;
* semconv ``extract`` fills only empty fields (as ``fill`` does) and leaves empty values unset.
"""

from __future__ import annotations

import json
from typing import Any

from otel_agent_eval.assembly.dialects import semconv
from otel_agent_eval.assembly.dialects.base import AGENT, LLM, TOOL, Operation, canonical_json, unwrap_tool_payload
from otel_agent_eval.records import STATUS_ERROR, SpanRecord

MS = 1_000_000


def span(span_id: int, name: str, start: int, end: int, parent: int | None = 1, **attributes: Any) -> SpanRecord:
    """A span; times in milliseconds."""
    return SpanRecord(trace_id=5, span_id=span_id, parent_span_id=parent, name=name,
                      start_time_unix_nano=start * MS, end_time_unix_nano=end * MS, attributes=attributes)


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def test_canonical_json_is_sorted_compact_json_and_repr_when_json_cannot_encode_it() -> None:
    values: list[Any] = [None, True, 3, 2.5, float("nan"), float("inf"), ["é"], ["b", {"z": 1, "a": [1.0, None]}],
                         {"b": 1, "a": {"d": 2, "c": 3}}, (1, 2), {"when": object}, 10**30]
    for value in values:
        assert canonical_json(value) == dumps(value)
    assert canonical_json('{"b": 1, "a": 2}') == '{"a":2,"b":1}'  # a JSON string is decoded first
    assert canonical_json("plain text") == "plain text"
    assert canonical_json({1: "x", "a": "y"}) == repr({1: "x", "a": "y"})  # unsortable keys
    cycle: list[Any] = [1]
    cycle.append(cycle)
    assert canonical_json(cycle) == repr(cycle)
    # the encoder is reused: a failure leaves no state behind
    assert canonical_json([1, [2]]) == "[1,[2]]"


def test_unwrap_tool_payload_keeps_a_plain_dict_and_still_strips_every_wrapper() -> None:
    plain = {"city": "Paris", "days": 3}
    assert unwrap_tool_payload(plain) is plain
    assert unwrap_tool_payload({"args": ["Paris"], "kwargs": {}}) == "Paris"
    assert unwrap_tool_payload({"args": [], "kwargs": {"city": "Paris"}}) == {"city": "Paris"}
    assert unwrap_tool_payload({"input_str": "Paris", "inputs": {"city": "Paris"}, "tags": []}) == {"city": "Paris"}
    assert unwrap_tool_payload({"output": "rain", "kwargs": {}}) == "rain"
    assert unwrap_tool_payload({"lc": 1, "type": "constructor", "id": ["x", "ToolMessage"],
                                "kwargs": {"content": "rain", "tool_call_id": "c1"}}) == "rain"
    assert unwrap_tool_payload({"type": "tool", "data": {"content": "rain", "tool_call_id": "c1"}}) == "rain"
    not_a_wrapper = {"type": "weather", "city": "Paris"}
    assert unwrap_tool_payload(not_a_wrapper) == not_a_wrapper


def test_semconv_extract_fills_only_what_is_still_empty() -> None:
    record = span(2, "chat m", 0, 1, None, **{
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.provider.name": "openai",
        "gen_ai.conversation.id": "conv", "gen_ai.usage.input_tokens": 3, "gen_ai.usage.output_tokens": 4})
    op = Operation(record=record, kind=LLM)
    semconv.extract(record, op)
    assert (op.model, op.provider, op.conversation_id, op.usage, op.error) == (
        "m", "openai", "conv", (3, 4), None)
    earlier = Operation(record=record, kind=LLM, model="x", provider="y", conversation_id="c",
                        usage=(1, 0), error="boom")
    semconv.extract(record, earlier)
    assert (earlier.model, earlier.provider, earlier.conversation_id, earlier.usage, earlier.error) == (
        "x", "y", "c", (1, 0), "boom")


def test_semconv_extract_leaves_empty_values_unset() -> None:
    record = span(1, "invoke_agent", 0, 1, None, **{
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "", "gen_ai.conversation.id": ""})
    op = Operation(record=record, kind=AGENT)
    semconv.extract(record, op)
    assert (op.agent_name, op.conversation_id, op.error) == (None, None, None)
    failed = SpanRecord(trace_id=5, span_id=3, parent_span_id=None, name="execute_tool t", start_time_unix_nano=0,
                        end_time_unix_nano=1, status_code=STATUS_ERROR, status_message="timeout",
                        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t",
                                    "gen_ai.tool.call.id": ""})
    tool = Operation(record=failed, kind=TOOL, tool_call_ids=["earlier"])
    semconv.extract(failed, tool)
    assert (tool.tool_name, tool.tool_call_ids, tool.error) == ("t", ["earlier"], "timeout")
