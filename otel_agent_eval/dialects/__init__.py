"""Attribute dialects: each turns one span's attributes into an ``Operation``.

An ``Operation`` is the dialect-neutral reading of one span: what kind of GenAI
operation it is (agent, llm, tool, step, workflow) and the fields assembly
needs. Detection is per span; a span may carry several dialects, and they are
merged in ``DIALECTS`` order, the more structured source first: a later dialect
only fills fields an earlier one left empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..records import SpanRecord
from . import semconv
from .base import Message, Operation, RequestedCall

DIALECTS = (semconv,)

# Attribute keys whose presence marks a span as GenAI for the hot path. Checked
# with one dict lookup each, so keep this short and specific.
GENAI_MARKERS: tuple[str, ...] = tuple(
    dict.fromkeys(marker for dialect in DIALECTS for marker in dialect.MARKERS)
)


def is_genai(attributes: Mapping[str, Any] | None) -> bool:
    """True when the attributes carry any dialect's GenAI marker (hot path: O(1))."""
    if not attributes:
        return False
    for key in GENAI_MARKERS:
        if key in attributes:
            return True
    return False


def read_operation(record: SpanRecord) -> Operation | None:
    """Read a span as a GenAI operation, or None when no dialect recognises it."""
    op: Operation | None = None
    for dialect in DIALECTS:
        if not dialect.detect(record):
            continue
        if op is None:
            op = Operation(record=record)
        dialect.extract(record, op)
    if op is None or op.kind is None:
        return None
    return op


__all__ = ["Message", "Operation", "RequestedCall", "GENAI_MARKERS", "is_genai", "read_operation"]
