"""JSON cut short: a value read up to where its text was cut.

SDKs cut attribute values at ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`` (the Collector's ``truncate_all`` and
backends' size limits do the same), which leaves a message attribute's JSON unterminated:
``[{"role": "assistant", "parts": [{"type": "text", "content": "It is sunny in Pa``. Such a text is the start
of valid JSON; closing it where it stops reads what was recorded (``... "content": "It is sunny in Pa"}]}]``)
instead of losing the whole message. Only on the failure path of parsing: a text that parses is never read here.
"""

from __future__ import annotations

import json
import re
from typing import Any

CUT_SHORT = "JSON cut short"
"""What the issue of a value read this way says (``base.parse_json_value``); ``rules.Scope.recording_losses``
counts the issues that say it (``AgentTrace.values_cut_short``)."""

_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*("?)|[\[\]{},]', re.DOTALL)
"""A string (its closing quote in group 1, empty when the text ends inside it) or a bracket or comma."""
_END_ESCAPE = re.compile(r"(\\+)(?:u[0-9a-fA-F]{0,3})?$")
"""Backslashes at the end of a cut string, with what may follow of a ``\\uXXXX`` escape: an odd number starts an
escape the cut split."""
_HIGH_SURROGATE = re.compile(r"(?<!\\)(?:\\\\)*(\\u[dD][89abAB][0-9a-fA-F]{2})$")
"""A character's first half (``\\ud83d`` of an emoji) at the end of a cut string, its second half cut off."""
_CLOSING = {"[": "]", "{": "}"}


def read_cut_json(text: str) -> tuple[Any] | None:
    """The value of ``text`` closed where it was cut, in a 1-tuple; None when ``text`` does not look cut inside
    an array or object, closing it does not mend it (a syntax error before the cut), or nothing is read (``{``).

    Closing is tried twice: at the cut (the open string, then each open bracket), then, for a cut inside a key,
    a number or a literal, back at the last comma (the part after it is dropped).
    """
    owed: list[str] = []  # closing brackets still owed, innermost last
    at_commas: list[tuple[int, str]] = []  # each comma outside strings: where, and what closes the text there
    open_string = -1
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token[0] == '"':
            if not match.group(1):  # the text ends inside this string
                open_string = match.start()
                break
        elif token in _CLOSING:
            owed.append(_CLOSING[token])
        elif token == ",":
            at_commas.append((match.start(), "".join(reversed(owed))))
        elif not owed or owed.pop() != token:
            return None
    if not owed:  # a whole value with an error in it, or a bare string or scalar cut short: nothing to close
        return None
    closing = "".join(reversed(owed))
    candidates = []
    if open_string >= 0:
        cut = _END_ESCAPE.search(text, open_string)
        end = cut.end(1) - 1 if cut is not None and len(cut.group(1)) % 2 else len(text)
        half = _HIGH_SURROGATE.search(text, open_string, end)
        if half is not None:
            end = half.start(1)
        candidates.append(text[:end] + '"' + closing)
    else:
        candidates.append(text + closing)
    if at_commas:
        where, closing_there = at_commas[-1]
        candidates.append(text[:where] + closing_there)
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except (ValueError, RecursionError):
            continue
        return (value,) if value else None
    return None
