"""The C decoder of OTLP trace and log requests (``formats/_otlp_native.c``) gives what upb's reading gives.

Its contract: for any bytes, either the records the upb path makes, or None (it declines, and the
upb path answers, records or its error). These tests hold it to that on real exports (the Python
SDK's and the JavaScript SDK's encoders), on generated requests of every field and value type, and
on thousands of damaged bodies; records are compared by ``repr``, so ``True`` is not ``1`` and
``1.0`` is not ``1``.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tracemalloc
from base64 import b64decode
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_agent_eval.cli.demo import SCENARIOS
from otel_agent_eval.formats import otlp
from otel_agent_eval.formats.otlp import OTLPDecodeError, decode_logs_protobuf, decode_traces_protobuf
from otel_agent_eval.sinks.otlp_wire import varint

JS = Path(__file__).resolve().parents[1] / "js"


@pytest.fixture(scope="module")
def native() -> Any:
    """The built C decoder; CI (``CI=true``) must have built it, a user without a compiler gets a skip."""
    if otlp._NATIVE is None:
        why = (f"the C decoder is off ({otlp.PURE_PYTHON_ENV} is set)" if os.environ.get(otlp.PURE_PYTHON_ENV)
               else "the C decoder was not built (no C compiler when the package was installed?)")
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return otlp._NATIVE


def upb(body: bytes) -> list[Any]:
    return otlp.spans_from_request(otlp._parse_protobuf(body, "traces", "ExportTraceServiceRequest"))


def upb_logs(body: bytes) -> list[Any]:
    return otlp.log_records_from_request(otlp._parse_protobuf(body, "logs", "ExportLogsServiceRequest"))


def assert_read_alike(native: Any, body: bytes, logs: bool = False) -> None:
    """The C decoder reads ``body`` (does not decline it) and makes exactly upb's records."""
    records = (native.decode_logs if logs else native.decode_spans)(body)
    assert records is not None, "declined a request upb reads"
    assert [repr(r) for r in records] == [repr(r) for r in (upb_logs if logs else upb)(body)]


def demo_request() -> bytes:
    """Every demo scenario, run by the real SDK under an HTTP root, as the Python OTLP exporter encodes it."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("native-test")
    for scenario in SCENARIOS:
        with tracer.start_as_current_span("POST /agent"):
            scenario.agent.run(tracer, scenario.task, scenario.turns)
    provider.shutdown()
    return encode_spans(exporter.get_finished_spans()).SerializeToString()


def test_the_python_exporters_request_read_alike(native: Any) -> None:
    body = demo_request()
    assert_read_alike(native, body)
    assert len(native.decode_spans(body)) > 50


def test_the_javascript_exporters_request_read_alike(native: Any) -> None:
    node = shutil.which("node")
    if node is None or not (JS / "node_modules" / "@opentelemetry" / "otlp-transformer").is_dir():
        why = "node and `npm ci --prefix tests/js` are needed for the JavaScript SDK's encoder"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    done = subprocess.run([node, str(JS / "encode_spans.mjs")], capture_output=True, text=True, timeout=60, check=True)
    body = b64decode(done.stdout)
    assert_read_alike(native, body)
    records = {r.name: r for r in native.decode_spans(body)}
    assert records["chat gpt"].attributes["gen_ai.response.finish_reasons"] == ("tool_calls", "stop")
    assert records["chat gpt"].attributes["gen_ai.usage.output_tokens"] == -3
    assert records["invoke_agent planner"].attributes["héllo.wörld"] == "ünïcode ✓ 🚀"
    assert records["execute_tool search"].status_message == "timeout"
    assert records["execute_tool search"].events[0].name == "exception"
    assert dict(records["chat gpt"].resource) == {"service.name": "js-agent", "deployment.environment.name": "test"}


# --------------------------------------------------------------------------- generated requests

scalars = st.one_of(
    st.builds(lambda v: AnyValue(string_value=v), st.text(max_size=8)),
    st.builds(lambda v: AnyValue(bool_value=v), st.booleans()),
    st.builds(lambda v: AnyValue(int_value=v), st.integers(-(2**63), 2**63 - 1)),
    st.builds(lambda v: AnyValue(double_value=v), st.floats(allow_nan=True)),
    st.builds(lambda v: AnyValue(bytes_value=v), st.binary(max_size=6)),
    st.just(AnyValue()),
)
any_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.builds(lambda vs: AnyValue(array_value=ArrayValue(values=vs)), st.lists(inner, max_size=3)),
        st.builds(lambda kvs: AnyValue(kvlist_value=KeyValueList(values=kvs)),
                  st.lists(st.builds(lambda k, v: KeyValue(key=k, value=v), st.text(max_size=3), inner), max_size=3)),
    ),
    max_leaves=8,
)
key_values = st.lists(st.builds(lambda k, v: KeyValue(key=k, value=v),
                                st.sampled_from(["gen_ai.operation.name", "k", "", "ключ"]) | st.text(max_size=4),
                                any_values), max_size=5)
ids = st.binary(min_size=8, max_size=8).filter(any)


@st.composite
def spans(draw: Any) -> Span:
    span = Span(
        trace_id=draw(st.binary(min_size=16, max_size=16).filter(any)), span_id=draw(ids),
        parent_span_id=draw(st.one_of(st.just(b""), ids, st.just(bytes(8)))), name=draw(st.text(max_size=6)),
        kind=draw(st.integers(0, 7)), start_time_unix_nano=draw(st.integers(0, 2**64 - 1)),
        end_time_unix_nano=draw(st.integers(0, 2**64 - 1) | st.just(0)), attributes=draw(key_values),
        dropped_attributes_count=draw(st.integers(0, 2**32 - 1)), dropped_events_count=draw(st.integers(0, 9)),
        flags=draw(st.sampled_from([0, 0x100, 0x300, 0x301, 0x200])), trace_state=draw(st.text(max_size=4)),
    )
    for _ in range(draw(st.integers(0, 2))):
        span.events.add(time_unix_nano=draw(st.integers(0, 2**64 - 1)), name=draw(st.text(max_size=4)),
                        attributes=draw(key_values), dropped_attributes_count=draw(st.integers(0, 3)))
    for _ in range(draw(st.integers(0, 1))):
        span.links.add(trace_id=draw(st.binary(max_size=16)), span_id=draw(st.binary(max_size=8)),
                       trace_state=draw(st.text(max_size=4)), attributes=draw(key_values), flags=draw(st.integers(0, 9)))
    if draw(st.booleans()):
        span.status.CopyFrom(Status(code=draw(st.integers(0, 5)), message=draw(st.text(max_size=5))))
    return span


@st.composite
def requests(draw: Any) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(0, 2))):
        resource_spans = request.resource_spans.add(schema_url=draw(st.text(max_size=3)))
        if draw(st.booleans()):
            resource_spans.resource.attributes.extend(draw(key_values) + [
                KeyValue(key="service.name", value=draw(scalars))])
        for _ in range(draw(st.integers(0, 2))):
            scope_spans = resource_spans.scope_spans.add()
            if draw(st.booleans()):
                scope_spans.scope.name = draw(st.text(max_size=5))
                scope_spans.scope.version = draw(st.text(max_size=3))
                scope_spans.scope.attributes.extend(draw(key_values))
            scope_spans.spans.extend(draw(st.lists(spans(), max_size=3)))
    return request


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_generated_requests_read_alike(native: Any, request: ExportTraceServiceRequest) -> None:
    assert_read_alike(native, request.SerializeToString())


def field(number: int, wire: int, payload: bytes) -> bytes:
    """One protobuf field: its key, then the payload (a length-delimited one given its length here)."""
    return varint(number << 3 | wire) + (varint(len(payload)) + payload if wire == 2 else payload)


def one_span(span_bytes: bytes, scope: bytes = b"", resource: bytes = b"", scope_last: bool = False) -> bytes:
    scope_spans = field(2, 2, span_bytes) + field(1, 2, scope) if scope_last else field(1, 2, scope) + field(2, 2, span_bytes)
    return field(1, 2, field(2, 2, scope_spans) + field(1, 2, resource))  # the resource after its spans


SPAN = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="chat").SerializeToString()


def test_fields_in_any_order_are_read(native: Any) -> None:
    """Protobuf allows any field order: a scope or a resource after its spans is still theirs."""
    scope = field(1, 2, b"my.scope")
    resource = field(1, 2, KeyValue(key="service.name", value=AnyValue(string_value="svc")).SerializeToString())
    body = one_span(field(5, 2, b"late name") + SPAN, scope, resource, scope_last=True)
    assert_read_alike(native, body)
    (record,) = native.decode_spans(body)
    assert (record.name, record.scope_name, dict(record.resource)) == ("chat", "my.scope", {"service.name": "svc"})


@pytest.mark.parametrize(("extra", "upb_refuses"), [
    (field(99, 2, b"x"), False),  # an unknown field
    (field(5, 0, b"\x01"), False),  # a known field with another wire type
    (field(15, 2, b"") + field(15, 2, field(3, 0, b"\x02")), False),  # a singular message twice (merged)
    (field(3, 2, b"\xff"), True),  # trace_state not UTF-8
    (field(5, 2, b"\xed\xa0\x80"), True),  # a name holding a UTF-16 surrogate
    (field(9, 2, field(1, 2, b"k") + field(2, 2, field(3, 0, b"\x01")) + field(3, 0, b"\x01")), False),  # key_strindex
    (field(9, 2, field(2, 2, field(8, 0, b"\x01"))), False),  # string_value_strindex
    (b"\x0b", True),  # a group's start
])
def test_what_it_declines_upb_answers(native: Any, extra: bytes, upb_refuses: bool) -> None:
    body = one_span(SPAN + extra)
    assert native.decode_spans(body) is None
    if upb_refuses:
        with pytest.raises(OTLPDecodeError):
            decode_traces_protobuf(body)
    else:
        assert [repr(r) for r in decode_traces_protobuf(body)] == [repr(r) for r in upb(body)]


@pytest.mark.parametrize(("span", "error"), [
    (Span(trace_id=b"\x01" * 15, span_id=b"\x02" * 8), "traceId has 15 bytes"),
    (Span(trace_id=bytes(16), span_id=b"\x02" * 8), "traceId is missing"),
    (Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, parent_span_id=b"\x03"), "parentSpanId has 1 bytes"),
])
def test_an_id_of_the_wrong_size_is_upbs_error_with_its_place(native: Any, span: Span, error: str) -> None:
    body = one_span(span.SerializeToString())
    assert native.decode_spans(body) is None
    with pytest.raises(OTLPDecodeError, match=r"resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[0\]\." + error):
        decode_traces_protobuf(body)


def demo_logs_request() -> bytes:
    """GenAI content as log records, as event-only instrumentations emit them through the real SDK: correlated to
    a span or not, the event name as the field or as the older attribute, structured and plain bodies."""
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=Resource.create({"service.name": "agent-svc", "bytes": b"\xff"}))
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = provider.get_logger("genai.events", "1.0")
    tracer = TracerProvider().get_tracer("t")
    for turn in range(20):
        with tracer.start_as_current_span("chat") as span:
            logger.emit(timestamp=1_700_000_000_000_000_000 + turn, context=trace.set_span_in_context(span),
                        severity_number=SeverityNumber.INFO, event_name="gen_ai.client.inference.operation.details",
                        body={"role": "user", "parts": [{"type": "text", "content": f"turn {turn} ✓"}], "n": turn,
                              "ok": True, "score": 0.5, "raw": b"\x00\xff"},
                        attributes={"gen_ai.operation.name": "chat", "ids": [1, 2], "blob": b"\xfe"})
        logger.emit(observed_timestamp=5 + turn, body=f"plain {turn}",
                    attributes={"event.name": "gen_ai.user.message" if turn % 2 else 7})
    provider.shutdown()
    return encode_logs(exporter.get_finished_logs()).SerializeToString()


def test_the_python_sdks_log_request_read_alike(native: Any) -> None:
    body = demo_logs_request()
    assert_read_alike(native, body, logs=True)
    records = native.decode_logs(body)
    assert len(records) == 40
    assert records[0].body["raw"] == b"\x00\xff" and records[0].attributes["blob"] == b"\xfe"  # logs keep bytes
    assert records[1].event_name == "7" and records[3].event_name == "gen_ai.user.message"
    assert records[1].time_unix_nano == 5 and records[1].trace_id is None


log_records = st.builds(
    lambda time, observed, severity, body, attributes, trace_id, span_id, name, flags: LogRecord(
        time_unix_nano=time, observed_time_unix_nano=observed, severity_number=severity, severity_text="INFO",
        **({"body": body} if body is not None else {}), attributes=attributes, trace_id=trace_id, span_id=span_id,
        event_name=name, flags=flags),
    st.integers(0, 2**64 - 1) | st.just(0), st.integers(0, 2**64 - 1), st.integers(0, 24), st.none() | any_values,
    key_values, st.just(b"") | st.binary(min_size=16, max_size=16), st.just(b"") | st.binary(min_size=8, max_size=8),
    st.sampled_from(["", "gen_ai.choice"]) | st.text(max_size=4), st.integers(0, 2**32 - 1),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(log_records, max_size=3), max_size=3))
def test_generated_log_requests_read_alike(native: Any, scopes: list[list[LogRecord]]) -> None:
    request = ExportLogsServiceRequest()
    resource_logs = request.resource_logs.add()
    for records in scopes:
        resource_logs.scope_logs.add().log_records.extend(records)
    assert_read_alike(native, request.SerializeToString(), logs=True)


def test_a_log_id_of_the_wrong_size_is_upbs_error(native: Any) -> None:
    body = field(1, 2, field(2, 2, field(2, 2, LogRecord(trace_id=b"\x01" * 3).SerializeToString())))
    assert native.decode_logs(body) is None
    with pytest.raises(OTLPDecodeError, match=r"logRecords\[0\]\.traceId has 3 bytes"):
        decode_logs_protobuf(body)


@pytest.mark.parametrize("signal", ["traces", "logs"])
def test_damaged_bodies_are_read_alike_or_declined(native: Any, signal: str) -> None:
    """Bytes flipped, cut, repeated or inserted: whatever the C decoder reads, upb reads the same."""
    clean = demo_request() if signal == "traces" else demo_logs_request()
    decode, reference = (native.decode_spans, upb) if signal == "traces" else (native.decode_logs, upb_logs)
    rng = random.Random(1729)
    read = declined = 0
    for _ in range(3000):
        body = bytearray(clean)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(body))
            action = rng.randrange(4)
            if action == 0:
                body[at] = rng.randrange(256)
            elif action == 1:
                del body[at:at + rng.randint(1, 40)]
            elif action == 2:
                body[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
            else:
                body = body[:at]
        records = decode(bytes(body))
        if records is None:
            declined += 1
            continue
        read += 1
        assert [repr(r) for r in records] == [repr(r) for r in reference(bytes(body))]
    assert read > 100 and declined > 100  # both outcomes were exercised


def test_declining_leaks_nothing(native: Any) -> None:
    """Every way out frees what it made: decoding damaged bodies over and over holds no memory."""
    bodies = []
    for clean in (demo_request(), demo_logs_request()):
        bodies += [clean[:cut] for cut in range(100, len(clean), max(1, len(clean) // 300))]
        bodies += [clean[:at] + b"\xff" + clean[at + 1:] for at in range(0, len(clean), max(1, len(clean) // 300))]

    def round_() -> None:
        for body in bodies:
            native.decode_spans(body)
            native.decode_logs(body)

    round_()
    tracemalloc.start()
    try:
        round_()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(5):
            round_()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, f"{grown} bytes held after decoding {5 * len(bodies)} bodies"


def test_the_pure_python_switch(tmp_path: Path) -> None:
    """``OTEL_AGENT_EVAL_PURE_PYTHON=true`` turns the C decoder off; a value that is not a boolean stops
    the import with an error naming the variable."""
    code = "from otel_agent_eval.formats import otlp; print(otlp._NATIVE is None)"
    env = dict(os.environ, OTEL_AGENT_EVAL_PURE_PYTHON="true")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "True"
    env["OTEL_AGENT_EVAL_PURE_PYTHON"] = "yes please"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0
    assert "OTEL_AGENT_EVAL_PURE_PYTHON='yes please': expected true or false" in done.stderr


def test_any_bytes_like_body_is_read(native: Any) -> None:
    """bytes, bytearray and memoryview are read in C; what is not contiguous bytes is left to the upb path."""
    body = demo_request()
    expected = [repr(r) for r in upb(body)]
    for bytes_like in (bytearray(body), memoryview(body)):
        assert [repr(r) for r in native.decode_spans(bytes_like)] == expected
    strided = memoryview(bytes(b for pair in zip(body, body) for b in pair))[::2]
    assert native.decode_spans(strided) is None
    assert [repr(r) for r in decode_traces_protobuf(strided)] == expected


def test_many_attribute_names_pass_through_the_bounded_name_cache(native: Any) -> None:
    """More names than the decoder's cache holds (1 024 slots), some long, some not ASCII: each read as it is."""
    names = [f"attr.{n}" for n in range(5000)] + ["x" * 200, "ключ", "gen_ai.operation.name"]
    span = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8,
                attributes=[KeyValue(key=name, value=AnyValue(int_value=n)) for n, name in enumerate(names)])
    body = one_span(span.SerializeToString())
    for _ in range(2):  # the second time through a cache the first filled
        assert_read_alike(native, body)
    assert list(native.decode_spans(body)[0].attributes) == names
