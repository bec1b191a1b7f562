"""Dialect helpers give exactly the results their definitions state.

* ``canonical_json``: the text of ``json.dumps(sort_keys=True, separators=(",", ":"), default=str)``,
  and ``repr`` for what JSON cannot encode (cycles included);
* ``unwrap_tool_payload``: a dict without any wrapper key is returned as it is, every wrapper is stripped;
* semconv ``extract`` fills only empty fields (as ``fill`` does) and leaves empty values unset, and reads
  the first present string of its keys as ``first_str`` does;
* ``parse_json_value`` decodes as ``json.loads`` does and reports what it raises;
* ``Operation``'s written-out ``__init__`` matches its fields.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any

from otel_agent_eval.assembly.dialects import semconv
from otel_agent_eval.assembly.dialects.base import (
    AGENT,
    LLM,
    TOOL,
    Operation,
    canonical_json,
    first_str,
    maybe_json,
    parse_json_value,
    unwrap_tool_payload,
)
from otel_agent_eval.records import STATUS_ERROR, SpanRecord, clean

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


PLACEHOLDERS: tuple[Any, ...] = (None, "", "<not specified>", 7, "x")
"""Values a string attribute may hold: absent, empty, the placeholder, not a string, a string."""


def test_semconv_reads_the_first_present_string_of_its_keys_as_first_str_does() -> None:
    """The spelled-out look-ups of ``semconv.extract`` (model, provider, tool name) == ``first_str``."""
    pairs = {"model": semconv.MODEL_KEYS, "provider": semconv.PROVIDER_KEYS, "tool_name": ("gen_ai.tool.name",)}
    for field_name, keys in pairs.items():
        for values in itertools.product(PLACEHOLDERS, repeat=len(keys)):
            attributes = {"gen_ai.operation.name": "execute_tool"}
            attributes.update({key: value for key, value in zip(keys, values) if value is not None})
            record = span(2, "execute_tool t", 0, 1, None, **attributes)
            op = Operation(record, TOOL)
            semconv.extract(record, op)
            assert getattr(op, field_name) == first_str(attributes, *keys), (field_name, values)


def test_parse_json_value_decodes_as_json_loads_and_keeps_the_rest_raw_with_its_error() -> None:
    """The decoder's fast path (``scan_once``) gives what ``json.loads`` gives, and the same issue on failure."""
    values = ['{"a": [1, 2.5, null, true]}', ' [1, 2] ', '"text"', "12", "-1.5e3", "true", "null", "[1] [2]", "{1: 2}",
              "[" * 100_000 + "]" * 100_000, "tomorrow", "nope", '"\\ud83d"', '{"k": "\\uD83D\\uDE00"}',
              "{ }", "[]"]
    for value in values:
        issues: list[str] = []
        got = parse_json_value(value, "attr", issues)
        try:
            expected, expected_issues = json.loads(value.strip()), []
        except (ValueError, RecursionError) as exc:
            expected = value
            expected_issues = [f"attr: malformed JSON ({exc.__class__.__name__}: {str(exc)[:120]}); kept raw"]
        if value.strip()[:1] not in "[{\"0123456789-tfn":
            expected, expected_issues = value, []
        assert (got, issues) == (clean(expected), expected_issues), value
    issues = []  # the start of JSON cut short: kept raw too, the issue says it was cut
    assert parse_json_value('{"a": 1, "b": "cut sh', "attr", issues) == '{"a": 1, "b": "cut sh'
    assert issues == ["attr: JSON cut short at 21 characters (an attribute value length limit?); kept raw"]
    assert maybe_json(" 3 results", "attr", []) == " 3 results"
    issues = []
    assert maybe_json('[1, 2]  ', "attr", issues) == [1, 2] and not issues


def test_operation_takes_every_field_as_the_dataclass_declares_it() -> None:
    """``Operation.__init__`` is written out (a hot path): every slot gets its declared default, and
    every init field can be given by name."""
    record = span(2, "x", 0, 1)
    op = Operation(record)
    for f in dataclasses.fields(Operation):
        value = getattr(op, f.name)  # every slot is set
        if f.name == "span_id":
            assert value == record.span_id
        elif f.default_factory is not dataclasses.MISSING:
            assert value == f.default_factory()
        elif f.name != "record":
            assert value == f.default, f.name
    for f in dataclasses.fields(Operation):
        if f.init and f.name not in ("record", "kind"):
            assert getattr(Operation(record, TOOL, **{f.name: ["v"]}), f.name) == ["v"], f.name
    assert Operation(record=record, kind=TOOL).kind == TOOL
    assert Operation(record).tool_call_ids is not Operation(record).tool_call_ids
