"""``fast_encode`` writes exactly what the ``JSONEncoder`` it is given writes, for every option the project uses."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from otel_agent_eval.jsontext import fast_encode

VALUES: list[Any] = [
    {"b": [1, 2.5, None, True], "a": "\u00e9\n\t\"q\"", "c": {"z": [], "y": {}}},
    "top-level \u2603 string", 0, -1.5, 1e300, None, [], {},
    {3: "int key", 1.5: "float key", True: "bool key"},
    {"nan": math.nan, "inf": math.inf, "-inf": -math.inf},
    {"object": object, "set": {1}, "bytes": b"x"},  # not JSON: ``default=str`` writes their text
    [[[["deep"]]]], {"\ud83d\ude00": "astral \U0001f600"},
]
ENCODERS = [
    {"sort_keys": True, "separators": (",", ":"), "default": str, "check_circular": False},
    {"sort_keys": True, "default": str},
    {"ensure_ascii": False, "default": str},
    {"default": str, "allow_nan": False},
]


@pytest.mark.parametrize("options", ENCODERS, ids=lambda o: ",".join(sorted(o)))
def test_the_same_text_or_the_same_error_as_encode(options: dict[str, Any]) -> None:
    encoder = json.JSONEncoder(**options)
    encode = fast_encode(encoder)
    assert encode is not encoder.encode  # this interpreter has the C encoder: the fast path is the one tested
    for value in VALUES:
        try:
            expected: Any = encoder.encode(value)
        except ValueError as exc:
            expected = type(exc)
        try:
            got: Any = encode(value)
        except ValueError as exc:
            got = type(exc)
        assert got == expected, value


def test_circular_values_fail_as_encode_fails() -> None:
    circular: list[Any] = []
    circular.append(circular)
    checked = json.JSONEncoder(default=str)
    with pytest.raises(ValueError):
        fast_encode(checked)(circular)
    unchecked = json.JSONEncoder(default=str, check_circular=False)
    with pytest.raises(RecursionError):
        fast_encode(unchecked)(circular)


def test_an_indenting_encoder_is_its_own_encode() -> None:
    encoder = json.JSONEncoder(indent=2)
    assert fast_encode(encoder) == encoder.encode
