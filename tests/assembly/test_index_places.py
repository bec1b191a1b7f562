"""``TraceIndex.above`` (a span's place, made once per span from its parent's) answers ``nearest`` and
``top`` exactly as walking each span's ``ancestors`` does: on random forests with missing parents
and parent cycles, and again after rules add and remove operations."""

from __future__ import annotations

import random

import pytest

from otel_agent_eval.assembly.dialects.base import AGENT, LLM, STEP, TOOL, Operation
from otel_agent_eval.assembly.index import HINT_FIELDS, TraceIndex, _sets_a_hint
from otel_agent_eval.records import SpanRecord

KINDS = (AGENT, LLM, TOOL, STEP)


def walked_nearest(index: TraceIndex, span_id: int, kind: str, stop: int | None) -> Operation | None:
    """The nearest ancestor operation of ``kind`` by walking ``ancestors``; None when ``stop`` comes first."""
    for ancestor in index.ancestors(span_id):
        if ancestor == stop:
            return None
        op = index.ops.get(ancestor)
        if op is not None and op.kind == kind:
            return op
    return None


def random_index(rng: random.Random, size: int) -> TraceIndex:
    records = {}
    for span_id in range(1, size + 1):
        roll = rng.random()
        if roll < 0.1:
            parent = None
        elif roll < 0.15:
            parent = 10_000 + span_id  # a parent that is not in the trace
        else:
            parent = rng.randint(1, size)  # earlier or later: cycles and self-parents happen
        records[span_id] = SpanRecord(trace_id=1, span_id=span_id, parent_span_id=parent, name=f"s{span_id}",
                                      start_time_unix_nano=span_id, end_time_unix_nano=span_id + 1)
    index = TraceIndex(records)  # plain spans: no operations yet
    for span_id in rng.sample(sorted(records), size // 2):
        index.add(Operation(record=records[span_id], kind=rng.choice(KINDS)))
    return index


def assert_same_as_walking(index: TraceIndex, rng: random.Random) -> None:
    span_ids = list(index.records)
    rng.shuffle(span_ids)  # asked in any order: a child before its parent, too
    for span_id in span_ids:
        chain = index.ancestors(span_id)
        assert index.top(span_id).span_id == (chain[-1] if chain else span_id)
        stops = [None, span_id, *chain, rng.choice(list(index.records))]
        for kind in KINDS:
            for stop in stops:
                assert index.nearest(span_id, kind, stop) is walked_nearest(index, span_id, kind, stop)


@pytest.mark.parametrize("seed", range(40))
def test_nearest_and_top_match_walking_the_ancestors(seed: int) -> None:
    rng = random.Random(seed)
    index = random_index(rng, rng.randint(1, 40))
    assert_same_as_walking(index, rng)
    # A rule adds an operation and removes another: the places made before are not reused.
    plain = [span_id for span_id in index.records if span_id not in index.ops]
    if plain:
        index.add(Operation(record=index.records[rng.choice(plain)], kind=rng.choice(KINDS)))
    assert_same_as_walking(index, rng)
    index.remove([rng.choice(list(index.ops))])
    assert_same_as_walking(index, rng)


def test_the_hint_check_reads_exactly_the_rules_hint_fields() -> None:
    """``_sets_a_hint`` (the hint fields written out) reads every ``Operation`` field some rule is triggered by,
    and no other: a rule with a new hint field fails here until the field is added there."""
    assert set(_sets_a_hint.__code__.co_names) == set(HINT_FIELDS)
    record = SpanRecord(trace_id=1, span_id=1, parent_span_id=None, name="s", start_time_unix_nano=0,
                        end_time_unix_nano=1)
    assert not _sets_a_hint(Operation(record=record, kind=TOOL))
    for name in HINT_FIELDS:
        op = Operation(record=record, kind=TOOL)
        setattr(op, name, "set")
        assert _sets_a_hint(op), name
        index = TraceIndex({})
        index.add(op)
        assert index.hints == {name}
