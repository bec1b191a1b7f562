"""One pass over a trace's spans: each read into an ``Operation`` (or nothing), ancestry, hints.

``TraceIndex`` is what the core and the framework rules query: ``ops`` (span id -> operation,
our own evaluation spans left out), ``ancestors`` (nearest first), ``nearest`` (the nearest
ancestor operation of a kind, one walk per span, cached), ``top`` (the local root), and
``hints``: the ``Operation`` fields the rules are triggered by (``Rule.hint``) that some
operation sets ("agent" when an operation is an agent), and ``kinds``. Rules that add or remove operations do it through ``add`` / ``remove``
(``read_as`` reads a span again as the kind a rule found it to be),
which keep the caches true.
"""

from __future__ import annotations

from ..records import OWN_SCOPE, SpanRecord
from .dialects import RULES, detected, read_operation
from .dialects.base import AGENT, Operation

HINT_FIELDS = tuple(dict.fromkeys(rule.hint for rule in RULES if rule.hint != AGENT))
"""The ``Operation`` fields some rule is triggered by."""


class TraceIndex:
    """The operations of one trace's spans and the tree they hang in."""

    def __init__(self, records: dict[int, SpanRecord]) -> None:
        self.records = records
        self.ops: dict[int, Operation] = {}
        self.kinds: dict[str, int] = {}
        """How many operations of each kind: a kind the trace lacks is never looked for up the tree."""
        self.hints: set[str] = set()
        """The rule hints (``HINT_FIELDS``) some operation sets, and "agent" when there is an agent."""
        self._ancestors: dict[int, list[int]] = {}
        self._nearest: dict[int, dict[str, tuple[int, Operation]]] = {}
        for span_id, record in records.items():
            if record.scope_name == OWN_SCOPE:
                continue  # kept for ancestry only: our own evaluation spans are no agent
            op = read_operation(record)
            if op is not None:
                self.add(op)

    @staticmethod
    def read_as(record: SpanRecord, kind: str) -> Operation:
        """``record`` read as an operation of ``kind`` by every dialect it carries: a rule's second
        reading of a span the first pass read as something else (or nothing)."""
        op = Operation(record=record, kind=kind)
        for dialect in detected(record):
            dialect.extract(record, op)
        return op

    def add(self, op: Operation) -> None:
        self.ops[op.span_id] = op
        kind = op.kind
        self.kinds[kind] = self.kinds.get(kind, 0) + 1  # type: ignore[index]
        if kind == AGENT:
            self.hints.add(AGENT)
        for name in HINT_FIELDS:
            if getattr(op, name):
                self.hints.add(name)
        if self._nearest:
            self._nearest.clear()

    def remove(self, span_ids: list[int]) -> None:
        for span_id in span_ids:
            kind = self.ops.pop(span_id).kind
            self.kinds[kind] -= 1  # type: ignore[index]
            if not self.kinds[kind]:  # type: ignore[index]
                del self.kinds[kind]  # type: ignore[arg-type]
        if span_ids:
            self._nearest.clear()

    def ancestors(self, span_id: int) -> list[int]:
        """Known ancestors, nearest first; cycles and missing parents end the walk."""
        cached = self._ancestors.get(span_id)
        if cached is not None:
            return cached
        records = self.records
        chain: list[int] = []
        seen = {span_id}
        current = records[span_id].parent_span_id
        while current is not None and current in records and current not in seen:
            chain.append(current)
            seen.add(current)
            current = records[current].parent_span_id
        self._ancestors[span_id] = chain
        return chain

    def nearest(self, span_id: int, kind: str, stop: int | None = None) -> Operation | None:
        """The nearest ancestor operation of ``kind``; None when ``stop`` comes first."""
        if kind not in self.kinds:
            return None
        above = self._nearest.get(span_id)
        if above is None:
            above = self._nearest_by_kind(span_id)
        found = above.get(kind)
        if found is None:
            return None
        if stop is not None:
            distance = found[0]  # ``ancestors`` is cached: ``_nearest_by_kind`` walked it
            if stop in self._ancestors[span_id][: distance + 1]:
                return None
        return found[1]

    def _nearest_by_kind(self, span_id: int) -> dict[str, tuple[int, Operation]]:
        """Per kind, the nearest ancestor operation and its position in ``ancestors``; one walk per span."""
        cached: dict[str, tuple[int, Operation]] = {}
        ops = self.ops
        for distance, ancestor in enumerate(self.ancestors(span_id)):
            op = ops.get(ancestor)
            if op is not None and op.kind not in cached:
                cached[op.kind] = (distance, op)
        self._nearest[span_id] = cached
        return cached

    def top(self, span_id: int) -> SpanRecord:
        chain = self.ancestors(span_id)
        return self.records[chain[-1]] if chain else self.records[span_id]
