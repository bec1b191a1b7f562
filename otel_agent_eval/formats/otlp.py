"""Decode OTLP trace and log data (protobuf, OTLP/JSON, files) into pipeline records.

Trace and log requests in protobuf are read by the C decoder ``_otlp_native`` when it was built (the
install compiles it when it can; ``OTEL_AGENT_EVAL_PURE_PYTHON=true`` turns it off), and through
the generated ``opentelemetry-proto`` classes (the upb runtime) otherwise and whenever the C
decoder declines a request (anything but the canonical encoding of fields it knows), so upb's
reading and errors are the reference for both. Those classes are imported when protobuf is first
read that way (a run over JSON files does without them); OTLP/JSON is read straight from the
parsed document by ``otlp_json``.
Malformed input always surfaces as ``OTLPDecodeError`` so callers (CLI, server) can report
it without knowing about protobuf exceptions.
"""

from __future__ import annotations

import gzip
import io
import os
import sys
import zlib
from collections.abc import Iterable, Iterator, Mapping
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config_base import ConfigError
from ..metadata import resource_metadata
from ..records import (
    STATUS_UNSET,
    LogRecordData,
    SpanEvent,
    SpanRecord,
    unchecked_span_event,
    unchecked_span_record,
)
from . import otlp_json
from .otlp_json import OTLPDecodeError
from .zstd import ZSTD_MAGIC, zstd_errors, zstd_reader

if TYPE_CHECKING:
    from google.protobuf.message import Message
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

__all__ = [
    "LogRecordData",
    "OTLPDecodeError",
    "any_value_to_python",
    "attributes_to_dict",
    "decode_logs_json",
    "decode_logs_protobuf",
    "decode_traces_json",
    "decode_traces_protobuf",
    "iter_trace_file",
    "log_records_from_request",
    "read_trace_file",
    "spans_from_request",
]


# The enums' values (Span.SpanKind, Status.StatusCode, the SpanFlags remote bits) as OTLP/JSON
# gives them: one table for both encodings.
_KIND_NAMES = otlp_json._KINDS
_STATUS_NAMES = otlp_json._STATUSES
_REMOTE_BITS = otlp_json._REMOTE_BITS
STDIN = "-"
"""The path that names standard input."""
_GZIP_MAGIC = b"\x1f\x8b"
_READ_BUFFER = 1 << 18
"""Bytes read from a file at a time (256 KiB, held while reading): a JSON line (a whole export
request, often several KiB) then comes out of one buffer with one search and one copy, where the
8 KiB default split most lines over two reads and joined the pieces (5 % of reading)."""


# --------------------------------------------------------------------------- values


_SCALARS = frozenset({"string_value", "bool_value", "int_value", "double_value"})


def any_value_to_python(value: AnyValue, *, text: bool = False) -> Any:
    """Map an OTLP ``AnyValue`` to a plain Python value.

    Arrays become tuples (as the SDK stores sequence attributes), kvlists dicts;
    an empty AnyValue becomes None. ``bytes_value`` stays bytes, or with ``text``
    becomes text as ``records.clean`` would make it (invalid UTF-8 replaced): what
    span records hold, so that they need no cleaning pass (upb has already refused
    strings that are not valid UTF-8).
    """
    kind = value.WhichOneof("value")
    if kind in _SCALARS:
        return getattr(value, kind)
    if kind == "array_value":
        return tuple([any_value_to_python(v, text=text) for v in value.array_value.values])
    if kind == "kvlist_value":
        return {kv.key: any_value_to_python(kv.value, text=text) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.decode("utf-8", "replace") if text else value.bytes_value
    # None, or string_value_strindex (profiles only; meaningless without its dictionary)
    return None


def attributes_to_dict(attributes: Iterable[KeyValue], *, text: bool = False) -> dict[str, Any]:
    """Turn repeated ``KeyValue`` into a dict (a later duplicate key wins); ``text``: as ``any_value_to_python``."""
    out: dict[str, Any] = {}
    for kv in attributes:
        value = kv.value
        string = value.string_value  # the commonest case: a non-empty string, without a call
        out[kv.key] = string if string or value.WhichOneof("value") == "string_value" else any_value_to_python(value, text=text)
    return out


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
                try:
                    records.append(_span_record(span, scope_name, resource))
                except OTLPDecodeError as exc:  # where it is, formatted only when it fails
                    raise OTLPDecodeError(f"resourceSpans[{r_idx}].scopeSpans[{s_idx}].spans[{p_idx}]{exc}") from None
    return records


def _span_record(span: Span, scope_name: str, resource: Mapping[str, Any]) -> SpanRecord:
    """One span; errors name the field relative to the span (``spans_from_request`` adds where it is).

    Made without ``records.clean``: protobuf text is valid UTF-8 once parsed, and bytes
    values are decoded here. Repeated fields are read as slices (``[:]``, a list made in C):
    upb's containers have no iterator, so a ``for`` over one ends in an ``IndexError`` formatted
    and discarded, ~2 per span (attributes, and events even when there are none).
    """
    trace_id = span.trace_id
    span_id = span.span_id
    if len(trace_id) != 16 or len(span_id) != 8:
        _required_id(trace_id, 16, ".traceId")
        _required_id(span_id, 8, ".spanId")
    trace_int = int.from_bytes(trace_id, "big")
    span_int = int.from_bytes(span_id, "big")
    if not trace_int or not span_int:
        _required_id(trace_id, 16, ".traceId")
        _required_id(span_id, 8, ".spanId")
    parent = span.parent_span_id
    flags = span.flags
    status = span.status
    start = span.start_time_unix_nano
    return unchecked_span_record(
        trace_id=trace_int,
        span_id=span_int,
        parent_span_id=_optional_id(parent, 8, ".parentSpanId") if parent else None,
        name=span.name,
        start_time_unix_nano=start,
        end_time_unix_nano=span.end_time_unix_nano or start,
        attributes=attributes_to_dict(span.attributes[:], text=True),
        events=tuple([unchecked_span_event(e.name, e.time_unix_nano, attributes_to_dict(e.attributes[:], text=True))
                      for e in span.events[:]]),
        status_code=_STATUS_NAMES.get(status.code, STATUS_UNSET),
        status_message=status.message or None,
        kind=_KIND_NAMES.get(span.kind, "INTERNAL"),
        scope_name=scope_name,
        parent_is_remote=flags & _REMOTE_BITS == _REMOTE_BITS,
        resource=resource,
        dropped_attributes_count=span.dropped_attributes_count,
        dropped_events_count=span.dropped_events_count,
    )


def _parse_protobuf(data: bytes, message: str, what: str) -> Message:
    """``data`` parsed as ``message`` (``traces`` or ``logs``: the export request)."""
    try:
        from google.protobuf.message import DecodeError

        if message == "traces":
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest as request
        else:
            from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest as request
    except ImportError as exc:
        raise OTLPDecodeError(f"{what}: reading OTLP protobuf needs the otlp extra "
                              f"(pip install 'otel-agent-eval[otlp]'): {exc}") from exc
    parsed = request()
    try:
        parsed.ParseFromString(bytes(data))
    except (DecodeError, RuntimeError, ValueError, TypeError) as exc:
        raise OTLPDecodeError(f"invalid {what} protobuf ({len(data)} bytes): {exc}") from exc
    return parsed


PURE_PYTHON_ENV = "OTEL_AGENT_EVAL_PURE_PYTHON"
"""``true``: protobuf trace and log requests are decoded through upb only, even where the C decoder is built."""


def _load_native() -> Any:
    """The C decoder (``_otlp_native``), configured with the record classes; None when it was not
    built (no compiler at install, not CPython) or ``OTEL_AGENT_EVAL_PURE_PYTHON`` is true."""
    setting = os.environ.get(PURE_PYTHON_ENV, "").strip().lower()
    if setting not in ("", "0", "false", "1", "true"):
        raise ConfigError(f"{PURE_PYTHON_ENV}={os.environ[PURE_PYTHON_ENV]!r}: expected true or false")
    if setting in ("1", "true"):
        return None
    try:
        from . import _otlp_native  # type: ignore[attr-defined]
    except ImportError:
        return None
    kinds = (*(_KIND_NAMES[code] for code in range(6)), "INTERNAL")  # ``_span_record``'s look-ups as tables
    statuses = (*(_STATUS_NAMES[code] for code in range(3)), STATUS_UNSET)
    _otlp_native.configure(SpanRecord, SpanEvent, LogRecordData, resource_metadata, kinds, statuses)
    return _otlp_native


_NATIVE = _load_native()


def protobuf_decoder() -> str:
    """``"c"`` when OTLP protobuf is read by the C decoder, ``"upb"`` when only through the protobuf runtime."""
    return "c" if _NATIVE is not None else "upb"


def decode_traces_protobuf(data: bytes) -> list[SpanRecord]:
    """Decode a binary ``ExportTraceServiceRequest`` (OTLP/HTTP protobuf body)."""
    return _traces_protobuf(data, "ExportTraceServiceRequest", "")


def _traces_protobuf(data: bytes, what: str, where: str) -> list[SpanRecord]:
    """The C decoder's records, or upb's reading (records or its error) when it declines ``data``."""
    if _NATIVE is not None:
        records = _NATIVE.decode_spans(data)
        if records is not None:
            return records  # type: ignore[no-any-return]
    req = _parse_protobuf(data, "traces", what)
    return _spans_or_error(req, where) if where else spans_from_request(req)  # type: ignore[arg-type]


def decode_traces_json(text: str | bytes) -> list[SpanRecord]:
    """Decode one OTLP/JSON ``ExportTraceServiceRequest`` document (see ``otlp_json``)."""
    where = "OTLP/JSON traces"
    return otlp_json.spans(otlp_json.load(text, where), where, clean_text=otlp_json.CLEAN_TEXT)


def _spans_or_error(req: ExportTraceServiceRequest, where: str) -> list[SpanRecord]:
    try:
        return spans_from_request(req)
    except OTLPDecodeError as exc:
        raise OTLPDecodeError(f"{where}: {exc}") from exc


# --------------------------------------------------------------------------- files


def read_trace_file(path: str | PathLike[str]) -> list[SpanRecord]:
    """Read every span of an OTLP file (see ``iter_trace_file`` for the formats)."""
    return [record for spans, _ in iter_trace_file(path) for record in spans]


Batch = tuple[list[SpanRecord], list[LogRecordData]]
"""The spans and log records of one document (JSON) or message (protobuf) of a file."""


def iter_trace_file(path: str | PathLike[str]) -> Iterator[Batch]:
    """Stream an OTLP file one document or message at a time, detecting the format by content.

    Accepts one OTLP/JSON document, JSON lines (Collector ``file`` exporter; a line may
    hold traces or logs), binary protobuf (one request, or the Collector's length-prefixed
    stream), gzip- and zstd-compressed variants of each, and the ``file`` exporter's
    ``compression: zstd`` in both its forms (each length-prefixed message a zstd frame of
    JSON or protobuf; the whole file zstd, JSON lines or length-prefixed protobuf within).
    JSON lines and length-prefixed streams
    are read incrementally, so memory is bounded by the largest line or message; a single
    document or message is bounded by its own size. The extension only breaks ties:
    ``.pb``/``.bin``/``.binpb`` files are always read as protobuf. ``-`` reads standard input
    (a pipe too: nothing is read twice).
    """
    stdin = str(path) == STDIN
    p = Path("<stdin>") if stdin else Path(path)
    try:
        raw = open(sys.stdin.fileno(), "rb", buffering=_READ_BUFFER, closefd=False) if stdin else p.open(  # noqa: SIM115
            "rb", buffering=_READ_BUFFER)
    except (OSError, ValueError, AttributeError) as exc:  # no standard input at all: closed, detached or None
        raise OTLPDecodeError(f"{p}: cannot read: {exc}") from exc
    with raw:
        try:
            magic = raw.peek(4)[:4]  # not read and seek: a pipe cannot seek
            if magic.startswith(_GZIP_MAGIC):
                stream = io.BufferedReader(gzip.GzipFile(fileobj=raw), _READ_BUFFER)  # type: ignore[arg-type]
            elif magic == ZSTD_MAGIC:
                stream = io.BufferedReader(zstd_reader(raw, str(p)), _READ_BUFFER)
            else:
                stream = raw
            yield from _iter_stream(stream, p)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise OTLPDecodeError(f"{p}: corrupt or truncated gzip data: {exc}") from exc
        except zstd_errors() as exc:
            raise OTLPDecodeError(f"{p}: corrupt or truncated zstd data: {exc}") from exc
        except OSError as exc:
            raise OTLPDecodeError(f"{p}: cannot read: {exc}") from exc


def _iter_stream(stream: Any, p: Path) -> Iterator[Batch]:
    suffixes = [s.lower() for s in p.suffixes if s.lower() not in (".gz", ".zst", ".zstd")]
    if suffixes and suffixes[-1] in {".pb", ".bin", ".binpb"}:
        yield from _protobuf_stream(stream, str(p))
        return
    head = stream.peek(64)
    if not head.strip():
        head = stream.read()  # blank so far: small or blank throughout
        if not head.strip():
            return
        stream = io.BufferedReader(io.BytesIO(head))
    if head.startswith((b"{", b"\xef\xbb\xbf")):
        yield from _json_stream(stream, str(p))
    elif head.lstrip(b" \t\r\n").startswith(b"{"):
        # Whitespace then '{' is JSON, or a protobuf whose first bytes happen to be
        # 0x0a ('\n', field 1) and a length of 123 ('{'): try JSON, then protobuf (in memory).
        data = stream.read()
        try:
            yield from _json_stream(io.BufferedReader(io.BytesIO(data)), str(p))
        except OTLPDecodeError as json_error:
            try:
                batches = list(_protobuf_stream(io.BufferedReader(io.BytesIO(data)), str(p)))
            except OTLPDecodeError:
                raise json_error from None
            yield from batches
    else:
        yield from _protobuf_stream(stream, str(p))


def _json_batch(doc: Any, where: str) -> Batch:
    logs = list(otlp_json.log_records(doc, where)) if type(doc) is dict and ("resourceLogs" in doc or "resource_logs" in doc) else []
    return otlp_json.spans(doc, where, clean_text=otlp_json.CLEAN_TEXT), logs


def _json_stream(stream: Any, path: str) -> Iterator[Batch]:
    """JSON lines, one document per line; or, when the first line is not a whole document,
    one (pretty-printed) document over the whole file."""
    first = True
    for number, line in enumerate(stream, start=1):
        if first:
            line = line.removeprefix(b"\xef\xbb\xbf")
        if not line.strip():
            continue
        if first:
            first = False
            try:
                doc = otlp_json.parse(line)
            except otlp_json.JSON_ERRORS:
                yield _json_batch(otlp_json.load(line + stream.read(), path), path)
                return
            yield _json_batch(doc, path if not stream.peek(1) else f"{path} line {number}")
            continue
        where = f"{path} line {number}"
        yield _json_batch(otlp_json.load(line, where), where)


def _protobuf_stream(stream: Any, path: str) -> Iterator[Batch]:
    # A plain request never starts with 0x00 (field number 0 is invalid), so a leading
    # zero byte means the Collector file exporter's length-prefixed `format: proto`.
    if not stream.peek(1).startswith(b"\x00"):
        yield _traces_protobuf(stream.read(), f"{path}: ExportTraceServiceRequest", path), []
        return
    number = 0
    while prefix := stream.read(4):
        number += 1
        chunk = stream.read(int.from_bytes(prefix, "big")) if len(prefix) == 4 else b""
        if len(prefix) < 4 or len(chunk) < int.from_bytes(prefix, "big"):
            raise OTLPDecodeError(f"{path}: truncated length-prefixed protobuf stream (message {number})")
        where = f"{path} message {number}"
        if chunk.startswith(ZSTD_MAGIC):  # the file exporter's compression before native compression: per message
            chunk = zstd_reader(io.BytesIO(chunk), where).read()
        if chunk.lstrip(b" \t\r\n").startswith(b"{"):  # a JSON document (format: json with compression)
            yield _json_batch(otlp_json.load(chunk, where), where)
            continue
        yield _traces_protobuf(chunk, f"{where}: ExportTraceServiceRequest", where), []


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
                attributes = attributes_to_dict(rec.attributes[:])  # a slice: see _span_record
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
    """Decode a binary ``ExportLogsServiceRequest`` (OTLP/HTTP protobuf body): by the C decoder, else through upb."""
    if _NATIVE is not None:
        records = _NATIVE.decode_logs(data)
        if records is not None:
            return records  # type: ignore[no-any-return]
    req = _parse_protobuf(data, "logs", "ExportLogsServiceRequest")
    return log_records_from_request(req)  # type: ignore[arg-type]


def decode_logs_json(text: str | bytes) -> list[LogRecordData]:
    """Decode one OTLP/JSON ``ExportLogsServiceRequest`` document (see ``otlp_json``)."""
    where = "OTLP/JSON logs"
    return list(otlp_json.log_records(otlp_json.load(text, where), where))
