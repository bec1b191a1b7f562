"""OTLP/JSON decoded directly into pipeline records, without protobuf.

OTLP/JSON is proto3 JSON with three differences (OTLP specification, "JSON Protobuf
Encoding"): trace and span ids are hex strings, enums are integers, and field names are
lowerCamelCase (receivers also accept the proto field names). int64 values may be
strings or numbers; unknown fields are ignored. Reading the parsed document straight
into ``SpanRecord`` / ``LogRecordData`` costs about as much as parsing the JSON itself,
where protobuf's ``json_format`` costs twenty times more. ``orjson`` parses when it is
installed, the standard library otherwise.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

from ..metadata import NO_RESOURCE, resource_metadata
from ..records import (
    STATUS_ERROR,
    STATUS_OK,
    STATUS_UNSET,
    LogRecordData,
    SpanEvent,
    SpanRecord,
    unchecked_span_event,
    unchecked_span_record,
)

try:
    import orjson

    _loads: Any = orjson.loads
    _JSON_ERRORS: tuple[type[Exception], ...] = (orjson.JSONDecodeError, json.JSONDecodeError)
except ImportError:  # pragma: no cover - the standard library is the fallback
    _loads = json.loads
    _JSON_ERRORS = (json.JSONDecodeError,)

parse: Any = _loads
"""The JSON parser in use (orjson's or the standard library's): bytes or str in, raises ``JSON_ERRORS``."""
JSON_ERRORS = _JSON_ERRORS
CLEAN_TEXT = _loads is not json.loads
"""Whether every string the parser gives encodes as UTF-8: orjson refuses lone surrogates (escaped
or not), the standard library accepts them. Span records from such documents need no
``records.clean`` pass (see ``spans``)."""


class OTLPDecodeError(ValueError):
    """Input is not valid OTLP data; the message says what and where."""


_KINDS = {0: "INTERNAL", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER",
          "SPAN_KIND_UNSPECIFIED": "INTERNAL", "SPAN_KIND_INTERNAL": "INTERNAL", "SPAN_KIND_SERVER": "SERVER",
          "SPAN_KIND_CLIENT": "CLIENT", "SPAN_KIND_PRODUCER": "PRODUCER", "SPAN_KIND_CONSUMER": "CONSUMER"}
_STATUSES = {0: STATUS_UNSET, 1: STATUS_OK, 2: STATUS_ERROR, "STATUS_CODE_UNSET": STATUS_UNSET,
             "STATUS_CODE_OK": STATUS_OK, "STATUS_CODE_ERROR": STATUS_ERROR}
_REMOTE_BITS = 0x300
"""Flags: the parent's is-remote bit is known (0x100) and set (0x200)."""
_SPECIAL_DOUBLES = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def load(text: str | bytes, where: str) -> Any:
    """Parse JSON; the error names ``where`` and the position."""
    try:
        return _loads(text)
    except UnicodeDecodeError as exc:
        raise OTLPDecodeError(f"{where}: not UTF-8 text: {exc}") from exc
    except _JSON_ERRORS as exc:
        raise OTLPDecodeError(f"{where}: invalid JSON: {exc}") from exc


def _list(node: dict[str, Any], camel: str, snake: str, where: str) -> list[Any]:
    value = _field(node, camel, snake)
    if value is None:
        return []
    if not isinstance(value, list):
        raise OTLPDecodeError(f"{where}.{camel}: expected a list, got {type(value).__name__}")
    return value


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise OTLPDecodeError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def _int(value: Any, where: str) -> int:
    """int64 / uint64 / fixed64: a number or a decimal string; absent is 0."""
    if value is None:
        return 0
    if type(value) is int:
        return value
    try:
        if isinstance(value, str):
            return int(value)
        if isinstance(value, float) and value.is_integer():
            return int(value)
    except ValueError:
        pass
    raise OTLPDecodeError(f"{where}: {value!r} is not an integer")


def _id(value: Any, size: int, where: str) -> int | None:
    """A hex id; empty or all zeros (the OTLP "no id") is None."""
    if not value:
        return None
    try:
        raw = bytes.fromhex(value)
    except (TypeError, ValueError):
        hint = (" (base64, as protobuf's MessageToJson writes ids; OTLP/JSON ids are hex)"
                if isinstance(value, str) and len(value) == 4 * -(-size // 3) else "")
        raise OTLPDecodeError(f"{where}: {value!r} is not a hex string{hint}") from None
    if len(raw) != size:
        raise OTLPDecodeError(f"{where} has {len(raw)} bytes, expected {size}")
    return int.from_bytes(raw, "big") or None


def _required_id(value: Any, size: int, where: str) -> int:
    found = _id(value, size, where)
    if found is None:
        raise OTLPDecodeError(f"{where} is missing (empty or all zeros)")
    return found


def any_value(value: Any, where: str, text: bool = False) -> Any:
    """An ``AnyValue`` object -> a plain value (arrays as tuples, kvlists as dicts), as the SDK keeps them.

    ``bytesValue`` gives bytes, or with ``text`` what ``records.clean`` makes of them (UTF-8,
    invalid sequences replaced), as the protobuf reader does for span records.
    """
    if type(value) is not dict:
        return None
    if "stringValue" in value:  # the commonest kinds first, without the table
        return value["stringValue"]
    if len(value) == 1:
        found = value.get("intValue")
        if found is not None:
            return int(found) if type(found) is str and found.isdecimal() else _int(found, where)
        found = value.get("arrayValue")
        if found is not None:
            return _array(found, where, text)
    for key, found in value.items():  # one key: the oneof
        read = _VALUE_READERS.get(key)
        if read is not None:
            return read(found, where, text)
    return None


def _double(found: Any, where: str) -> float:
    return _SPECIAL_DOUBLES[found] if isinstance(found, str) and found in _SPECIAL_DOUBLES else float(found)


def _bytes(found: Any, where: str, text: bool) -> bytes | str:
    try:
        raw = base64.b64decode(found, validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise OTLPDecodeError(f"{where}: bytesValue is not base64") from None
    return raw.decode("utf-8", "replace") if text else raw


def _array(found: Any, where: str, text: bool) -> tuple[Any, ...]:
    values = (found or {}).get("values")
    if not values:
        return ()
    try:
        return tuple([v["stringValue"] for v in values])  # the commonest: an array of strings
    except (KeyError, TypeError):
        return tuple([any_value(v, where, text) for v in values])


def _kvlist(found: Any, where: str, text: bool) -> dict[str, Any]:
    return attributes((found or {}).get("values"), where, text)


_VALUE_READERS: dict[str, Any] = {}
for _names, _read in ((("stringValue", "string_value"), lambda found, where, text: found),
                      (("intValue", "int_value"), lambda found, where, text: _int(found, where)),
                      (("boolValue", "bool_value"), lambda found, where, text: bool(found)),
                      (("doubleValue", "double_value"), lambda found, where, text: _double(found, where)),
                      (("arrayValue", "array_value"), _array), (("kvlistValue", "kvlist_value"), _kvlist),
                      (("bytesValue", "bytes_value"), _bytes)):
    _VALUE_READERS.update(dict.fromkeys(_names, _read))
"""``AnyValue`` field (lowerCamelCase or proto name) -> its reader ``(found, where, text)``."""


def attributes(items: Any, where: str, text: bool = False) -> dict[str, Any]:
    """A list of ``KeyValue`` objects -> a dict (a later duplicate key wins); ``text``: as ``any_value``.

    Well-formed lists are read in one comprehension (a string value without a call);
    anything it cannot take (a missing key or value, a key that is not a string, a bad
    value) is read again by the checked walk, which says what is wrong and where.
    """
    if not items:
        return {}
    if type(items) is list:
        try:
            out = {kv["key"]: (value["stringValue"] if "stringValue" in (value := kv["value"]) else any_value(value, "", text))
                   for kv in items}
            _join(out)  # every key a string: join raises TypeError otherwise
            return out
        except (KeyError, TypeError, OTLPDecodeError):
            pass
    return _checked_attributes(items, where, text)


_join = "".join


def _checked_attributes(items: Any, where: str, text: bool = False) -> dict[str, Any]:
    if type(items) is not list:
        raise OTLPDecodeError(f"{where}: attributes must be a list")
    out: dict[str, Any] = {}
    for kv in items:
        key, value = _attribute(kv, where, text)
        out[key] = value
    return out


def _attribute(kv: Any, where: str, text: bool) -> tuple[str, Any]:
    """One ``KeyValue`` object, checked: any value type, a missing key or value."""
    if type(kv) is not dict:
        raise OTLPDecodeError(f"{where}: an attribute is not a {{key, value}} object")
    key = kv.get("key", "")  # proto3 JSON leaves out default values: a missing key is ""
    if type(key) is not str:
        raise OTLPDecodeError(f"{where}: an attribute key is not a string")
    return key, any_value(kv.get("value"), f"{where}[{key}]", text)


def _field(node: dict[str, Any], camel: str, snake: str) -> Any:
    value = node.get(camel)
    return node.get(snake) if value is None else value


def _span(span: Any, scope_name: str, resource: Mapping[str, Any], make: Any = SpanRecord,
          make_event: Any = SpanEvent, trace_ids: dict[str, int] | None = None,
          parent_ids: dict[str, int] | None = None) -> SpanRecord:
    """One span object; errors name the field relative to the span (``spans()`` adds where it is).

    ``trace_ids`` / ``parent_ids``: the document's trace and parent ids read so far (hex text ->
    its integer, 0 where the text is not a valid id of that size): the spans of one trace share
    its trace id, siblings their parent's, and a look-up costs a sixth of reading the hex again.
    """
    if type(span) is not dict:
        raise OTLPDecodeError(f": expected a JSON object, got {type(span).__name__}")
    get = span.get
    raw_events = get("events")
    events: tuple[SpanEvent, ...] = ()
    if raw_events:
        if type(raw_events) is not list:
            raise OTLPDecodeError(".events: expected a list")
        events = tuple([
            make_event(str(e.get("name") or ""), _int(_field(e, "timeUnixNano", "time_unix_nano"), f".events[{i}].timeUnixNano"),
                       attributes(e.get("attributes"), f".events[{i}]", True))
            if type(e) is dict else _not_object(f".events[{i}]", e)
            for i, e in enumerate(raw_events)
        ])
    status = get("status")
    code, message = (status.get("code", 0), status.get("message") or None) if type(status) is dict else (0, None)
    flags = get("flags")
    if type(flags) is not int:
        flags = 0 if flags is None else _int(flags, ".flags")
    start = get("startTimeUnixNano")
    end = get("endTimeUnixNano")
    parent = get("parentSpanId")
    if parent is None:
        parent = get("parent_span_id")
    if trace_ids is None:
        trace_ids = {}
    if parent_ids is None:
        parent_ids = {}
    try:  # the common case in one go: hex ids, int64 times as decimal strings (proto3 JSON) or numbers
        trace_hex = get("traceId")
        trace_id = trace_ids.get(trace_hex)
        if trace_id is None:
            raw = bytes.fromhex(trace_hex)
            trace_id = trace_ids[trace_hex] = int.from_bytes(raw, "big") if len(raw) == 16 else 0
        raw = bytes.fromhex(get("spanId"))
        span_id = int.from_bytes(raw, "big") if len(raw) == 8 else 0
        if parent:
            parent_id = parent_ids.get(parent)
            if parent_id is None:
                raw = bytes.fromhex(parent)
                parent_id = parent_ids[parent] = int.from_bytes(raw, "big") if len(raw) == 8 else 0
        else:
            parent_id = None
        if type(start) is str:
            start = int(start)
        if type(end) is str:
            end = int(end)
    except (TypeError, ValueError):
        trace_id = span_id = 0
        parent_id = None
    if not (trace_id and span_id and (parent_id or not parent)) or type(start) is not int or type(end) is not int:
        # anything unusual goes through the checks that say what is wrong
        start = _int(_field(span, "startTimeUnixNano", "start_time_unix_nano"), ".startTimeUnixNano")
        end = _int(_field(span, "endTimeUnixNano", "end_time_unix_nano"), ".endTimeUnixNano")
        trace_id = _required_id(_field(span, "traceId", "trace_id"), 16, ".traceId")
        span_id = _required_id(_field(span, "spanId", "span_id"), 8, ".spanId")
        parent_id = _id(parent, 8, ".parentSpanId")
    name = get("name")
    dropped_attributes = get("droppedAttributesCount")  # usually absent (0): no call then
    if dropped_attributes is not None or "dropped_attributes_count" in span:
        dropped_attributes = _count(span, "droppedAttributesCount", "dropped_attributes_count")
    dropped_events = get("droppedEventsCount")
    if dropped_events is not None or "dropped_events_count" in span:
        dropped_events = _count(span, "droppedEventsCount", "dropped_events_count")
    return make(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent_id,
        name=name if type(name) is str else str(name or ""),
        start_time_unix_nano=start,
        end_time_unix_nano=end or start,
        attributes=attributes(get("attributes"), "", True),
        events=events,
        status_code=_STATUSES.get(code, STATUS_UNSET),
        status_message=message,
        kind=_KINDS.get(get("kind", 0), "INTERNAL"),
        scope_name=scope_name,
        parent_is_remote=flags & _REMOTE_BITS == _REMOTE_BITS,
        resource=resource,
        dropped_attributes_count=dropped_attributes or 0,
        dropped_events_count=dropped_events or 0,
    )


def _count(span: dict[str, Any], camel: str, snake: str) -> int:
    """A ``uint32`` count (a number, or a decimal string as parsers accept); absent is 0."""
    value = span.get(camel)
    if value is None:
        value = span.get(snake)
        if value is None:
            return 0
    count = value if type(value) is int else _int(value, f".{camel}")
    if count < 0:
        raise OTLPDecodeError(f".{camel}: {value!r} is negative")
    return count


def _not_object(where: str, value: Any) -> Any:
    raise OTLPDecodeError(f"{where}: expected a JSON object, got {type(value).__name__}")


def spans(doc: Any, where: str, *, clean_text: bool = False) -> list[SpanRecord]:
    """The spans of one ``ExportTraceServiceRequest`` document.

    ``clean_text``: every string in ``doc`` encodes as UTF-8 (``CLEAN_TEXT``: parsed by
    orjson), so records skip ``records.clean``: bytes values are read as the text it would
    make of them. Where an error is is formatted only when there is one.
    """
    make, make_event = (unchecked_span_record, unchecked_span_event) if clean_text else (SpanRecord, SpanEvent)
    out: list[SpanRecord] = []
    append = out.append
    doc = _object(doc, where)
    trace_ids: dict[str, int] = {}
    parent_ids: dict[str, int] = {}
    r = s = p = -1
    try:
        for r, resource_spans in enumerate(_list(doc, "resourceSpans", "resource_spans", "")):
            s = p = -1
            if type(resource_spans) is not dict:
                _object(resource_spans, "")
            resource = resource_spans.get("resource")
            resource = _resource(resource.get("attributes")) if resource else NO_RESOURCE
            for s, scope_spans in enumerate(_list(resource_spans, "scopeSpans", "scope_spans", "")):
                p = -1
                if type(scope_spans) is not dict:
                    _object(scope_spans, "")
                scope = scope_spans.get("scope")
                scope_name = str(scope.get("name") or "") if scope else ""
                for p, span in enumerate(_list(scope_spans, "spans", "spans", "")):
                    append(_span(span, scope_name, resource, make, make_event, trace_ids, parent_ids))
    except OTLPDecodeError as exc:
        raise OTLPDecodeError(f"{where}: {_location(r, s, p)}{exc}") from None
    return out


_last_resource: tuple[Any, Mapping[str, Any]] = (None, NO_RESOURCE)
"""The last resource's attribute list (only text values) and its mapping: an exporter sends the
same resource with every request, a file holds one process's requests line after line."""


def _resource(items: Any) -> Mapping[str, Any]:
    """``resource_metadata`` of a resource's attribute list; the same list as the last one (compared
    as parsed) gives the same shared mapping without reading it again."""
    global _last_resource
    last = _last_resource
    if items == last[0]:
        return last[1]
    found = attributes(items, ".resource")
    mapping = resource_metadata(found)
    if all(type(value) is str for value in found.values()):  # then equal lists are read alike (no 1 == True)
        _last_resource = (items, mapping)  # one tuple swap: safe without a lock
    return mapping


def _location(r: int, s: int, p: int) -> str:
    """Where in an ``ExportTraceServiceRequest`` the walk stopped (-1: not that deep)."""
    if r < 0:
        return "ExportTraceServiceRequest"
    return f"resourceSpans[{r}]" + (f".scopeSpans[{s}]" if s >= 0 else "") + (f".spans[{p}]" if p >= 0 else "")


def log_records(doc: Any, where: str) -> Iterator[LogRecordData]:
    """The log records of one ``ExportLogsServiceRequest`` document."""
    doc = _object(doc, where)
    for r, resource_logs in enumerate(_list(doc, "resourceLogs", "resource_logs", f"{where}: ExportLogsServiceRequest")):
        r_where = f"{where}: resourceLogs[{r}]"
        for s, scope_logs in enumerate(_list(_object(resource_logs, r_where), "scopeLogs", "scope_logs", r_where)):
            s_where = f"{r_where}.scopeLogs[{s}]"
            for i, rec in enumerate(_list(_object(scope_logs, s_where), "logRecords", "log_records", s_where)):
                l_where = f"{s_where}.logRecords[{i}]"
                rec = _object(rec, l_where)
                attrs = attributes(rec.get("attributes"), l_where)
                event_name = _field(rec, "eventName", "event_name") or attrs.get("event.name") or None
                body = rec.get("body")
                yield LogRecordData(
                    trace_id=_id(_field(rec, "traceId", "trace_id"), 16, f"{l_where}.traceId"),
                    span_id=_id(_field(rec, "spanId", "span_id"), 8, f"{l_where}.spanId"),
                    time_unix_nano=_int(_field(rec, "timeUnixNano", "time_unix_nano"), l_where)
                    or _int(_field(rec, "observedTimeUnixNano", "observed_time_unix_nano"), l_where),
                    event_name=str(event_name) if event_name is not None else None,
                    attributes=attrs,
                    body=any_value(body, f"{l_where}.body") if body is not None else None,
                )
