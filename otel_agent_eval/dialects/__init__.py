"""Attribute dialects: each turns one span's attributes into an ``Operation``.

An ``Operation`` is the dialect-neutral reading of one span: what kind of GenAI
operation it is (agent, llm, tool, step, workflow) and the fields assembly
needs. Every dialect module has:

* ``MARKERS``: attribute keys present on (nearly) every span of that dialect, for
  the hot path; ``detect(record)``: does this span carry the dialect at all;
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

from ..records import SpanRecord
from . import adk, legacy, openinference, pydantic_ai, semconv, traceloop, vercel
from .base import AGENT, OTHER, Message, Operation, RequestedCall, langgraph_task, span_name_subject

DIALECTS = (semconv, adk, vercel, pydantic_ai, openinference, legacy, traceloop)

# Attribute keys whose presence marks a span as GenAI for the hot path. Checked
# with one dict lookup each, so keep this short and specific.
IGNORING = tuple(dialect for dialect in DIALECTS if hasattr(dialect, "ignores"))
FINISHING = tuple(dialect for dialect in DIALECTS if hasattr(dialect, "finish"))

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


def read_operation(record: SpanRecord) -> Operation | None:
    """Read a span as a GenAI operation, or None when no dialect recognises it."""
    detected = [dialect for dialect in DIALECTS if dialect.detect(record)]
    if not detected:
        return None
    kind = None
    for dialect in detected:
        kind = dialect.kind(record)
        if kind is not None:
            break
    if kind is None:
        kind = next(
            (k for d in detected if hasattr(d, "guess_kind") and (k := d.guess_kind(record)) is not None),
            None,
        )
    if kind is None or kind == OTHER:
        return None
    for dialect in IGNORING:
        if dialect.ignores(record) and dialect in detected:
            return None
    op = Operation(record=record, kind=kind)
    for dialect in detected:
        dialect.extract(record, op)
    for dialect in FINISHING:
        if dialect in detected:
            dialect.finish(op)
    if op.kind == AGENT and not op.agent_name:
        op.agent_name = span_name_subject(record.name, *AGENT_NAME_PREFIXES)
    return op


DEFAULT_GRAPH_NAME = "LangGraph"
"""The name LangGraph gives a compiled graph (and ``create_react_agent``) when none is passed."""


def graph_namespace(record: SpanRecord) -> str | None:
    """The checkpoint namespace of the LangGraph node task a span runs in (``base.langgraph_task``)."""
    return langgraph_task(record.attributes)[1]


def read_subgraph_agent(record: SpanRecord) -> Operation:
    """A LangGraph graph run as a node of another graph (a chain span), read as the agent it is.

    Every dialect the span carries fills it in; its name is the compiled graph's
    (``create_react_agent(name=...)``), else the node it runs as.
    """
    op = Operation(record=record, kind=AGENT)
    for dialect in DIALECTS:
        if dialect.detect(record):
            dialect.extract(record, op)
    if op.agent_name is None:
        op.agent_name = record.name if record.name and record.name != DEFAULT_GRAPH_NAME else op.graph_node
    return op


__all__ = [
    "AGENT_NAME_PREFIXES", "Message", "Operation", "RequestedCall", "GENAI_MARKERS", "graph_namespace", "is_genai",
    "read_operation", "read_subgraph_agent",
]
