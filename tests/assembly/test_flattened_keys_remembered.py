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
