"""The quick paths of the OTLP/JSON reader give what its checked walk gives, for any input.

Attribute lists are read in one comprehension and ids, parent ids and int64 times in one go;
anything unusual is read again by the checked code (which says what is wrong and where).
These tests hold the two to the same answers, malformed input included.
"""

from __future__ import annotations

import base64
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
@given(st.lists(key_values, max_size=6), st.booleans())
def test_attributes_read_in_one_go_as_the_checked_walk_reads_them(items: list[Any], text: bool) -> None:
    assert _same(_outcome(lambda i, w: otlp_json.attributes(i, w, text), items),
                 _outcome(lambda i, w: otlp_json._checked_attributes(i, w, text), items))


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
        ({"parentSpanId": "zz00000000000000"}, r"parentSpanId: 'zz00000000000000' is not a hex string$"),
        ({"traceId": "AAECAwQFBgcICQoLDA0ODw=="}, r"traceId: .* is not a hex string \(base64, as protobuf's MessageToJson"),
        ({"spanId": "AAECAwQFBgc="}, r"spanId: .* is not a hex string \(base64"),
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


def _bytes_value(raw: bytes) -> dict[str, Any]:
    return {"bytesValue": base64.b64encode(raw).decode()}


def test_bytes_values_of_spans_are_the_text_records_clean_makes() -> None:
    """Span and event attributes hold bytes values as ``records.clean`` would make them (the protobuf
    reader does the same), at any depth, so records from orjson's text skip ``clean``; log records keep bytes."""
    value = {"kvlistValue": {"values": [{"key": "b", "value": {"arrayValue": {"values": [_bytes_value(b"\xffA\xc3")]}}}]}}
    attributes = [{"key": "raw", "value": _bytes_value(b"caf\xc3\xa9")}, {"key": "deep", "value": value}]
    (record,) = decode_traces_json(_doc({**BASE, "attributes": attributes, "events": [{"name": "e", "attributes": attributes}]}))
    checked = SpanRecord(**{**{f: getattr(record, f) for f in SpanRecord.__slots__},  # type: ignore[attr-defined]
                            "attributes": otlp_json.attributes(attributes, "")})
    assert record.attributes == {"raw": "café", "deep": {"b": ("\ufffdA\ufffd",)}} == checked.attributes
    assert record.events[0].attributes == record.attributes
    logs = otlp_json.log_records({"resourceLogs": [{"scopeLogs": [{"logRecords": [{"attributes": attributes}]}]}]}, "x")
    assert next(logs).attributes["raw"] == b"caf\xc3\xa9"


def _resource_doc(resource: list[dict[str, Any]]) -> str:
    return json.dumps({"resourceSpans": [{"resource": {"attributes": resource},
                                          "scopeSpans": [{"scope": {"name": "s"}, "spans": [BASE]}]}]})


def test_an_unchanged_resource_is_read_once_and_shared() -> None:
    """An exporter sends its resource with every request: the same attribute list gives the same mapping;
    any change, even of a value's type, is read again (``1 == True`` in Python, not in OTLP)."""
    service = [{"key": "service.name", "value": {"stringValue": "svc"}}, {"key": "telemetry.sdk.language", "value": {"stringValue": "python"}}]
    first, second = (decode_traces_json(_resource_doc(service))[0] for _ in range(2))
    assert first.resource is second.resource and dict(first.resource) == {"service.name": "svc"}
    other = decode_traces_json(_resource_doc([{"key": "service.name", "value": {"stringValue": "other"}}]))[0]
    assert dict(other.resource) == {"service.name": "other"}
    versioned = [*service, {"key": "service.version", "value": {"intValue": 1}}]
    assert decode_traces_json(_resource_doc(versioned))[0].resource["service.version"] == 1
    assert decode_traces_json(_resource_doc(versioned))[0].resource["service.version"] == 1
    with pytest.raises(OTLPDecodeError, match="True is not an integer"):
        decode_traces_json(_resource_doc([*service, {"key": "service.version", "value": {"intValue": True}}]))


ids = st.sampled_from(["0102030405060708090a0b0c0d0e0f10", "0102030405060708090A0B0C0D0E0F10", "00" * 16, "00" * 8,
                       "0102 0304 0506 0708 090a 0b0c 0d0e 0f10", "0000000000000009", "00000000000000FF", "0b0b 0b0b 0b0b0b0b",
                       "0b0b 0b0b 0b0b0b", "zz" * 8, "", 7, None, [1]])
"""Texts that are a valid trace id, span id, either or neither: any of them in any id field of any span."""
spans_with_shared_ids = st.builds(
    lambda *parts: {**BASE, **{k: v for part in parts for k, v in part.items()}},
    *(st.one_of(st.just({}), st.builds(lambda v, k=key: {k: v}, ids), st.builds(lambda v, k=key: {k: v}, ids))
      for key in ("traceId", "spanId", "parentSpanId", "parent_span_id")))


def _spans_outcome(read: Any) -> Any:
    try:
        return ("value", [(record, type(record.parent_span_id)) for record in read()])
    except OTLPDecodeError as exc:
        return ("error", str(exc))


@settings(max_examples=400, deadline=None)
@given(st.lists(spans_with_shared_ids, min_size=1, max_size=8), st.booleans())
def test_ids_read_once_per_document_are_read_as_each_span_alone_reads_them(spans: list[Any], clean: bool) -> None:
    """``spans()`` keeps the document's trace and parent ids read so far (the spans of a trace share its
    id, siblings their parent's): each record, or the first error, is what the span read alone gives."""
    doc = {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "s"}, "spans": spans}]}]}
    make = (unchecked_span_record, unchecked_span_event) if clean else (SpanRecord, SpanEvent)

    def alone() -> list[SpanRecord]:
        out = []
        for p, span in enumerate(spans):
            try:
                out.append(otlp_json._span(span, "s", otlp_json.NO_RESOURCE, *make))  # fresh id tables each span
            except OTLPDecodeError as exc:
                raise OTLPDecodeError(f"x: resourceSpans[0].scopeSpans[0].spans[{p}]{exc}") from None
        return out

    assert _spans_outcome(lambda: otlp_json.spans(doc, "x", clean_text=clean)) == _spans_outcome(alone)
