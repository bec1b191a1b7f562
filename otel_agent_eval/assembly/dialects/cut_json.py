"""JSON cut short: told apart from malformed JSON, so the loss is said and counted for what it is.

SDKs cut attribute values at ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`` (the Collector's ``truncate_all`` and
backends' size limits do the same), which leaves a message attribute's JSON unterminated:
``[{"role": "assistant", "parts": [{"type": "text", "content": "It is sunny in Pa``. Such a text is the start
of valid JSON: closing it where it stops mends it. The value is still not read: the start of a cut list reads as a
whole one whose last item is not the last (a LangGraph state cut before its final message would give an earlier
message as the final response, the last user message of a cut history an earlier task). Only on the failure path
of parsing: a text that parses is never looked at here.
"""

from __future__ import annotations

import json
import re

CUT_SHORT = "JSON cut short"
"""What the issue of a value cut short says (``base.parse_json_value``); ``rules.Scope.recording_losses``
counts the issues that say it (``AgentTrace.values_cut_short``)."""

_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*("?)|[\[\]{},]', re.DOTALL)
"""A string (its closing quote in group 1, empty when the text ends inside it) or a bracket or comma."""
_END_ESCAPE = re.compile(r"(\\+)(?:u[0-9a-fA-F]{0,3})?$")
"""Backslashes at the end of a cut string, with what may follow of a ``\\uXXXX`` escape: an odd number starts an
escape the cut split."""
_HIGH_SURROGATE = re.compile(r"(?<!\\)(?:\\\\)*(\\u[dD][89abAB][0-9a-fA-F]{2})$")
"""A character's first half (``\\ud83d`` of an emoji) at the end of a cut string, its second half cut off."""
_CLOSING = {"[": "]", "{": "}"}


def is_cut_short(value: object) -> bool:
    """Is ``value`` a JSON text cut short, kept raw by ``base.parse_json_value`` (which said so in an issue)?
    Read as that function reads it: surrounding whitespace aside."""
    if not isinstance(value, str):
        return False
    text = value.strip()
    return text[:1] in ("[", "{") and cut_short(text)


def cut_short(text: str) -> bool:
    """Is ``text`` (which does not parse) the start of JSON cut inside an array or object: does closing it where it
    stops mend it? Not when a syntax error comes before the cut, nor when nothing whole precedes it (``{``).

    Closing is tried twice: at the cut (the open string, then each open bracket), then, for a cut inside a key,
    a number or a literal, back at the last comma (the part after it dropped).
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
            return False
    if not owed:  # a whole value with an error in it, or a bare string or scalar cut short: nothing to close
        return False
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
        return bool(value)
    return False
