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
  with ``detect``;
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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...records import SpanRecord
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


_CANDIDATES: dict[frozenset[str], tuple[Any, ...]] = {}
"""The signalled dialects of a set of detect keys, in ``DIALECTS`` order (spans of one kind share theirs)."""
_MAX_CANDIDATE_SETS = 4_096


def _candidates(keys: frozenset[str]) -> tuple[Any, ...]:
    found = _CANDIDATES.get(keys)
    if found is None:
        signalled = {dialect for key in keys for dialect in _BY_KEY[key]}
        found = tuple(sorted(signalled, key=_ORDER.__getitem__))
        if len(_CANDIDATES) < _MAX_CANDIDATE_SETS:
            _CANDIDATES[keys] = found
    return found


def detected(record: SpanRecord) -> list[Any]:
    """The dialects a span carries, in ``DIALECTS`` order: only those whose signals it has are asked."""
    candidates = _candidates(_KEYS.intersection(record.attributes))
    if (
        (record.scope_name and record.scope_name.startswith(_SCOPES))
        or record.name.startswith(_NAMES)
        or (record.events and not _EVENTS.isdisjoint(e.name for e in record.events))
    ):
        others = {*candidates, *(d for d in DIALECTS if _signals_other(d, record))}
        candidates = tuple(sorted(others, key=_ORDER.__getitem__))
    return [dialect for dialect in candidates if dialect.detect(record)]


def _signals_other(dialect: Any, record: SpanRecord) -> bool:
    return (
        record.scope_name.startswith(getattr(dialect, "DETECT_SCOPES", ()) or ("\0",))
        or record.name.startswith(getattr(dialect, "DETECT_NAMES", ()) or ("\0",))
        or any(e.name in getattr(dialect, "DETECT_EVENTS", ()) for e in record.events)
    )


def read_operation(record: SpanRecord) -> Operation | None:
    """Read a span as a GenAI operation, or None when no dialect recognises it."""
    found = detected(record)
    if not found:
        return None
    kind = None
    for dialect in found:
        kind = dialect.kind(record)
        if kind is not None:
            break
    if kind is None:
        kind = next(
            (k for d in found if hasattr(d, "guess_kind") and (k := d.guess_kind(record)) is not None),
            None,
        )
    if kind is None or kind == OTHER:
        return None
    for dialect in found:  # ``found`` is in ``DIALECTS`` order, like ``IGNORING`` and ``FINISHING``
        if dialect in IGNORING and dialect.ignores(record):
            return None
    op = Operation(record=record, kind=kind)
    for dialect in found:
        dialect.extract(record, op)
    for dialect in found:
        if dialect in FINISHING:
            dialect.finish(op)
    if op.kind == TOOL and op.error is None:  # whatever the dialect: ERROR status or an exception event
        op.error = tool_error(record)
    if op.kind == AGENT and not op.agent_name:
        op.agent_name = span_name_subject(record.name, *AGENT_NAME_PREFIXES)
    return op


__all__ = [
    "AGENT_NAME_PREFIXES", "DIALECTS", "GENAI_MARKERS", "Message", "Operation", "RULES", "RequestedCall", "detected",
    "is_genai", "read_operation",
]
