"""``indexed_fields`` picks a span's flattened keys as ``str.startswith`` and a regex would (it classifies
each key once and remembers it: ``indexed.Flattened``): the same keys, for any key.

Checked against a reference reading (``startswith``, then a regex per key) over keys drawn from the
characters around the range's bounds (``-`` before ``.``, ``/`` after it, digits, non-ASCII).
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_agent_eval.assembly.dialects.indexed import indexed_fields

PREFIXES = (("gen_ai.completion.", "."), ("llm.output_messages.", ".message."), ("tool_calls.", ".tool_call."))


def reference(attrs: dict[str, Any], prefix: str, infix: str) -> dict[int, dict[str, Any]]:
    pattern = re.compile(re.escape(prefix) + r"([0-9]+)" + re.escape(infix) + r"(.+)", re.DOTALL)
    grouped: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        match = pattern.fullmatch(key) if key.startswith(prefix) else None
        if match:
            grouped.setdefault(int(match.group(1)), {})[match.group(2)] = value
    return grouped


stems = st.sampled_from([p for p, _ in PREFIXES] + [p[:-1] for p, _ in PREFIXES] + ["gen_ai.completion/", "gen_ai.completion-",
                                                                                  "llm.output_messages/", "tool_calls/", ""])
tails = st.text(alphabet="-./01é9mesagtool_cinfz", max_size=14)
keys = st.builds(lambda stem, tail: stem + tail, stems, tails)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(keys, st.integers(), max_size=12))
def test_the_range_picks_the_keys_startswith_picks(attrs: dict[str, int]) -> None:
    for prefix, infix in PREFIXES:
        assert indexed_fields(attrs, prefix, infix) == reference(attrs, prefix, infix)


def test_the_bounds_of_the_range() -> None:
    attrs = {
        "gen_ai.completion": 1,  # the prefix without its dot: before the range
        "gen_ai.completion-0.role": 2,  # '-' sorts before '.'
        "gen_ai.completion/0.other": 3,  # '/' is the incremented last character: the range's end, excluded
        "gen_ai.completion.0.role": 4,
        "gen_ai.completion.0.\U0010ffff": 5,  # the highest code point after the prefix: inside
        "gen_ai.completions.0.role": 6,
    }
    assert indexed_fields(attrs, "gen_ai.completion.") == {0: {"role": 4, "\U0010ffff": 5}}
