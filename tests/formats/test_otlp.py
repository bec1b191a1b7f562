"""OTLP decoding round-trips real SDK spans through the official exporter's encoder."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.proto")
pytest.importorskip("opentelemetry.exporter.otlp.proto.common")

from google.protobuf import json_format
from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    InMemoryLogRecordExporter,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from otel_agent_eval.formats.otlp import (
    LogRecordData,
    OTLPDecodeError,
    decode_logs_json,
    decode_logs_protobuf,
    decode_traces_json,
    decode_traces_protobuf,
    read_trace_file,
    spans_from_request,
)
from otel_agent_eval.records import SpanRecord, from_readable_span

DATA = Path(__file__).resolve().parents[1] / "data" / "otlp"
REMOTE_TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
REMOTE_PARENT_ID = 0x00F067AA0BA902B7

_ID_FIELDS = {"traceId", "spanId", "parentSpanId"}


# --------------------------------------------------------------------------- helpers


def to_otlp_json(message: Any) -> str:
    """Serialize a request as OTLP/JSON: proto3 JSON with ids as hex instead of base64."""

    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: base64.b64decode(v).hex() if k in _ID_FIELDS and isinstance(v, str) else fix(v)
                for k, v in node.items()
            }
        if isinstance(node, list):
            return [fix(v) for v in node]
        return node

    return json.dumps(fix(json_format.MessageToDict(message)))


def _normalize(value: Any) -> Any:
    # The SDK keeps sequence attributes as tuples; OTLP arrays decode to tuples too.
    if isinstance(value, list):
        return tuple(value)
    return value


def assert_same_record(decoded: SpanRecord, expected: SpanRecord) -> None:
    """Field-by-field comparison with the in-process ``from_readable_span`` copy."""
    assert decoded.trace_id == expected.trace_id
    assert decoded.span_id == expected.span_id
    assert decoded.parent_span_id == expected.parent_span_id
    assert decoded.parent_is_remote == expected.parent_is_remote
    assert decoded.name == expected.name
    assert decoded.start_time_unix_nano == expected.start_time_unix_nano
    assert decoded.end_time_unix_nano == expected.end_time_unix_nano
    assert decoded.status_code == expected.status_code
    assert decoded.status_message == expected.status_message
    assert decoded.kind == expected.kind
    assert decoded.scope_name == expected.scope_name
    assert decoded.resource == expected.resource == {"service.name": "agent-svc"}
    attrs = dict(decoded.attributes)
    assert attrs == {k: _normalize(v) for k, v in expected.attributes.items()}
    assert len(decoded.events) == len(expected.events)
    for got, want in zip(decoded.events, expected.events):
        assert got.name == want.name
        assert got.time_unix_nano == want.time_unix_nano
        assert dict(got.attributes) == {k: _normalize(v) for k, v in want.attributes.items()}


@pytest.fixture
def sdk_spans() -> list[Any]:
    """A small agent-like trace: remote parent -> agent -> chat (events) + failing tool."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent-svc"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test.agent.scope", "1.0")
    remote = SpanContext(
        REMOTE_TRACE_ID,
        REMOTE_PARENT_ID,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    ctx = trace.set_span_in_context(NonRecordingSpan(remote))
    with tracer.start_as_current_span(
        "invoke_agent weather", context=ctx, kind=SpanKind.SERVER
    ) as agent:
        agent.set_attribute("gen_ai.operation.name", "invoke_agent")
        with tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.CLIENT) as chat:
            chat.set_attributes(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.usage.input_tokens": 502,
                    "gen_ai.request.temperature": 0.25,
                    "gen_ai.response.finish_reasons": ["tool_calls"],
                    "gen_ai.stream": False,
                    "gen_ai.input.messages": json.dumps(
                        [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
                    ),
                    "token_ids": [1, 2, 3],
                    "scores": [0.5, 1.5],
                    "flags": [True, False],
                }
            )
            chat.add_event(
                "gen_ai.content.prompt", {"gen_ai.prompt": "hi", "index": 0}, timestamp=123
            )
            chat.add_event("marker")
        with tracer.start_as_current_span("execute_tool get_weather") as tool:
            tool.set_attribute("gen_ai.tool.call.id", "call_1")
            tool.set_status(Status(StatusCode.ERROR, "tool exploded"))
        agent.set_status(Status(StatusCode.OK))
    provider.shutdown()
    spans = list(exporter.get_finished_spans())
    assert len(spans) == 3
    return spans


def _by_id(records: list[SpanRecord]) -> dict[int, SpanRecord]:
    return {r.span_id: r for r in records}


def _check_round_trip(decoded: list[SpanRecord], sdk_spans: list[Any]) -> None:
    got = _by_id(decoded)
    assert len(got) == len(sdk_spans)
    for span in sdk_spans:
        assert_same_record(got[span.context.span_id], from_readable_span(span))


# --------------------------------------------------------------------------- traces


def test_protobuf_round_trip(sdk_spans: list[Any]) -> None:
    data = encode_spans(sdk_spans).SerializeToString()
    _check_round_trip(decode_traces_protobuf(data), sdk_spans)


def test_json_round_trip(sdk_spans: list[Any]) -> None:
    text = to_otlp_json(encode_spans(sdk_spans))
    assert f"{REMOTE_TRACE_ID:032x}" in text  # really hex, as OTLP/JSON requires
    _check_round_trip(decode_traces_json(text), sdk_spans)
    _check_round_trip(decode_traces_json(text.encode()), sdk_spans)


def test_spans_from_request_details(sdk_spans: list[Any]) -> None:
    records = {r.name: r for r in spans_from_request(encode_spans(sdk_spans))}
    agent = records["invoke_agent weather"]
    assert agent.trace_id == REMOTE_TRACE_ID
    assert agent.parent_span_id == REMOTE_PARENT_ID
    assert agent.parent_is_remote and agent.is_local_root
    assert agent.kind == "SERVER" and agent.status_code == "OK"
    chat = records["chat gpt-4o"]
    assert chat.parent_span_id == agent.span_id and not chat.parent_is_remote
    assert chat.kind == "CLIENT"
    assert chat.scope_name == "test.agent.scope"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 502
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert chat.attributes["gen_ai.stream"] is False
    assert chat.events[0].name == "gen_ai.content.prompt"
    assert chat.events[0].time_unix_nano == 123
    assert chat.events[0].attributes == {"gen_ai.prompt": "hi", "index": 0}
    tool = records["execute_tool get_weather"]
    assert tool.is_error and tool.status_message == "tool exploded"
    assert tool.kind == "INTERNAL"


def test_json_enum_ints_and_snake_case_accepted() -> None:
    """OTLP/JSON receivers must accept enum integers; json_format also takes field names."""
    doc = json.loads((DATA / "traces_enum_ints.json").read_text())
    records = decode_traces_json(json.dumps(doc))
    assert len(records) == 1
    (r,) = records
    assert r.kind == "CLIENT"
    assert r.status_code == "ERROR" and r.status_message == "boom"
    assert r.trace_id == 0x5B8EFFF798038103D269B633813FC60C
    assert r.parent_span_id is None
    assert r.resource == {"service.name": "file-svc"}
    assert r.attributes["nested"] == {"a": 1, "b": ("x", 2.5)}
    assert r.attributes["raw"] == "\x01\x02"  # bytes are decoded as UTF-8 text (records.clean)
    assert r.attributes["big"] == 9007199254740993  # int64 written as a JSON string


def test_protobuf_bytes_values_become_text_as_clean_makes_them() -> None:
    """Protobuf records skip ``records.clean``: bytes values, at any depth, are decoded as they are read."""
    req = ExportTraceServiceRequest()
    span = req.resource_spans.add().scope_spans.add().spans.add(trace_id=bytes(range(1, 17)), span_id=bytes(range(1, 9)), name="s")
    span.attributes.add(key="raw").value.bytes_value = b"\x01\x02"
    span.attributes.add(key="bad").value.bytes_value = b"ok \xff"
    nested = span.attributes.add(key="deep").value
    nested.array_value.values.add().kvlist_value.values.add(key="k").value.bytes_value = b"\xfe"
    span.events.add(name="e").attributes.add(key="b").value.bytes_value = b"\x80"
    (r,) = spans_from_request(req)
    assert r.attributes["raw"] == "\x01\x02" and r.attributes["bad"] == "ok \ufffd"
    assert r.attributes["deep"] == ({"k": "\ufffd"},)
    assert r.events[0].attributes == {"b": "\ufffd"}
    checked = SpanRecord(**{f.name: getattr(r, f.name) for f in dataclasses.fields(SpanRecord)})
    assert checked == r  # cleaning it again changes nothing, and every field was set


def test_resource_attributes_stay_out_of_span_attributes() -> None:
    doc = json.loads((DATA / "traces_enum_ints.json").read_text())
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["attributes"].append({"key": "service.name", "value": {"stringValue": "own"}})
    (r,) = decode_traces_json(json.dumps(doc))
    assert r.attributes["service.name"] == "own"
    assert r.resource == {"service.name": "file-svc"}
    assert "telemetry.sdk.language" not in r.attributes  # resource attributes are never merged


def test_remote_flag_needs_has_is_remote_bit(sdk_spans: list[Any]) -> None:
    req = encode_spans(sdk_spans)
    span = next(
        s
        for rs in req.resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
        if s.name == "invoke_agent weather"
    )
    assert span.flags & 0x300 == 0x300
    span.flags = 0x200  # IS_REMOTE without HAS_IS_REMOTE: unknown, so not remote
    records = {r.name: r for r in spans_from_request(req)}
    assert records["invoke_agent weather"].parent_is_remote is False


# --------------------------------------------------------------------------- files


@pytest.fixture
def trace_files(tmp_path: Path, sdk_spans: list[Any]) -> dict[str, Path]:
    """The same spans written in every supported file layout."""
    first, rest = sdk_spans[:1], sdk_spans[1:]
    files = {
        "json": tmp_path / "traces.json",
        "jsonl": tmp_path / "traces.jsonl",
        "pb": tmp_path / "traces.pb",
        "pretty": tmp_path / "pretty.json",
        "noext_pb": tmp_path / "traces_binary",
    }
    files["json"].write_text(to_otlp_json(encode_spans(sdk_spans)))
    files["jsonl"].write_text(
        to_otlp_json(encode_spans(first)) + "\n" + to_otlp_json(encode_spans(rest)) + "\n"
    )
    files["pb"].write_bytes(encode_spans(sdk_spans).SerializeToString())
    files["noext_pb"].write_bytes(encode_spans(sdk_spans).SerializeToString())
    pretty = json.loads(to_otlp_json(encode_spans(sdk_spans)))
    files["pretty"].write_text(json.dumps(pretty, indent=2))
    for key in list(files):
        gz = tmp_path / f"{files[key].name}.gz"
        gz.write_bytes(gzip.compress(files[key].read_bytes()))
        files[f"{key}.gz"] = gz
    return files


@pytest.mark.parametrize(
    "kind",
    ["json", "jsonl", "pb", "pretty", "noext_pb", "json.gz", "jsonl.gz", "pb.gz", "noext_pb.gz"],
)
def test_read_trace_file_formats(
    kind: str, trace_files: dict[str, Path], sdk_spans: list[Any]
) -> None:
    _check_round_trip(read_trace_file(trace_files[kind]), sdk_spans)


def test_read_trace_file_detects_by_content(
    tmp_path: Path, trace_files: dict[str, Path], sdk_spans: list[Any]
) -> None:
    """A misnamed gzip of JSON lines still reads (content wins over extension)."""
    misnamed = tmp_path / "export.data"
    misnamed.write_bytes(trace_files["jsonl.gz"].read_bytes())
    _check_round_trip(read_trace_file(misnamed), sdk_spans)


def test_read_collector_style_file() -> None:
    """A checked-in JSON lines file shaped like the Collector file exporter's output."""
    records = read_trace_file(DATA / "collector_file_exporter.jsonl")
    assert [r.name for r in records] == ["invoke_agent", "chat gpt-4o", "execute_tool lookup"]
    agent, chat, tool = records
    assert chat.parent_span_id == agent.span_id == tool.parent_span_id
    assert agent.resource == {"service.name": "collector-demo"}
    assert chat.resource == agent.resource == tool.resource
    assert tool.attributes["gen_ai.tool.call.id"] == "call_42"
    assert chat.kind == "CLIENT"


def test_read_length_prefixed_protobuf_stream(tmp_path: Path, sdk_spans: list[Any]) -> None:
    chunks = [encode_spans([s]).SerializeToString() for s in sdk_spans]
    path = tmp_path / "stream.bin"
    path.write_bytes(b"".join(len(c).to_bytes(4, "big") + c for c in chunks))
    _check_round_trip(read_trace_file(path), sdk_spans)


def _collector_zstd_files(tmp_path: Path, sdk_spans: list[Any]) -> dict[str, Path]:
    """The Collector file exporter's ``compression: zstd`` (exporter/fileexporter, written as its source writes it,
    with zstd frames from the zstandard library; no Collector build installs here):

    - per message (the default): each encoded request zstd-compressed alone (``marshaller``'s compressor), then
      written length-prefixed (``exportMessageAsBuffer``), JSON as well as protobuf;
    - native compression (feature gate ``exporter.file.nativeCompression``): the file is zstd, JSON lines or
      length-prefixed protobuf within; one frame per write when it rotates files, one stream otherwise.
    """
    import zstandard

    compressor = zstandard.ZstdCompressor()
    requests = [encode_spans([s]) for s in sdk_spans]

    def prefixed(chunks: list[bytes]) -> bytes:
        return b"".join(len(c).to_bytes(4, "big") + c for c in chunks)

    json_lines = [to_otlp_json(r).encode() + b"\n" for r in requests]
    protobufs = [r.SerializeToString() for r in requests]
    contents = {
        "per_message.json": prefixed([compressor.compress(to_otlp_json(r).encode()) for r in requests]),
        "per_message.pb": prefixed([compressor.compress(c) for c in protobufs]),
        "native_stream.jsonl.zst": compressor.compress(b"".join(json_lines)),
        "native_frames.jsonl.zst": b"".join(compressor.compress(line) for line in json_lines),
        "native_frames.pb.zst": b"".join(compressor.compress(prefixed([c])) for c in protobufs),
    }
    files = {}
    for name, data in contents.items():
        files[name] = tmp_path / name
        files[name].write_bytes(data)
    return files


@pytest.mark.parametrize("name", ["per_message.json", "per_message.pb", "native_stream.jsonl.zst",
                                  "native_frames.jsonl.zst", "native_frames.pb.zst"])
def test_read_the_collector_file_exporters_zstd_compression(name: str, tmp_path: Path, sdk_spans: list[Any]) -> None:
    _check_round_trip(read_trace_file(_collector_zstd_files(tmp_path, sdk_spans)[name]), sdk_spans)


@pytest.mark.parametrize(("damage", "match"), [("cut", "truncated zstd"), ("corrupt", "corrupt or truncated zstd")])
def test_damaged_zstd_raises(damage: str, match: str, tmp_path: Path, sdk_spans: list[Any]) -> None:
    """A cut frame gave nothing at all from zstandard's own reader, silently (a one-block frame)."""
    data = bytearray(_collector_zstd_files(tmp_path, sdk_spans)["native_stream.jsonl.zst"].read_bytes())
    if damage == "cut":
        del data[-9:]
    else:
        data[8:16] = b"\xff" * 8
    damaged = tmp_path / f"{damage}.jsonl.zst"
    damaged.write_bytes(bytes(data))
    with pytest.raises(OTLPDecodeError, match=f"{damage}.jsonl.zst.*{match}"):
        read_trace_file(damaged)


def test_empty_file_gives_no_spans(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    assert read_trace_file(path) == []


# --------------------------------------------------------------------------- errors


def _one_span(span_json: str) -> str:
    return '{"resourceSpans": [{"scopeSpans": [{"spans": [' + span_json + "]}]}]}"


def test_truncated_protobuf_raises(sdk_spans: list[Any]) -> None:
    data = encode_spans(sdk_spans).SerializeToString()
    with pytest.raises(OTLPDecodeError, match="ExportTraceServiceRequest"):
        decode_traces_protobuf(data[: len(data) // 2])


def test_truncated_protobuf_file_raises(tmp_path: Path, sdk_spans: list[Any]) -> None:
    data = encode_spans(sdk_spans).SerializeToString()
    path = tmp_path / "cut.pb"
    path.write_bytes(data[:-7])
    with pytest.raises(OTLPDecodeError, match="cut.pb"):
        read_trace_file(path)


def test_bad_jsonl_line_reports_line_number(tmp_path: Path, sdk_spans: list[Any]) -> None:
    good = to_otlp_json(encode_spans(sdk_spans))
    path = tmp_path / "bad.jsonl"
    path.write_text(good + "\n" + good + "\n" + good[:40] + "\n")
    with pytest.raises(OTLPDecodeError, match=r"bad.jsonl line 3"):
        read_trace_file(path)


def test_truncated_gzip_raises(tmp_path: Path, trace_files: dict[str, Path]) -> None:
    path = tmp_path / "cut.json.gz"
    path.write_bytes(trace_files["json.gz"].read_bytes()[:-20])
    with pytest.raises(OTLPDecodeError, match="gzip"):
        read_trace_file(path)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('{"resourceSpans": [', "invalid JSON"),
        ("[1, 2]", "expected a JSON object"),
        (_one_span('{"traceId": "zz"}'), "not a hex"),
        (_one_span('{"startTimeUnixNano": "soon"}'), "startTimeUnixNano"),
        ('{"resourceSpans": {"not": "a list"}}', "ExportTraceServiceRequest"),
        (_one_span('{"traceId": "abcd", "spanId": "00f067aa0ba902b7"}'), "traceId has 2 bytes"),
        (_one_span('{"name": "no ids"}'), "traceId is missing"),
    ],
)
def test_malformed_json_raises(text: str, match: str) -> None:
    with pytest.raises(OTLPDecodeError, match=match):
        decode_traces_json(text)


def test_decode_error_is_value_error() -> None:
    with pytest.raises(ValueError):
        decode_traces_protobuf(b"\xff\xff\xff")


# --------------------------------------------------------------------------- logs


@pytest.fixture
def log_request(sdk_spans: list[Any]) -> Any:
    """Event-only GenAI content: one log correlated to the chat span, one uncorrelated."""
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=Resource.create({"service.name": "agent-svc"}))
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = provider.get_logger("test.genai.events")
    chat = next(s for s in sdk_spans if s.name == "chat gpt-4o")
    ctx = trace.set_span_in_context(NonRecordingSpan(chat.context))
    logger.emit(
        timestamp=1_700_000_000_000_000_001,
        context=ctx,
        severity_number=SeverityNumber.INFO,
        event_name="gen_ai.client.inference.operation.details",
        body={"role": "user", "parts": [{"type": "text", "content": "hi"}]},
        attributes={"gen_ai.operation.name": "chat"},
    )
    logger.emit(
        timestamp=5,
        body="plain body",
        attributes={"event.name": "gen_ai.user.message"},
    )
    provider.shutdown()
    logs = exporter.get_finished_logs()
    assert len(logs) == 2
    return encode_logs(logs), chat


def _check_logs(logs: list[LogRecordData], chat: Any) -> None:
    first, second = logs
    assert first.trace_id == chat.context.trace_id
    assert first.span_id == chat.context.span_id
    assert first.time_unix_nano == 1_700_000_000_000_000_001
    assert first.event_name == "gen_ai.client.inference.operation.details"
    assert first.attributes == {"gen_ai.operation.name": "chat"}
    assert first.body == {"role": "user", "parts": ({"type": "text", "content": "hi"},)}
    assert second.trace_id is None and second.span_id is None
    assert second.event_name == "gen_ai.user.message"  # from the event.name attribute
    assert second.body == "plain body"


def test_logs_protobuf_round_trip(log_request: Any) -> None:
    req, chat = log_request
    _check_logs(decode_logs_protobuf(req.SerializeToString()), chat)


def test_logs_json_round_trip(log_request: Any) -> None:
    req, chat = log_request
    _check_logs(decode_logs_json(to_otlp_json(req)), chat)


def test_logs_malformed_raise() -> None:
    with pytest.raises(OTLPDecodeError):
        decode_logs_protobuf(b"\x0a\x05\x01")
    with pytest.raises(OTLPDecodeError, match="invalid JSON"):
        decode_logs_json("{")
    with pytest.raises(OTLPDecodeError, match="spanId has 3 bytes"):
        decode_logs_json(
            '{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"spanId":"abcdef"}]}]}]}'
        )


def test_logs_json_file_data() -> None:
    logs = decode_logs_json((DATA / "logs_event_only.json").read_text())
    assert [log.event_name for log in logs] == ["gen_ai.client.inference.operation.details"]
    (log,) = logs
    assert log.trace_id == 0x5B8EFFF798038103D269B633813FC60C
    assert log.span_id == 0xEEE19B7EC3C1B174
    assert log.attributes["gen_ai.input.messages"].startswith("[")
