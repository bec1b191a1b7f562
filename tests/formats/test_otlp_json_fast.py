"""The quick paths of the OTLP/JSON reader give what its checked walk gives, for any input.

Attribute lists are read in one comprehension and ids, parent ids and int64 times in one go;
anything unusual is read again by the checked code (which says what is wrong and where).
These tests hold the two to the same answers, malformed input included.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_agent_eval.formats import otlp_json
from otel_agent_eval.formats.otlp import OTLPDecodeError, decode_traces_json
from otel_agent_eval.records import SpanEvent, SpanRecord, unchecked_span_event, unchecked_span_record

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=6),
                         st.sampled_from(["12", "-7", "٣", "²", "1_0", " 5", "x"]))
any_values = st.recursive(
    st.one_of(
        st.builds(lambda v: {"stringValue": v}, st.one_of(st.text(max_size=6), st.none())),
        st.builds(lambda v: {"intValue": v}, json_scalars),
        st.builds(lambda v: {"boolValue": v}, st.booleans()),
        st.builds(lambda v: {"doubleValue": v}, st.sampled_from([1.5, "NaN", "-Infinity", "2", 3])),
        st.just({}), st.just({"unknownValue": 1}), json_scalars,
    ),
    lambda inner: st.one_of(
        st.builds(lambda vs: {"arrayValue": {"values": vs}}, st.lists(inner, max_size=3)),
        st.builds(lambda kvs: {"kvlistValue": {"values": kvs}}, st.lists(st.builds(lambda k, v: {"key": k, "value": v},
                                                                                   st.text(max_size=3), inner), max_size=3)),
        st.builds(lambda a, b: {"stringValue": a, "intValue": b}, st.text(max_size=3), json_scalars),  # not a oneof
    ),
    max_leaves=6,
)
key_values = st.one_of(
    st.builds(lambda k, v: {"key": k, "value": v}, st.text(max_size=6), any_values),
    st.builds(lambda v: {"value": v}, any_values),  # proto3 JSON leaves out a default (empty) key
    st.builds(lambda k: {"key": k}, st.text(max_size=3)),
    st.builds(lambda k, v: {"key": k, "value": v}, json_scalars, any_values),  # a key that is not a string
    json_scalars, st.lists(st.integers(), max_size=2),
)


def _outcome(read: Any, items: Any) -> Any:
    try:
        return ("value", read(items, "where"))
    except OTLPDecodeError as exc:
        return ("error", str(exc))


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, default=repr, sort_keys=True) == json.dumps(b, default=repr, sort_keys=True)  # NaN == NaN


@settings(max_examples=400, deadline=None)
@given(st.lists(key_values, max_size=6))
def test_attributes_read_in_one_go_as_the_checked_walk_reads_them(items: list[Any]) -> None:
    assert _same(_outcome(otlp_json.attributes, items), _outcome(otlp_json._checked_attributes, items))


def _doc(span: dict[str, Any]) -> str:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"scope": {"name": "s"}, "spans": [span]}]}]})


BASE = {"traceId": "00000000000000000102030405060708", "spanId": "0000000000000009", "name": "n",
        "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": 1700000000000000005}


def test_ids_with_leading_zero_bytes_and_times_as_strings_or_numbers() -> None:
    (record,) = decode_traces_json(_doc({**BASE, "parentSpanId": "000000000000000a"}))
    assert (record.trace_id, record.span_id, record.parent_span_id) == (0x0102030405060708, 9, 10)
    assert (record.start_time_unix_nano, record.end_time_unix_nano) == (1700000000000000000, 1700000000000000005)


@pytest.mark.parametrize(("parent", "expected"), [("", None), ("0000000000000000", None), (None, None), ("00000000000000ff", 255)])
def test_absent_or_all_zero_parent_is_no_parent(parent: str | None, expected: int | None) -> None:
    span = {**BASE, "parentSpanId": parent} if parent is not None else dict(BASE)
    assert decode_traces_json(_doc(span))[0].parent_span_id == expected


def test_snake_case_parent_is_read() -> None:
    assert decode_traces_json(_doc({**BASE, "parent_span_id": "000000000000000b"}))[0].parent_span_id == 11


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"parentSpanId": "0b0b 0b0b 0b0b0b"}, r"spans\[0\].parentSpanId has 7 bytes"),  # 16 characters
        ({"parentSpanId": "0b"}, r"parentSpanId has 1 bytes, expected 8"),
        ({"parentSpanId": "zz00000000000000"}, r"parentSpanId: 'zz00000000000000' is not a hex string"),
        ({"spanId": "0b0b 0b0b 0b0b0b"}, r"spanId has 7 bytes"),
        ({"endTimeUnixNano": "later"}, r"endTimeUnixNano: 'later' is not an integer"),
        ({"startTimeUnixNano": 1.5}, r"startTimeUnixNano: 1.5 is not an integer"),
        ({"attributes": [{"key": 5, "value": {"stringValue": "x"}}]}, r"spans\[0\]: an attribute key is not a string"),
        ({"attributes": [{"key": "k", "value": {"intValue": "²"}}]}, r"spans\[0\]\[k\]: '²' is not an integer"),
    ],
)
def test_unusual_spans_take_the_checked_path_and_say_where(change: dict[str, Any], match: str) -> None:
    with pytest.raises(OTLPDecodeError, match=match):
        decode_traces_json(_doc({**BASE, **change}))


def test_unchecked_records_are_genuine_frozen_records() -> None:
    fields = dict(trace_id=1, span_id=2, parent_span_id=None, name="n", start_time_unix_nano=3, end_time_unix_nano=4,
                  attributes={"a": 1}, events=(unchecked_span_event("e", 5, {"b": "c"}),), status_code="ERROR",
                  status_message="m", kind="CLIENT", scope_name="s", parent_is_remote=True, resource={"service.name": "x"})
    record = unchecked_span_record(**fields)
    assert type(record) is SpanRecord and type(record.events[0]) is SpanEvent
    assert record == SpanRecord(**{**fields, "events": (SpanEvent("e", 5, {"b": "c"}),)})
    assert dataclasses.asdict(record)["events"] == ({"name": "e", "time_unix_nano": 5, "attributes": {"b": "c"}},)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.name = "other"  # type: ignore[misc]
