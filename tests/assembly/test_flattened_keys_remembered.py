"""A ``Flattened`` reader remembers how each key it met splits (``indexed.py``): what it reads from a
span does not depend on what it met before, on how full its memory is, or on where a key's field
is flattened in turn (a message's ``tool_calls.{j}.*``).
"""

from __future__ import annotations

from otel_agent_eval.assembly.dialects import indexed, read_operation
from otel_agent_eval.assembly.dialects.indexed import Flattened
from otel_agent_eval.records import SpanRecord


def _read(reader: Flattened, attrs: dict[str, object]) -> dict[int, dict[str, object]]:
    return reader.fields(attrs)


def test_a_span_reads_the_same_the_first_time_and_after() -> None:
    reader = Flattened("gen_ai.completion.", nested=(("tool_calls.", "."),))
    attrs = {
        "gen_ai.completion.0.role": "assistant",
        "other": 1,
        "gen_ai.completion.0.tool_calls.1.name": "search",
        "gen_ai.completion.1.role": "tool",
        "gen_ai.completion.x.role": "not an index",
    }
    first, again = reader.picks(attrs), reader.picks(dict(attrs))
    assert first == again == [
        ("gen_ai.completion.0.role", 0, "role", None),
        ("gen_ai.completion.0.tool_calls.1.name", 0, "tool_calls.1.name", (0, 1, "name")),
        ("gen_ai.completion.1.role", 1, "role", None),
    ]
    # a key met for the first time beside remembered ones
    assert reader.fields({**attrs, "gen_ai.completion.2.content": "new"})[2] == {"content": "new"}


def test_two_spellings_of_one_field_keep_the_later_key_in_key_order() -> None:
    reader = Flattened("gen_ai.completion.")
    for _ in range(2):  # met, then remembered
        assert _read(reader, {"gen_ai.completion.0.role": "a", "gen_ai.completion.00.role": "b"}) == {0: {"role": "b"}}
        assert _read(reader, {"gen_ai.completion.00.role": "b", "gen_ai.completion.0.role": "a"}) == {0: {"role": "a"}}


def test_keys_beyond_the_memory_bound_are_still_read() -> None:
    reader = Flattened("p.")
    filler = {f"p.{i}.f": i for i in range(indexed.MAX_KEYS)}
    reader.picks(filler)
    assert len(reader._splits) == indexed.MAX_KEYS  # bounded: nothing more is remembered
    late = {"p.0.f": "known", f"p.{indexed.MAX_KEYS}.f": "not remembered", "q": 1}
    for _ in range(2):
        assert _read(reader, late) == {0: {"f": "known"}, indexed.MAX_KEYS: {"f": "not remembered"}}
    assert len(reader._splits) == indexed.MAX_KEYS


def test_indexed_tool_calls_read_from_the_nested_split() -> None:
    """OpenLLMetry's indexed completion: the tool calls of a message, in index order, however its keys come."""
    attrs = {
        "llm.request.type": "chat",
        "gen_ai.completion.0.tool_calls.1.name": "second",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.tool_calls.1.arguments": '{"b": 2}',
        "gen_ai.completion.0.tool_calls.0.name": "first",
        "gen_ai.completion.0.tool_calls.0.id": "call_0",
        "gen_ai.completion.0.tool_calls.0.arguments": '{"a": 1}',
        "gen_ai.completion.0.tool_calls.x.name": "not an index",
        "gen_ai.completion.0.tool_calls.2.arguments": "{",  # no name: an issue, no call
        "gen_ai.completion.0.tool_calls.3.name": "broken",
        "gen_ai.completion.0.tool_calls.3.arguments": "{bad",  # kept raw, with an issue naming the attribute
    }
    record = SpanRecord(trace_id=1, span_id=2, parent_span_id=None, name="chat", start_time_unix_nano=0,
                        end_time_unix_nano=1, attributes=attrs)
    for _ in range(2):
        op = read_operation(record)
        assert op is not None and op.output_messages is not None
        calls = op.output_messages[0].tool_calls
        assert [(c.name, c.arguments, c.call_id) for c in calls] == [
            ("first", {"a": 1}, "call_0"), ("second", {"b": 2}, None), ("broken", "{bad", None),
        ]
        assert [issue.split(" (")[0] for issue in op.issues] == [
            "gen_ai.completion.0.tool_calls.2: no name", "gen_ai.completion.0.tool_calls.3.arguments: malformed JSON",
        ]


def _layouts(picks: list[tuple[str, int, str, object]]) -> tuple[tuple[str, ...], ...]:
    """A compile function for the tests: each index's keys, sorted (what a layout may depend on)."""
    by_index: dict[int, list[str]] = {}
    for key, index, _, _ in picks:
        by_index.setdefault(index, []).append(key)
    return tuple(tuple(sorted(by_index[i])) for i in sorted(by_index))


def test_a_layout_is_remembered_per_set_of_picked_keys_once_every_key_is_known() -> None:
    reader = Flattened("p.", compile=_layouts)
    attrs = {"p.1.f": 1, "q": 2, "p.0.g": 3, "p.0.f": 4}
    expected = (("p.0.f", "p.0.g"), ("p.1.f",))
    assert reader.layout(attrs) == expected  # met for the first time: compiled from the picks in key order
    assert not reader._layouts
    assert reader.layout({"q": 0, "p.0.f": 0, "p.1.f": 0, "p.0.g": 0}) == expected  # every key known: remembered
    assert list(reader._layouts.values()) == [expected]
    assert reader.layout(dict(reversed(attrs.items()))) is reader._layouts[frozenset(("p.0.f", "p.0.g", "p.1.f"))]
    assert reader.layout({"p.0.f": 1, "q": 2, "r": 3}) == (("p.0.f",),)  # a new key: compiled, not remembered
    assert reader.layout({"q": 1}) == ()


def test_two_spellings_of_one_index_are_never_read_through_a_layout() -> None:
    """``0`` and ``00`` are the same message: which key's value counts depends on key order, which a
    set of keys does not keep, so a span with a key spelled so is read from its picks each time."""
    reader = Flattened("p.", nested=(("c.", "."),), compile=list)
    for key in ("p.00.f", "p.0.c.01.g"):
        for _ in range(3):
            assert reader.layout({"p.0.f": 1, key: 2}) == reader.picks({"p.0.f": 1, key: 2})
        assert key not in reader._known and not reader._layouts


def test_legacy_messages_read_through_a_layout_as_from_their_picks() -> None:
    """The layout path of the indexed reader (``legacy._indexed``) against the same keys read the first
    time (picks in key order) and with a key spelled twice (``0``/``00``: never through a layout)."""
    from otel_agent_eval.assembly.dialects import legacy

    attrs = {
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "text",
        "gen_ai.completion.0.tool_calls.0.id": "c0",
        "gen_ai.completion.0.tool_calls.0.name": "search",
        "gen_ai.completion.0.tool_calls.0.arguments": '{"q": 1}',
        "gen_ai.completion.1.role": "tool",
        "gen_ai.completion.1.tool_call_id": "c0",
        "gen_ai.completion.1.content": "found",
        "gen_ai.completion.2.function_call.name": "old",
        "gen_ai.completion.2.function_call.arguments": "{}",
    }
    read = [legacy._indexed(dict(attrs), [], "completion") for _ in range(3)]
    assert read[0] == read[1] == read[2]
    assert [(m.role, m.texts, [(c.name, c.arguments, c.call_id) for c in m.tool_calls], m.tool_results) for m in read[0]] == [
        ("assistant", ["text"], [("search", {"q": 1}, "c0")], []),
        ("tool", [], [], [("c0", "found")]),
        ("unknown", [], [("old", {}, None)], []),
    ]
    twice = {**attrs, "gen_ai.completion.00.role": "user"}
    assert [m.role for m in legacy._indexed(twice, [], "completion")] == ["user", "tool", "unknown"]
    assert [m.role for m in legacy._indexed(dict(reversed(twice.items())), [], "completion")] == ["assistant", "tool", "unknown"]
