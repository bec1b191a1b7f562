"""Completion: a completed trace's records -> agent runs, ready for the sampler. Pure but for the conversation store.

Steps, in order: SDK spans become ``SpanRecord``s (only now, off the hot path);
GenAI content log records are folded into the spans they belong to
(``join_log_records``); ``assemble`` makes the runs; conversation turns are
attached; nested runs are flattened, each evaluated on its own; a trace cut for
size marks its runs (``AgentTrace.spans_dropped``).
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..assembly import assemble
from ..assembly.dialects import is_genai
from ..assembly.dialects.base import plain
from ..model import AgentTrace
from ..records import (
    LogRecordData,
    SpanEvent,
    SpanRecord,
    event_name_of,
    from_readable_span,
    raw_attributes,
)
from .buffer import CompletedTrace
from .conversations import ConversationStore

DETAILS_EVENT = "gen_ai.client.inference.operation.details"
TOOL_DEFINITIONS = "gen_ai.tool.definitions"


def runs_of(completed: CompletedTrace, conversations: ConversationStore | None,
            on_unreadable: Callable[[], None]) -> list[AgentTrace]:
    """Every agent run of a completed trace, nested runs flattened. Raises what assembly raises."""
    runs = assemble(join_log_records(records_of(completed.spans, on_unreadable), completed.logs))
    if conversations is not None:
        runs = [conversations.attach(run) for run in runs]
    agent_traces = flatten(runs)
    for run in agent_traces if completed.dropped else ():
        run.spans_dropped = completed.dropped  # the judge is told, and skips what it cannot see
    return agent_traces


def records_of(spans: Sequence[Any], on_unreadable: Callable[[], None]) -> list[SpanRecord]:
    """SDK spans become SpanRecords here, once their trace is complete; a span that cannot be read is reported."""
    records = []
    for span in spans:
        if isinstance(span, SpanRecord):
            records.append(span)
            continue
        try:
            records.append(from_readable_span(span, content=is_genai(raw_attributes(span))))
        except Exception:  # noqa: BLE001 - one unreadable span is counted, the trace goes on
            on_unreadable()
    return records


def flatten(traces: Sequence[AgentTrace]) -> list[AgentTrace]:
    """Every agent invocation, nested ones included: each is evaluated on its own."""
    out: list[AgentTrace] = []
    for trace in traces:
        out.append(trace)
        out.extend(flatten(trace.children))
    return out


def _body_attributes(body: Any) -> dict[str, Any]:
    """A log body as event attributes; structured values (tuples, read-only mappings) as plain lists/dicts."""
    if isinstance(body, Mapping):
        return {str(k): plain(v) for k, v in body.items()}
    if body is None:
        return {}
    return {"content": plain(body)}


def _attributes(log: LogRecordData) -> dict[str, Any]:
    return {**{str(k): plain(v) for k, v in (log.attributes or {}).items()}, **_body_attributes(log.body)}


TOOL_DEFINITIONS = "gen_ai.tool.definitions"


def _fuller_definitions(candidate: Any, current: Any) -> bool:
    """Do ``candidate`` tool definitions have parameters where ``current`` has none?

    With content capture off for one signal, the GenAI instrumentation writes the definitions
    there without parameters (ADK 2 with event-only capture: on the span; with span-only
    capture: in the log record); the other signal's copy is the complete one.
    """

    def has_parameters(value: Any) -> bool:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return False
        return isinstance(value, (list, tuple)) and any(
            isinstance(item, Mapping) and item.get("parameters") for item in value)

    return has_parameters(candidate) and not has_parameters(current)


def join_log_records(records: Sequence[SpanRecord], logs: Sequence[LogRecordData]) -> list[SpanRecord]:
    """Fold GenAI log records into the span records they belong to. Pure.

    Logs whose span is not among ``records`` are ignored (the caller counts them).
    """
    if not logs:
        return list(records)
    by_span: dict[int, list[LogRecordData]] = defaultdict(list)
    for log in logs:
        if log.span_id is not None:
            by_span[log.span_id].append(log)
    joined = []
    for record in records:
        mine = by_span.get(record.span_id)
        if not mine:
            joined.append(record)
            continue
        attributes = dict(record.attributes)
        events = list(record.events)
        for log in sorted(mine, key=lambda entry: entry.time_unix_nano):
            name = event_name_of(log.event_name, log.attributes) or "log"
            if name == DETAILS_EVENT:
                for key, value in _attributes(log).items():
                    if key not in attributes or (key == TOOL_DEFINITIONS and _fuller_definitions(value, attributes[key])):
                        attributes[key] = value
            else:
                events.append(SpanEvent(name, log.time_unix_nano, _attributes(log)))
        joined.append(dataclasses.replace(record, attributes=attributes, events=tuple(events)))
    return joined


