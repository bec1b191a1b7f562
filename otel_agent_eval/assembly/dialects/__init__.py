"""Attribute dialects: each turns one span's attributes into an ``Operation``.

An ``Operation`` is the dialect-neutral reading of one span: what kind of GenAI
operation it is (agent, llm, tool, step, workflow) and the fields assembly
needs. Every dialect module has:

* ``MARKERS``: attribute keys present on (nearly) every span of that dialect, for
  the hot path; ``detect(record)``: does this span carry the dialect at all;
* what ``detect`` looks at, for dispatch (``detected``): ``DETECT_KEYS``, every attribute key it
  reads, and optionally ``DETECT_SCOPES`` / ``DETECT_NAMES`` (instrumentation scope / span name
  prefixes) and ``DETECT_EVENTS`` (span event names). A span is offered only to the dialects
  whose signals it carries (one set intersection against a key -> dialects map), which confirm
  with ``detect``; ``CONFIRM_KEYS`` (optional): keys whose presence alone is a ``detect`` (a span
  that has one is not asked again);
* ``kind(record)``: the kind the dialect states explicitly (an operation name, a
  span-kind attribute, a known span name), ``OTHER`` when it states that the
  span is no part of a step (embeddings, a task chain), else None; ``guess_kind(record)``
  (optional): a kind inferred from which attributes are present;
* ``extract(record, op)``: fill the fields of ``op`` that are still empty;
* ``ignores(record)`` (optional): True for a span of that dialect that another dialect would read
  as an operation but that records none (ADK's merged-tools span): it is no operation;
* ``finish(op)`` (optional): a correction that needs what every dialect read (a framework's
  relayed or wrapped user messages), run after all the extracts.

How merging works. A span may carry several dialects (ADK native + OpenInference,
Koog semconv names + legacy indexed content, Strands semconv + span events).
``read_operation`` first settles the kind: the first explicit ``kind`` in
``DIALECTS`` order wins; only when no dialect states one is a ``guess_kind``
used. Then every detected dialect's ``extract`` runs in ``DIALECTS`` order, the
more structured source first (semconv parts JSON, then vendor JSON, then
flattened/indexed keys, then free-form strings), and fills only what the earlier
ones left empty (see ``base.fill``). Unparseable values become ``op.issues``.

How a span is read fast: the spans of one kind carry the same detect keys, so the plan of a key
set (``_Plan``, cached) knows its dialects, which of them the keys confirm, and the ``Reading`` of
that set of dialects: its hooks looked up once, one call each when the set has one dialect.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any

from ...records import STATUS_ERROR, SpanRecord
from . import adk, autogen, langgraph, legacy, openinference, pydantic_ai, semconv, traceloop, vercel
from .base import AGENT, OTHER, TOOL, Message, Operation, RequestedCall, span_name_subject, tool_error

DIALECTS = (semconv, adk, vercel, pydantic_ai, openinference, legacy, traceloop)
FRAMEWORKS = (langgraph, autogen)
"""Modules with structural rules but no span reading of their own (their spans come through the dialects)."""
RULES = tuple(dict.fromkeys(rule for module in (*DIALECTS, *FRAMEWORKS) for rule in getattr(module, "RULES", ())))
"""Every framework's structural rules (``assembly/rules.py``), in registration order; a general rule
several frameworks list runs once."""

IGNORING = tuple(dialect for dialect in DIALECTS if hasattr(dialect, "ignores"))
FINISHING = tuple(dialect for dialect in DIALECTS if hasattr(dialect, "finish"))

# Attribute keys whose presence marks a span as GenAI for the hot path. Checked
# with one dict lookup each, so keep this short and specific.
GENAI_MARKERS: tuple[str, ...] = tuple(
    dict.fromkeys(marker for dialect in DIALECTS for marker in dialect.MARKERS)
)


AGENT_NAME_PREFIXES = ("invoke_agent", "agent_run", "create_agent")
"""Span-name prefixes whose subject names the agent when no attribute does (``invoke_agent support``)."""


def is_genai(attributes: Mapping[str, Any] | None) -> bool:
    """True when the attributes carry any dialect's GenAI marker (hot path: O(1))."""
    if not attributes:
        return False
    for key in GENAI_MARKERS:
        if key in attributes:
            return True
    return False


_BY_KEY: dict[str, tuple[Any, ...]] = {}
for _dialect in DIALECTS:
    for _key in _dialect.DETECT_KEYS:
        _BY_KEY[_key] = (*_BY_KEY.get(_key, ()), _dialect)
_KEYS = frozenset(_BY_KEY)
_SCOPES = tuple(p for d in DIALECTS for p in getattr(d, "DETECT_SCOPES", ()))
_NAMES = tuple(p for d in DIALECTS for p in getattr(d, "DETECT_NAMES", ()))
_EVENTS = frozenset(e for d in DIALECTS for e in getattr(d, "DETECT_EVENTS", ()))
_ORDER = {dialect: position for position, dialect in enumerate(DIALECTS)}
_EVENT_NAME = attrgetter("name")
"""A span event's name, as a C call (a generator over the events was a frame per span with events)."""


class Reading:
    """How a span that carries a given set of dialects is read (``read_operation``): their hooks, in
    ``DIALECTS`` order, looked up once per set (``hasattr`` and membership tests are not repeated per
    span), and one call each where the set has one dialect (the usual case)."""

    __slots__ = ("dialects", "kind", "other_kinds", "ignores", "extract", "finish")

    def __init__(self, dialects: tuple[Any, ...]) -> None:
        self.dialects = dialects
        self.kind = dialects[0].kind
        self.other_kinds = (*(d.kind for d in dialects[1:]), *(d.guess_kind for d in dialects if hasattr(d, "guess_kind")))
        """The other dialects' explicit kinds, then every dialect's guess (asked when the first states none)."""
        self.ignores = _any(tuple(d.ignores for d in dialects if d in IGNORING))
        self.extract = _each(tuple(d.extract for d in dialects))
        self.finish = _each(tuple(d.finish for d in dialects if d in FINISHING))


def _each(functions: tuple[Callable[..., Any], ...]) -> Callable[..., None] | None:
    """One callable that calls each of ``functions`` in order with the same arguments (None for none)."""
    if len(functions) < 2:
        return functions[0] if functions else None

    def each(*args: Any) -> None:
        for function in functions:
            function(*args)

    return each


def _any(functions: tuple[Callable[[SpanRecord], bool], ...]) -> Callable[[SpanRecord], bool] | None:
    """One predicate true when any of ``functions`` is (None for none)."""
    if len(functions) < 2:
        return functions[0] if functions else None
    return lambda record: any(function(record) for function in functions)


_READINGS: dict[tuple[Any, ...], Reading] = {}
"""The reading of each set of dialects a span was found to carry (at most one per subset of ``DIALECTS``)."""


def _reading_of(found: tuple[Any, ...]) -> Reading | None:
    if not found:
        return None
    reading = _READINGS.get(found)
    if reading is None:
        reading = _READINGS[found] = Reading(found)
    return reading


class _Plan:
    """What one set of detect keys says: the dialects it signals, which of them the keys alone confirm
    (``CONFIRM_KEYS``), and, when the keys confirm them all, their ``Reading``; when they confirm all
    but one, the ``Reading`` with and without that one (``ask``)."""

    __slots__ = ("candidates", "unsure", "reading", "ask", "with_asked", "without_asked")

    def __init__(self, keys: frozenset[str]) -> None:
        signalled = {dialect for key in keys for dialect in _BY_KEY[key]}
        self.candidates = tuple(sorted(signalled, key=_ORDER.__getitem__))
        self.unsure = frozenset(d for d in signalled if keys.isdisjoint(getattr(d, "CONFIRM_KEYS", ())))
        self.reading = None if self.unsure else _reading_of(self.candidates)
        self.ask = next(iter(self.unsure)) if len(self.unsure) == 1 else None
        self.with_asked = _reading_of(self.candidates)
        self.without_asked = _reading_of(tuple(d for d in self.candidates if d is not self.ask))


_PLANS: dict[frozenset[str], _Plan] = {}
"""The plan of each set of detect keys seen (spans of one kind share theirs)."""
_MAX_PLANS = 4_096


def _plan(keys: frozenset[str]) -> _Plan:
    plan = _PLANS.get(keys)
    if plan is None:
        plan = _Plan(keys)
        if len(_PLANS) < _MAX_PLANS:
            _PLANS[keys] = plan
    return plan


def _other_signals(record: SpanRecord) -> bool:
    """Does the span signal a dialect by its scope, its name or an event (rather than by its keys)?"""
    return bool(
        (record.scope_name and record.scope_name.startswith(_SCOPES))
        or record.name.startswith(_NAMES)
        or (record.events and not _EVENTS.isdisjoint(map(_EVENT_NAME, record.events)))
    )


def _found(record: SpanRecord, plan: _Plan) -> tuple[Any, ...]:
    """The dialects a span carries, in ``DIALECTS`` order: only those whose signals it has are asked,
    and of those only the ones its keys do not confirm already (``plan`` is its keys')."""
    candidates = plan.candidates
    if _other_signals(record):
        others = {*candidates, *(d for d in DIALECTS if _signals_other(d, record))}
        return tuple(d for d in sorted(others, key=_ORDER.__getitem__) if d.detect(record))
    unsure = plan.unsure
    if not unsure:
        return candidates
    return tuple(d for d in candidates if d not in unsure or d.detect(record))


def detected(record: SpanRecord) -> list[Any]:
    """The dialects a span carries, in ``DIALECTS`` order: only those whose signals it has are asked."""
    return list(_found(record, _plan(_KEYS.intersection(record.attributes))))


def _signals_other(dialect: Any, record: SpanRecord) -> bool:
    return (
        record.scope_name.startswith(getattr(dialect, "DETECT_SCOPES", ()) or ("\0",))
        or record.name.startswith(getattr(dialect, "DETECT_NAMES", ()) or ("\0",))
        or any(e.name in getattr(dialect, "DETECT_EVENTS", ()) for e in record.events)
    )


def read_operation(record: SpanRecord) -> Operation | None:
    """Read a span as a GenAI operation, or None when no dialect recognises it."""
    plan = _PLANS.get(keys := _KEYS.intersection(record.attributes)) or _plan(keys)
    if (
        record.name.startswith(_NAMES)
        or (record.scope_name and record.scope_name.startswith(_SCOPES))
        or (record.events and not _EVENTS.isdisjoint(map(_EVENT_NAME, record.events)))
    ):  # ``_other_signals``, inlined
        reading = _reading_of(_found(record, plan))
    elif plan.ask is not None:
        reading = plan.with_asked if plan.ask.detect(record) else plan.without_asked
    elif plan.unsure:
        reading = _reading_of(_found(record, plan))
    else:
        reading = plan.reading
    if reading is None:
        return None
    # The reading (see the module doc), one call per hook.
    kind = reading.kind(record)
    if kind is None:
        for kind_of in reading.other_kinds:
            kind = kind_of(record)
            if kind is not None:
                break
        else:
            return None
    if kind == OTHER or (reading.ignores is not None and reading.ignores(record)):
        return None
    op = Operation(record, kind)
    reading.extract(record, op)  # type: ignore[misc]
    if reading.finish is not None:
        reading.finish(op)
    if kind == TOOL:
        if op.error is None and (record.status_code == STATUS_ERROR or record.events):
            op.error = tool_error(record)  # whatever the dialect: ERROR status or an exception event
    elif kind == AGENT and not op.agent_name:
        op.agent_name = span_name_subject(record.name, *AGENT_NAME_PREFIXES)
    return op


__all__ = [
    "AGENT_NAME_PREFIXES", "DIALECTS", "GENAI_MARKERS", "Message", "Operation", "RULES", "RequestedCall", "detected",
    "is_genai", "read_operation",
]
