"""Attributes as OTLP protobuf, for ``otlp_direct.py``: their fields (on ``otlp_wire.py``'s wire format), the SDK's
attribute limits, and the templates the usual result records and evaluation spans are encoded from.

Most of a record's and of the evaluation span's attribute bytes recur run after run (keys, evaluator and agent
names, labels, counts, scores, explanations, flat details): ``RecordTemplates`` and ``SpanTemplates`` encode the
usual ones once, from templates derived from ``otel.py`` by probing it (never a second list of attributes), keep
them by the values they are made of, and write only the result id / evaluated span id each time. Anything else
(an attribute limit in reach, an odd value type, a custom result, a run the probes do not fit) goes the general
way; ``tests/sinks/test_record_templates.py`` holds the two ways to the same bytes.
"""

from __future__ import annotations

import dataclasses
import logging
import struct
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from typing import Any

from ..metadata import SERVICE_NAME
from ..model import LOSS_FIELDS, AgentTrace, EvalResult, EvaluatedTrace
from .fit import exact_key, flat_key
from .otel import details_text, explanation_text, log_attributes, span_attributes
from .otlp_wire import SMALL as _SMALL
from .otlp_wire import field as _field
from .otlp_wire import pack_double as _pack_double
from .otlp_wire import text as _text
from .otlp_wire import varint as _varint

_logger = logging.getLogger("otel_agent_eval.export")

# --------------------------------------------------------------------------- attribute values


def any_value(value: Any) -> bytes:
    """The ``AnyValue`` message for an attribute value, as the SDK's ``_encode_value`` maps it (bool before int)."""
    kind = type(value)
    if kind is str:
        return _text(b"\x0a", value)
    if kind is bool:
        return b"\x10\x01" if value else b"\x10\x00"
    if kind is float:
        return b"\x21" + _pack_double(value)
    if kind is int:
        return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)
    if value is None:
        return b""
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, str):
        return _text(b"\x0a", value)
    if isinstance(value, int):
        return b"\x18" + _varint(int(value) & 0xFFFFFFFFFFFFFFFF)
    if isinstance(value, float):
        return b"\x21" + _pack_double(value)
    if isinstance(value, bytes):
        return _field(b"\x3a", value)
    if isinstance(value, Sequence):
        return _field(b"\x2a", b"".join(_field(b"\x0a", any_value(v)) for v in value))
    if isinstance(value, Mapping):
        return _field(b"\x32", b"".join(_field(b"\x0a", key_value(str(k), v)) for k, v in value.items()))
    raise TypeError(f"invalid attribute value type {type(value)}")


_KEYS: dict[str, bytes] = {}
MAX_CACHED_KEYS = 4096
"""Attribute keys kept encoded (they recur: a few per evaluator); beyond, keys are encoded each time."""


def _key(key: str) -> bytes:
    """A ``KeyValue``'s key field."""
    encoded = _KEYS.get(key)
    if encoded is None:
        encoded = _text(b"\x0a", key) if key else b""
        if len(_KEYS) < MAX_CACHED_KEYS:
            _KEYS[key] = encoded
    return encoded


def key_value(key: str, value: Any) -> bytes:
    """The ``KeyValue`` message's bytes (without its own tag)."""
    return _key(key) + _field(b"\x12", any_value(value))


_FIELDS: dict[bytes, dict[tuple[Any, ...], bytes]] = {}
"""Whole attribute fields kept encoded, per tag: (key, value) for a string, (key, type, value) for the other scalars
(``1 == 1.0 == True``: the type tells them apart)."""
MAX_CACHED_FIELDS = 4096
"""Fields kept per tag: most values recur (names, labels, scores, counts, explanations); a tag's cache is emptied
when full, so values seen once (result ids, span ids) cannot crowd out the rest for long."""
MAX_CACHED_TEXT = 256


def attributes(tag: bytes, values: Mapping[str, Any]) -> bytes:
    """Repeated ``KeyValue`` fields under ``tag``; a value the SDK could not encode is left out, as it does.

    This loop is most of the sink's cost: a field seen before is one look-up, else ``key_value`` is
    spelled out for the common types.
    """
    out = []
    small = _SMALL
    fields = _FIELDS.get(tag)
    if fields is None:
        fields = _FIELDS[tag] = {}
    for key, value in values.items():
        kind = type(value)
        if kind is str:
            cached: tuple[Any, ...] | None = (key, value) if len(value) <= MAX_CACHED_TEXT else None
        elif kind is int or kind is bool or (kind is float and value):  # 0.0 == -0.0 (one key), but their bytes differ
            cached = (key, kind, value)
        else:
            cached = None
        if cached is not None:
            field = fields.get(cached)
            if field is not None:
                out.append(field)
                continue
        if kind is str:
            text = value.encode("utf-8")
            n = len(text)
            encoded = b"\x0a" + (small[n] if n < 128 else _varint(n)) + text
        elif kind is float:
            encoded = b"\x21" + _pack_double(value)
        elif kind is bool:
            encoded = b"\x10\x01" if value else b"\x10\x00"
        else:
            try:
                encoded = any_value(value)
            except TypeError:  # the SDK logs such a value and leaves it out
                _logger.exception("Failed to encode key %s", key)
                continue
        n = len(encoded)
        pair = _key(key) + b"\x12" + (small[n] if n < 128 else _varint(n)) + encoded
        n = len(pair)
        field = tag + (small[n] if n < 128 else _varint(n)) + pair
        out.append(field)
        if cached is not None:
            if len(fields) >= MAX_CACHED_FIELDS:
                fields.clear()
            fields[cached] = field
    return b"".join(out)


class Limits:
    """The SDK's attribute count and value length limits (read from the same ``OTEL_*`` variables)."""

    def __init__(self, count: int | None, length: int | None) -> None:
        self.count = count
        self.length = length

    def reach(self, count: int) -> bool:
        """Whether ``count`` attributes would be cut or counted dropped (a length limit reaches any text)."""
        return self.length is not None or (self.count is not None and count > self.count)

    def apply(self, values: dict[str, Any]) -> tuple[Mapping[str, Any], int]:
        """The attributes as the SDK keeps them, and how many it drops: only limits in reach cost anything."""
        if not self.reach(len(values)):
            return values, 0
        from opentelemetry.attributes import BoundedAttributes

        bounded = BoundedAttributes(self.count, values, immutable=False, max_value_len=self.length)
        return bounded, bounded.dropped


def span_limits() -> Limits:
    from opentelemetry.sdk.trace import SpanLimits

    limits = SpanLimits()
    return Limits(limits.max_span_attributes, limits.max_span_attribute_length)


def log_limits() -> Limits:
    from opentelemetry.sdk import _logs

    limits = getattr(_logs, "LogRecordLimits", None) or _logs.LogLimits
    made = limits()
    return Limits(getattr(made, "max_log_record_attributes", getattr(made, "max_attributes", None)),
                  getattr(made, "max_log_record_attribute_length", getattr(made, "max_attribute_length", None)))


# --------------------------------------------------------------------------- result records from templates


class _General(Exception):
    """A value the template does not encode: the record goes the general way (``log_attributes``)."""


_VARYING: dict[str, Callable[[Any], Any] | None] = {"explanation": explanation_text, "score": None,
                                                    "details": details_text}
"""The result fields whose attributes change from result to result but recur (a record's encoded attributes are
kept by their values), and the function of ``otel.py`` that makes each one's value (None: the field itself)."""
_UNIQUE = "result_id"
"""The field whose attribute is new in every record: written each time, between the kept parts."""
_KEY_FIELDS = ("evaluator", "label", "agent_name", "evaluator_version")
"""With the run's service, the score's type and whether there are details: what a template is made for."""
_key_fields = itemgetter(*_KEY_FIELDS)
MAX_TEMPLATES = 1024
"""Templates kept (a few per evaluator and agent); emptied when full."""
MAX_KEPT_RECORDS = 4096
"""Records' (and spans') encoded attributes kept by their varying values, per kind; emptied when full."""
MAX_KEPT_BYTES = 1024
MAX_KEPT_SPAN_BYTES = 4096
"""Records' and spans' attributes longer than these are encoded each time (bounds what is kept)."""


def _varied(model: Any, n: int, keep: Sequence[str], **update: Any) -> Any:
    """``model`` with every field outside ``keep`` changed to text that no other field holds, as each probe ``n``
    does differently: an attribute that follows such a field other than as expected then shows."""
    return model.model_copy(update={**{name: f"probe {n} {name} \u2713" for name in type(model).model_fields
                                       if name not in keep}, **update})


def _probe(result: EvalResult, n: int) -> EvalResult:
    """A probe of the records like ``result``: its key kept, the rest varied."""
    return _varied(result, n, _KEY_FIELDS, score=None if result.score is None else n / 4,
                   details={"reason": f"probe {n} reason", "probe": n} if result.details else {})


def _value_of(probe: EvalResult, field: str) -> Any:
    make = _VARYING.get(field)
    value = getattr(probe, field)
    return value if make is None else make(value)


def _slot(tag: bytes, key: str, field: str, probe: EvalResult) -> Callable[[dict[str, Any]], bytes]:
    """The encoder of one varying attribute: the whole field (tag, length, ``KeyValue``) from the result's fields
    (its ``__dict__``: a pydantic model's ``__getattr__`` makes each attribute read a slow generic look-up)."""
    head = _key(key) + b"\x12"
    small = _SMALL
    if type(getattr(probe, field)) is float:
        whole = tag + _varint(len(head) + 10) + head + b"\x09\x21"
        pack = _pack_double
        return lambda values: whole + pack(values[field])
    make = _VARYING.get(field)

    def text(values: dict[str, Any]) -> bytes:
        value = values[field] if make is None else make(values[field])
        if type(value) is not str:
            raise _General
        raw = value.encode("utf-8")
        n = len(raw)
        encoded = b"\x0a" + (small[n] if n < 128 else _varint(n)) + raw
        n = len(encoded)
        pair = head + (small[n] if n < 128 else _varint(n)) + encoded
        n = len(pair)
        return tag + (small[n] if n < 128 else _varint(n)) + pair
    return text


_Parts = tuple[bytes | Callable[[dict[str, Any]], bytes], ...]
_Template = tuple[_Parts, Callable[[dict[str, Any]], bytes] | None, _Parts]
"""A record's attributes: the parts before the unique field, its encoder (None: no such attribute), the parts
after; a part is encoded constants or the encoder of a varying field."""


def record_template(tag: bytes, result: EvalResult, service: Any, limits: Limits) -> _Template | None:
    """The attributes of records like ``result``, derived from ``log_attributes`` over two probes; None when such
    a record goes the general way (a value type not kept here, an attribute limit in reach, an attribute that
    follows neither the key nor a field of ``_VARYING`` / ``_UNIQUE``)."""
    if type(result) is not EvalResult or type(result.score) not in (float, type(None)) or not (
            service is None or type(service) is str) or any(type(getattr(result, n)) is not str for n in _KEY_FIELDS):
        return None
    try:
        probes = _probe(result, 1), _probe(result, 2)
        first, second = (log_attributes(p, service) for p in probes)
    except Exception:  # noqa: BLE001 - a result the probes do not fit: the general way
        return None
    if list(first) != list(second) or limits.reach(len(first)):
        return None
    done: list[_Parts] = []
    parts: list[bytes | Callable[[dict[str, Any]], bytes]] = []
    unique: Callable[[dict[str, Any]], bytes] | None = None
    constants: dict[str, Any] = {}
    for key, value in first.items():
        other = second[key]
        if value == other and type(value) is type(other):
            constants[key] = value
            continue
        field = next((name for name in (*_VARYING, _UNIQUE) if _value_of(probes[0], name) == value
                      and _value_of(probes[1], name) == other), None)
        if field is None or type(value) not in (str, float) or type(value) is not type(other) or (
                field == _UNIQUE and unique is not None):
            return None
        if constants:
            parts.append(attributes(tag, constants))
            constants = {}
        if field == _UNIQUE:
            unique = _slot(tag, key, field, probes[0])
            done.append(tuple(parts))
            parts = []
        else:
            parts.append(_slot(tag, key, field, probes[0]))
    if constants:
        parts.append(attributes(tag, constants))
    done.append(tuple(parts))
    return done[0], unique, done[1] if unique else ()


def _joined(parts: _Parts, values: dict[str, Any]) -> bytes:
    return b"".join([part if part.__class__ is bytes else part(values) for part in parts])  # type: ignore[operator,misc]


_Kept = tuple[bytes, Callable[[dict[str, Any]], bytes] | None, bytes]
"""Encoded attributes kept: the bytes before the unique field, its encoder (None: none), the bytes after."""


def _written(kept: _Kept, values: dict[str, Any]) -> bytes | None:
    """The kept attributes with the unique field written in from ``values``; None: the general way."""
    before, unique, after = kept
    if unique is None:
        return before
    try:
        return before + unique(values) + after
    except _General:
        return None


class RecordTemplates:
    """Result records' attributes encoded from templates (one per evaluator, label, agent, version, service, score
    type and details present or not) and kept by the values that recur (explanation, score, details): a record
    seen before is one look-up and its result id, without the attribute dict. Same bytes as ``log_attributes``
    + ``attributes`` (``tests/sinks/test_record_templates.py``)."""

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._templates: dict[tuple[Any, ...], _Template | None] = {}
        self._kept: dict[tuple[Any, ...], _Kept] = {}

    def encode(self, result: EvalResult, service: Any) -> bytes | None:
        """The record's attribute fields, or None: the general way."""
        values = result.__dict__
        score = values["score"]
        details = values["details"]
        shape = (_key_fields(values), service, type(score), not details, type(result))
        try:
            key: tuple[Any, ...] | None = (shape, values["explanation"], None if score is None else _pack_double(score),
                                           flat_key(details) if details else None)
            kept = self._kept.get(key)  # type: ignore[arg-type]
        except (TypeError, OverflowError, struct.error):  # unhashable details or service, a score not a number
            key = kept = None
        if kept is None:
            kept = self._fill(shape, result, service, values)
            if kept is None:
                return None
            if (key is not None and (not details or exact_key(key[3])) and type(key[1]) is str
                    and len(key[1]) <= MAX_CACHED_TEXT and len(kept[0]) + len(kept[2]) <= MAX_KEPT_BYTES):
                if len(self._kept) >= MAX_KEPT_RECORDS:
                    self._kept.clear()
                self._kept[key] = kept
        return _written(kept, values)

    def _fill(self, shape: tuple[Any, ...], result: EvalResult, service: Any, values: dict[str, Any]) -> _Kept | None:
        try:
            template = self._templates[shape]
        except KeyError:
            if len(self._templates) >= MAX_TEMPLATES:
                self._templates.clear()
            template = self._templates[shape] = record_template(b"\x32", result, service, self._limits)
        except TypeError:  # an unhashable service
            return None
        if template is None:
            return None
        try:
            return _joined(template[0], values), template[1], _joined(template[2], values)
        except _General:
            return None


_SPAN_KEY_FIELDS = ("agent_name", "partial", *LOSS_FIELDS)
"""With the phase, the service, whether there is an agent span, and each result's evaluator, label and score:
what an evaluation span's attributes are kept by."""
_span_key_fields = itemgetter(*_SPAN_KEY_FIELDS)
_span_counts = itemgetter(*LOSS_FIELDS)
"""Kept by type as well: an int count and a bool (``True == 1``) are written differently."""
_RESULT_KEY_FIELDS = ("evaluator", "label", "score")
_result_key_fields = itemgetter(*_RESULT_KEY_FIELDS)


class SpanTemplates:
    """The evaluation span's attributes kept by what they are made of (the agent, phase, service, and each result's
    evaluator, label and score), with the evaluated span id written in each time: a span seen before is a key and
    a look-up, without the attribute dict and its encoding. What is kept is checked on first sight against
    ``span_attributes`` of a probe run (every other field of the trace and results changed); a span that does not
    follow the key, or that an attribute limit reaches, is not kept. Same bytes as ``span_attributes`` +
    ``attributes`` (``tests/sinks/test_record_templates.py``)."""

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._kept: dict[tuple[Any, ...], _Kept] = {}

    def encode(self, evaluated: EvaluatedTrace, fields: dict[str, Any]) -> bytes | None:
        """The span's attribute fields (``fields``: the trace's), or None: the general way."""
        scored = []
        pack = _pack_double
        for result in evaluated.results:
            evaluator, label, score = _result_key_fields(result.__dict__)
            scored.append((evaluator, label, type(score), None if score is None else pack(score)))
        try:
            key = (evaluated.phase, _span_key_fields(fields), tuple(map(type, _span_counts(fields))), type(evaluated.trace),
                   fields["metadata"].get(SERVICE_NAME), not fields["agent_span_id"], tuple(scored))
            kept = self._kept.get(key)
        except (TypeError, OverflowError, struct.error):  # unhashable, a score not a number
            return None
        if kept is None:
            kept = self._template(evaluated, key)
            if kept is None:
                return None
            if len(kept[0]) + len(kept[2]) <= MAX_KEPT_SPAN_BYTES:
                if len(self._kept) >= MAX_KEPT_RECORDS:
                    self._kept.clear()
                self._kept[key] = kept
        return _written(kept, fields)

    def _template(self, evaluated: EvaluatedTrace, key: tuple[Any, ...]) -> _Kept | None:
        t = evaluated.trace
        service = key[4]
        if type(t) is not AgentTrace or type(t.agent_name) is not str or type(evaluated.phase) is not str or not (
                service is None or type(service) is str) or any(
                type(r) is not EvalResult or type(r.evaluator) is not str or type(r.label) is not str
                or type(r.score) not in (float, type(None)) for r in evaluated.results):
            return None
        try:
            probe_trace = _varied(t, 1, _SPAN_KEY_FIELDS, metadata={} if service is None else {SERVICE_NAME: service},
                                  agent_span_id=t.agent_span_id and "probe agent span \u2713")
            probe = dataclasses.replace(evaluated, trace=probe_trace, durations={"probe": 1.0}, started_ns=1,
                                        ended_ns=2, results=[_varied(r, 1, _RESULT_KEY_FIELDS, details={"probe": 1})
                                                             for r in evaluated.results])
            first, second = span_attributes(evaluated), span_attributes(probe)
        except Exception:  # noqa: BLE001 - a run the probe does not fit: the general way
            return None
        if list(first) != list(second) or self._limits.reach(len(first)):
            return None
        parts: list[dict[str, Any]] = [{}]
        unique = None
        for name, value in first.items():
            other = second[name]
            if value == other and type(value) is type(other):
                parts[-1][name] = value
            elif (unique is None and type(value) is str and value == t.agent_span_id
                  and other == probe_trace.agent_span_id):
                unique = _slot(b"\x4a", name, "agent_span_id", t)
                parts.append({})
            else:
                return None
        return attributes(b"\x4a", parts[0]), unique, attributes(b"\x4a", parts[1]) if unique else b""
