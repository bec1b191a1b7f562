"""Decode OTLP trace and log data (protobuf, OTLP/JSON, files) into pipeline records.

Protobuf goes through the generated ``opentelemetry-proto`` classes (the upb runtime);
OTLP/JSON is read straight from the parsed document by ``otlp_json``.
Malformed input always surfaces as ``OTLPDecodeError`` so callers (CLI, server) can report
it without knowing about protobuf exceptions.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterable, Mapping
from os import PathLike
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, SpanFlags, Status

from . import otlp_json
from .otlp_json import OTLPDecodeError
from .metadata import resource_metadata
from .records import STATUS_ERROR, STATUS_OK, STATUS_UNSET, LogRecordData, SpanEvent, SpanRecord

__all__ = [
    "LogRecordData",
    "OTLPDecodeError",
    "any_value_to_python",
    "attributes_to_dict",
    "decode_logs_json",
    "decode_logs_protobuf",
    "decode_traces_json",
    "decode_traces_protobuf",
    "log_records_from_request",
    "read_trace_file",
    "spans_from_request",
]


_KIND_NAMES = {
    Span.SPAN_KIND_UNSPECIFIED: "INTERNAL",
    Span.SPAN_KIND_INTERNAL: "INTERNAL",
    Span.SPAN_KIND_SERVER: "SERVER",
    Span.SPAN_KIND_CLIENT: "CLIENT",
    Span.SPAN_KIND_PRODUCER: "PRODUCER",
    Span.SPAN_KIND_CONSUMER: "CONSUMER",
}
_STATUS_NAMES = {
    Status.STATUS_CODE_UNSET: STATUS_UNSET,
    Status.STATUS_CODE_OK: STATUS_OK,
    Status.STATUS_CODE_ERROR: STATUS_ERROR,
}
_HAS_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
_GZIP_MAGIC = b"\x1f\x8b"


# --------------------------------------------------------------------------- values


def any_value_to_python(value: AnyValue) -> Any:
    """Map an OTLP ``AnyValue`` to a plain Python value.

    Arrays become tuples (as the SDK stores sequence attributes), kvlists dicts;
    an empty AnyValue becomes None.
    """
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        return value.double_value
    if kind == "array_value":
        return tuple(any_value_to_python(v) for v in value.array_value.values)
    if kind == "kvlist_value":
        return attributes_to_dict(value.kvlist_value.values)
    if kind == "bytes_value":
        return value.bytes_value
    # None, or string_value_strindex (profiles only; meaningless without its dictionary)
    return None


def attributes_to_dict(attributes: Iterable[KeyValue]) -> dict[str, Any]:
    """Turn repeated ``KeyValue`` into a dict (a later duplicate key wins)."""
    return {kv.key: any_value_to_python(kv.value) for kv in attributes}


def _optional_id(raw: bytes, size: int, what: str) -> int | None:
    """Id bytes to int; empty or all-zero (the OTLP "no id") gives None."""
    if not raw:
        return None
    if len(raw) != size:
        raise OTLPDecodeError(f"{what} has {len(raw)} bytes, expected {size}")
    return int.from_bytes(raw, "big") or None


def _required_id(raw: bytes, size: int, what: str) -> int:
    value = _optional_id(raw, size, what)
    if value is None:
        raise OTLPDecodeError(f"{what} is missing (empty or all zeros)")
    return value


# --------------------------------------------------------------------------- traces


def spans_from_request(req: ExportTraceServiceRequest) -> list[SpanRecord]:
    """Convert every span of an export request into a ``SpanRecord``.

    Resource attributes are not merged into span attributes (they would bloat every
    span): each ``ResourceSpans`` gives one ``resource_metadata`` mapping that its
    records share.
    """
    records: list[SpanRecord] = []
    for r_idx, resource_spans in enumerate(req.resource_spans):
        resource = resource_metadata(attributes_to_dict(resource_spans.resource.attributes))
        for s_idx, scope_spans in enumerate(resource_spans.scope_spans):
            scope_name = scope_spans.scope.name
            for p_idx, span in enumerate(scope_spans.spans):
                where = f"resourceSpans[{r_idx}].scopeSpans[{s_idx}].spans[{p_idx}]"
                records.append(_span_record(span, scope_name, resource, where))
    return records


def _span_record(span: Span, scope_name: str, resource: Mapping[str, Any], where: str) -> SpanRecord:
    attributes = attributes_to_dict(span.attributes)
    events = tuple(
        SpanEvent(e.name, e.time_unix_nano, attributes_to_dict(e.attributes)) for e in span.events
    )
    flags = span.flags
    parent_is_remote = bool(flags & _HAS_IS_REMOTE) and bool(flags & _IS_REMOTE)
    return SpanRecord(
        trace_id=_required_id(span.trace_id, 16, f"{where}.traceId"),
        span_id=_required_id(span.span_id, 8, f"{where}.spanId"),
        parent_span_id=_optional_id(span.parent_span_id, 8, f"{where}.parentSpanId"),
        name=span.name,
        start_time_unix_nano=span.start_time_unix_nano,
        end_time_unix_nano=span.end_time_unix_nano or span.start_time_unix_nano,
        attributes=attributes,
        events=events,
        status_code=_STATUS_NAMES.get(span.status.code, STATUS_UNSET),
        status_message=span.status.message or None,
        kind=_KIND_NAMES.get(span.kind, "INTERNAL"),
        scope_name=scope_name,
        parent_is_remote=parent_is_remote,
        resource=resource,
    )


def _parse_protobuf(data: bytes, message: Message, what: str) -> Message:
    try:
        message.ParseFromString(bytes(data))
    except (DecodeError, RuntimeError, ValueError, TypeError) as exc:
        raise OTLPDecodeError(f"invalid {what} protobuf ({len(data)} bytes): {exc}") from exc
    return message


def decode_traces_protobuf(data: bytes) -> list[SpanRecord]:
    """Decode a binary ``ExportTraceServiceRequest`` (OTLP/HTTP protobuf body)."""
    req = _parse_protobuf(data, ExportTraceServiceRequest(), "ExportTraceServiceRequest")
    return spans_from_request(req)  # type: ignore[arg-type]


def decode_traces_json(text: str | bytes) -> list[SpanRecord]:
    """Decode one OTLP/JSON ``ExportTraceServiceRequest`` document (see ``otlp_json``)."""
    where = "OTLP/JSON traces"
    return list(otlp_json.spans(otlp_json.load(text, where), where))


def _spans_or_error(req: ExportTraceServiceRequest, where: str) -> list[SpanRecord]:
    try:
        return spans_from_request(req)
    except OTLPDecodeError as exc:
        raise OTLPDecodeError(f"{where}: {exc}") from exc


# --------------------------------------------------------------------------- files


def _maybe_decompress(data: bytes, path: str) -> bytes:
    if not data.startswith(_GZIP_MAGIC):
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise OTLPDecodeError(f"{path}: corrupt or truncated gzip data: {exc}") from exc


def _decode_json_file(data: bytes, path: str) -> list[SpanRecord]:
    """One OTLP/JSON document, or JSON lines (Collector ``file`` exporter)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise OTLPDecodeError(f"{path}: not UTF-8 text: {exc}") from exc
    return [record for doc, where in otlp_json.documents(text, path) for record in otlp_json.spans(doc, where)]


def _split_length_prefixed(data: bytes) -> list[bytes] | None:
    """Split a stream of 4-byte big-endian length-prefixed messages, or return None."""
    chunks: list[bytes] = []
    pos = 0
    while pos < len(data):
        if pos + 4 > len(data):
            return None
        size = int.from_bytes(data[pos : pos + 4], "big")
        pos += 4
        if pos + size > len(data):
            return None
        chunks.append(data[pos : pos + size])
        pos += size
    return chunks


def _decode_protobuf_file(data: bytes, path: str) -> list[SpanRecord]:
    # A plain request never starts with 0x00 (field number 0 is invalid), so a leading
    # zero byte means the Collector file exporter's length-prefixed `format: proto`.
    if data.startswith(b"\x00"):
        chunks = _split_length_prefixed(data)
        if chunks is None:
            raise OTLPDecodeError(f"{path}: truncated length-prefixed protobuf stream")
        records: list[SpanRecord] = []
        for i, chunk in enumerate(chunks):
            where = f"{path} message {i + 1}"
            what = f"{where}: ExportTraceServiceRequest"
            req = _parse_protobuf(chunk, ExportTraceServiceRequest(), what)
            records.extend(_spans_or_error(req, where))  # type: ignore[arg-type]
        return records
    req = _parse_protobuf(data, ExportTraceServiceRequest(), f"{path}: ExportTraceServiceRequest")
    return _spans_or_error(req, path)  # type: ignore[arg-type]


def read_trace_file(path: str | PathLike[str]) -> list[SpanRecord]:
    """Read spans from an OTLP file, detecting the format by content.

    Accepts one OTLP/JSON document, JSON lines (Collector ``file`` exporter), binary
    protobuf, and gzip-compressed variants of each. The extension only breaks ties:
    ``.pb``/``.bin``/``.binpb`` files are always read as protobuf.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise OTLPDecodeError(f"{p}: cannot read: {exc}") from exc
    data = _maybe_decompress(data, str(p))
    suffixes = [s.lower() for s in p.suffixes if s.lower() != ".gz"]
    if suffixes and suffixes[-1] in {".pb", ".bin", ".binpb"}:
        return _decode_protobuf_file(data, str(p))
    if not data.strip():
        return []
    if data.startswith((b"{", b"\xef\xbb\xbf")):
        return _decode_json_file(data, str(p))
    if data.lstrip(b" \t\r\n").startswith(b"{"):
        # Whitespace then '{' is JSON, or a protobuf whose first bytes happen to be
        # 0x0a ('\n', field 1) and a length of 123 ('{'): try JSON, then protobuf.
        try:
            return _decode_json_file(data, str(p))
        except OTLPDecodeError as json_error:
            try:
                return _decode_protobuf_file(data, str(p))
            except OTLPDecodeError:
                raise json_error from None
    return _decode_protobuf_file(data, str(p))


# --------------------------------------------------------------------------- logs


def log_records_from_request(req: ExportLogsServiceRequest) -> list[LogRecordData]:
    """Convert every log record of an export request into ``LogRecordData``.

    ``time_unix_nano`` falls back to ``observed_time_unix_nano`` when unset (0), and
    ``event_name`` to the older ``event.name`` attribute.
    """
    out: list[LogRecordData] = []
    for r_idx, resource_logs in enumerate(req.resource_logs):
        for s_idx, scope_logs in enumerate(resource_logs.scope_logs):
            for l_idx, rec in enumerate(scope_logs.log_records):
                where = f"resourceLogs[{r_idx}].scopeLogs[{s_idx}].logRecords[{l_idx}]"
                attributes = attributes_to_dict(rec.attributes)
                event_name = rec.event_name or attributes.get("event.name") or None
                out.append(
                    LogRecordData(
                        trace_id=_optional_id(rec.trace_id, 16, f"{where}.traceId"),
                        span_id=_optional_id(rec.span_id, 8, f"{where}.spanId"),
                        time_unix_nano=rec.time_unix_nano or rec.observed_time_unix_nano,
                        event_name=str(event_name) if event_name is not None else None,
                        attributes=attributes,
                        body=any_value_to_python(rec.body) if rec.HasField("body") else None,
                    )
                )
    return out


def decode_logs_protobuf(data: bytes) -> list[LogRecordData]:
    """Decode a binary ``ExportLogsServiceRequest`` (OTLP/HTTP protobuf body)."""
    req = _parse_protobuf(data, ExportLogsServiceRequest(), "ExportLogsServiceRequest")
    return log_records_from_request(req)  # type: ignore[arg-type]


def decode_logs_json(text: str | bytes) -> list[LogRecordData]:
    """Decode one OTLP/JSON ``ExportLogsServiceRequest`` document (see ``otlp_json``)."""
    where = "OTLP/JSON logs"
    return list(otlp_json.log_records(otlp_json.load(text, where), where))
