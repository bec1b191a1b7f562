"""OTLP/JSON read directly: the same records as the protobuf path, for any attribute value."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("opentelemetry.proto")
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from otel_agent_eval.formats.otlp import OTLPDecodeError, decode_traces_json, spans_from_request
from tests.formats.test_otlp import to_otlp_json

scalars = st.one_of(
    st.text(max_size=20).map(lambda v: AnyValue(string_value=v)),
    st.booleans().map(lambda v: AnyValue(bool_value=v)),
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(lambda v: AnyValue(int_value=v)),
    st.floats(allow_nan=False).map(lambda v: AnyValue(double_value=v)),
    st.binary(max_size=8).map(lambda v: AnyValue(bytes_value=v)),
)


def _array(values: list[AnyValue]) -> AnyValue:
    value = AnyValue()
    value.array_value.values.extend(values)
    return value


def _kvlist(items: dict[str, AnyValue]) -> AnyValue:
    value = AnyValue()
    value.kvlist_value.values.extend(KeyValue(key=k, value=v) for k, v in items.items())
    return value


values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3).map(_array), st.dictionaries(st.text(max_size=5), inner, max_size=3).map(_kvlist)
), max_leaves=8)


def request(attributes: dict[str, AnyValue], kind: int, status: int, flags: int) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    resource_spans = req.resource_spans.add()
    resource_spans.resource.attributes.add(key="service.name", value=AnyValue(string_value="svc"))
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name = "scope"
    span = scope_spans.spans.add(trace_id=bytes(range(1, 17)), span_id=bytes(range(1, 9)), parent_span_id=bytes(range(2, 10)),
                                 name="span", kind=kind, start_time_unix_nano=2**62, end_time_unix_nano=2**62 + 5, flags=flags)
    span.status.code = status
    span.status.message = "m"
    span.attributes.extend(KeyValue(key=k, value=v) for k, v in attributes.items())
    event = span.events.add(name="e", time_unix_nano=7)
    event.attributes.extend(KeyValue(key=k, value=v) for k, v in attributes.items())
    return req


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=8), values, max_size=5), st.integers(0, 5), st.integers(0, 2),
       st.sampled_from([0, 0x100, 0x300]))
def test_json_and_protobuf_decode_to_the_same_records(attributes: dict[str, AnyValue], kind: int, status: int, flags: int) -> None:
    req = request(attributes, kind, status, flags)
    assert decode_traces_json(to_otlp_json(req)) == spans_from_request(req)


def test_int64_as_numbers_and_strings_and_special_doubles() -> None:
    req = request({"n": AnyValue(int_value=5), "d": AnyValue(double_value=1.5)}, 1, 0, 0)
    doc = json.loads(to_otlp_json(req))
    span: dict[str, Any] = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["startTimeUnixNano"] = int(span["startTimeUnixNano"])  # numbers are valid too
    span["attributes"] = [{"key": "n", "value": {"intValue": 5}}, {"key": "inf", "value": {"doubleValue": "Infinity"}}]
    (record,) = decode_traces_json(json.dumps(doc))
    assert record.start_time_unix_nano == 2**62 and record.attributes["n"] == 5
    assert record.attributes["inf"] == float("inf")
    span["startTimeUnixNano"] = "soon"
    with pytest.raises(OTLPDecodeError, match=r"spans\[0\].startTimeUnixNano: 'soon' is not an integer"):
        decode_traces_json(json.dumps(doc))
