"""One pass over a trace's spans: each read into an ``Operation`` (or nothing), ancestry, hints.

``TraceIndex`` is what the core and the framework rules query: ``ops`` (span id -> operation,
our own evaluation spans left out), ``ancestors`` (nearest first), ``nearest`` (the nearest
ancestor operation of a kind, from ``above``: where a span hangs, made once per span from its
parent's and shared by siblings), ``top`` (the local root), and
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


def _sets_a_hint(op: Operation) -> object:
    """Does an operation set one of the ``HINT_FIELDS``? Asked of every operation, and most set none: the fields
    written out, each read by a specialised attribute load (``attrgetter`` of slots costs ~4x); a test holds this
    list to ``HINT_FIELDS`` (tests/assembly/test_index_places.py)."""
    return op.transfer_argument or op.parent_node_id or op.agent_turn or op.graph_namespace or op.handoff_to


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
        self._placed: dict[int, Above] = {}
        """``above`` of the spans placed so far; emptied when the operations change."""
        self._below: dict[int, Above] = {}
        """Span id -> the ``above`` its children share."""
        ops = self.ops
        kinds = self.kinds
        for record in records.values():  # ``add`` of each operation, written out
            if record.scope_name == OWN_SCOPE:
                continue  # kept for ancestry only: our own evaluation spans are no agent
            op = read_operation(record)
            if op is not None:
                ops[op.span_id] = op
                kind = op.kind
                kinds[kind] = kinds.get(kind, 0) + 1  # type: ignore[index, arg-type]
                if _sets_a_hint(op):
                    self._note_hints(op)
        if AGENT in kinds:
            self.hints.add(AGENT)

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
        self.kinds[kind] = self.kinds.get(kind, 0) + 1  # type: ignore[index, arg-type]
        if kind == AGENT:
            self.hints.add(AGENT)
        if _sets_a_hint(op):
            self._note_hints(op)
        if self._placed:
            self._placed.clear()

    def _note_hints(self, op: Operation) -> None:
        for name in HINT_FIELDS:
            if getattr(op, name):
                self.hints.add(name)

    def remove(self, span_ids: list[int]) -> None:
        for span_id in span_ids:
            kind = self.ops.pop(span_id).kind
            self.kinds[kind] -= 1  # type: ignore[index]
            if not self.kinds[kind]:  # type: ignore[index]
                del self.kinds[kind]  # type: ignore[arg-type]
        if span_ids:
            self._placed.clear()

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

    def above(self, span_id: int) -> Above:
        """Where a span hangs: its depth, per kind the nearest ancestor operation (with its depth), its
        local root. Made once per span, from its parent's: a span's ancestors are its parent's plus the
        parent, so the children of one span share one ``Above`` and nothing walks up per span."""
        placed = self._placed
        found = placed.get(span_id)
        if found is None:
            # ``_below`` is true while anything is placed: both are made together, and a change of the
            # operations empties ``_placed``.
            found = self._below.get(self.records[span_id].parent_span_id) if placed else None  # type: ignore[arg-type]
            if found is not None:
                placed[span_id] = found  # the common case: a sibling placed already
            else:
                found = self._place(span_id)
        return found

    def _place(self, span_id: int) -> Above:
        """``above`` of a span and of its ancestors not yet placed: up to a placed one or the root, then down."""
        records = self.records
        placed = self._placed
        below = self._below
        if not placed:
            below.clear()  # made for operations since changed
        chain = [span_id]  # not yet placed, each the child of the next
        while True:
            parent = records[chain[-1]].parent_span_id
            if parent is None or parent not in records:
                top = chain.pop()
                above = placed[top] = Above(0, NO_KINDS, top)
                break
            placed_parent = placed.get(parent)
            if placed_parent is not None:
                if placed_parent.walked:
                    return self._place_by_walk(span_id)
                above = placed_parent
                break
            if parent in chain:
                return self._place_by_walk(span_id)
            chain.append(parent)
        holder = records[chain[-1]].parent_span_id if chain else None
        for child in reversed(chain):  # ``above`` is the place of ``holder``, the parent of ``child``
            shared = below.get(holder)  # type: ignore[arg-type]
            if shared is None:
                op = self.ops.get(holder)  # type: ignore[arg-type]
                kinds = above.kinds
                if op is not None:
                    kinds = dict(kinds)
                    kinds[op.kind] = (above.depth, op)  # type: ignore[index]
                shared = below[holder] = Above(above.depth + 1, kinds, above.root)  # type: ignore[index]
            above = placed[child] = shared
            holder = child
        return placed[span_id]

    def _place_by_walk(self, span_id: int) -> Above:
        """``above`` of a span in a parent cycle, or under one (no root above it), from ``ancestors``:
        depths counted from the span (its ancestors' are negative); its children are placed the same way."""
        kinds: dict[str, tuple[int, Operation]] = {}
        chain = self.ancestors(span_id)
        for distance, ancestor in enumerate(chain):
            op = self.ops.get(ancestor)
            if op is not None and op.kind not in kinds:
                kinds[op.kind] = (-distance - 1, op)  # type: ignore[index]
        found = self._placed[span_id] = Above(0, kinds, chain[-1] if chain else span_id, walked=True)
        return found

    def nearest(self, span_id: int, kind: str, stop: int | None = None) -> Operation | None:
        """The nearest ancestor operation of ``kind``; None when ``stop`` comes first."""
        if kind not in self.kinds:
            return None
        above = self.above(span_id)
        found = above.kinds.get(kind)
        if found is None:
            return None
        if stop is not None and self.stopped(span_id, above, found[0], stop):
            return None
        return found[1]

    def stopped(self, span_id: int, above: Above, depth: int, stop: int) -> bool:
        """Is ``stop`` an ancestor of the span at ``depth`` or nearer (between it and an operation at ``depth``)?"""
        agent = above.kinds.get(AGENT)
        if agent is not None and agent[1].span_id == stop:  # the common stop: the span's own agent
            return agent[0] >= depth
        return stop in self.ancestors(span_id)[: above.depth - depth]

    def top(self, span_id: int) -> SpanRecord:
        return self.records[self.above(span_id).root]


class Above:
    """A span's place in the tree (``TraceIndex.above``)."""

    __slots__ = ("depth", "kinds", "root", "walked")

    def __init__(self, depth: int, kinds: dict[str, tuple[int, Operation]], root: int, walked: bool = False) -> None:
        self.depth = depth
        self.kinds = kinds
        """Kind -> (depth, operation) of the nearest ancestor operation of that kind: shared, never changed."""
        self.root = root
        """The local root: the last of ``ancestors``, else the span itself."""
        self.walked = walked
        """Placed by ``_place_by_walk`` (depths counted from the span), not from its parent's place."""


NO_KINDS: dict[str, tuple[int, Operation]] = {}
