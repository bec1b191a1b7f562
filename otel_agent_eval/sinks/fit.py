"""JSON that fits a size limit and stays valid: shortened by structure, never cut mid-text.

A log attribute has a size limit; cutting serialized JSON at that limit gives
text no reader can parse (a 30-call judge result's details did). ``fit_json``
shortens the value instead, in this order, until its JSON fits:

1. long strings are clipped, longest first, to a head and a ``...[N chars omitted]`` tail;
2. long lists are cut, longest first, to their first items plus a
   ``[... N more items]`` entry;
3. containers are collapsed, deepest then longest first, into one
   ``[list of N items omitted]`` / ``[object of N keys omitted]`` string.

What was shortened is said in a top-level ``_shortened`` object (the original
size and how many strings were clipped, items left out, parts collapsed).
Pure; the value given is never modified.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..jsontext import fast_encode

MIN_STRING = 40
"""Strings are clipped to no fewer characters than this (before the marker)."""
SHORTENED_KEY = "_shortened"


dumps = fast_encode(json.JSONEncoder(default=str, sort_keys=True))
"""The serialization of ``agent_eval.details`` (sorted keys; non-JSON values as text): the text of
``json.dumps(value, default=str, sort_keys=True)`` without building an encoder and its arguments per call
(more than the C encoding of a small details dict)."""


_SCALARS = frozenset({str, int, float, bool, type(None)})
_FLAT: dict[tuple[tuple[Any, ...], ...], str] = {}
"""``dumps`` of flat details (a dict of scalars), keyed by keys, value types and values."""
MAX_FLAT = 4096
"""Flat details kept; the cache is emptied when full, so values seen once (judge reasons) cannot crowd it for long."""
MAX_FLAT_TEXT = 512


def flat_key(value: dict[Any, Any]) -> tuple[tuple[Any, ...], ...]:
    """A dict's keys, value types and values: equal keys of two dicts that ``exact_key`` accepts mean the same JSON
    (``1``, ``1.0`` and ``True`` stay apart by their types). TypeError for an unhashable value."""
    return (tuple(value), tuple(map(type, value.values())), tuple(value.values()))


def exact_key(key: tuple[tuple[Any, ...], ...]) -> bool:
    """Whether ``key`` may be kept: ``str`` keys, exact scalar values, no float zero (``0.0 == -0.0``, spelled
    apart). A key kept is then never equal to one of another dict with other JSON."""
    return (_SCALARS.issuperset(key[1]) and all(type(k) is str for k in key[0])
            and not any(type(v) is float and not v for v in key[2]))


def flat_dumps(value: dict[Any, Any]) -> str:
    """``dumps(value)``, kept for flat details: the deterministic evaluators' details are a few counts,
    thresholds and reasons that recur run after run, and the C encoder's setup per call (a sorted copy of
    the items, a markers dict, a float's repr) costs more than a look-up.

    Kept by ``flat_key`` when ``exact_key`` accepts it; an unhashable value (a list, a dict) is not flat:
    plain ``dumps``.
    """
    try:
        key = flat_key(value)
        text = _FLAT.get(key)
    except TypeError:
        return dumps(value)
    if text is not None:
        return text
    text = dumps(value)
    if len(text) <= MAX_FLAT_TEXT and exact_key(key):
        if len(_FLAT) >= MAX_FLAT:
            _FLAT.clear()
        _FLAT[key] = text
    return text


def fit_json(value: Any, limit: int) -> str:
    """``value`` as JSON of at most ``limit`` characters (``limit`` >= 2), valid whatever is cut.

    Within the limit: the plain ``dumps(value)``. Over it: shortened as the module says,
    a dict at the top (a non-dict value is put under ``"value"``).
    """
    text = flat_dumps(value) if type(value) is dict else dumps(value)
    if len(text) <= limit:
        return text
    tree = json.loads(text)  # a plain copy: dicts, lists, strings, numbers (default=str applied)
    if not isinstance(tree, dict):
        tree = {"value": tree}
    tree.pop(SHORTENED_KEY, None)
    counts = {"original_chars": len(text), "strings_clipped": 0, "items_omitted": 0, "parts_collapsed": 0}
    # Room for the summary with counts as long as they can get (the original size bounds them all).
    reserve = len(dumps({SHORTENED_KEY: {k: len(text) for k in counts}})) - 1
    budget = limit - reserve
    holder = [tree]
    for shrink in (_clip_longest_string, _cut_longest_list, _collapse_deepest):
        while len(dumps(holder[0])) > budget and shrink(holder, counts):
            pass
    if len(dumps(holder[0])) <= budget:
        return dumps({**holder[0], SHORTENED_KEY: counts})
    summary = dumps({SHORTENED_KEY: counts})  # every part collapsed and still too long: keys alone overflow
    return summary if len(summary) <= limit else "{}"


def _nodes(parent: Any, key: Any, depth: int, out: list[tuple[Any, Any, int]]) -> None:
    """Every (parent, key, depth) below ``parent[key]``, the node itself first."""
    out.append((parent, key, depth))
    node = parent[key]
    if isinstance(node, dict):
        for child in node:
            _nodes(node, child, depth + 1, out)
    elif isinstance(node, list):
        for index in range(len(node)):
            _nodes(node, index, depth + 1, out)


def _walk(holder: list[Any]) -> list[tuple[Any, Any, int]]:
    out: list[tuple[Any, Any, int]] = []
    _nodes(holder, 0, 0, out)
    return out


def _size(value: Any) -> int:
    return len(dumps(value))


def _replace_if_smaller(parent: Any, key: Any, new: Any) -> bool:
    if _size(new) >= _size(parent[key]):
        return False
    parent[key] = new
    return True


_CLIPPED = re.compile(r"\.\.\.\[(\d+) chars omitted\]$")
_MORE = re.compile(r"^\[\.\.\. (\d+) more items\]$")


def _clip_longest_string(holder: list[Any], counts: dict[str, int]) -> bool:
    """One round: every string longer than half the longest is clipped to that half."""
    strings = [(p, k) for p, k, _ in _walk(holder) if isinstance(p[k], str) and len(p[k]) > MIN_STRING]
    if not strings:
        return False
    keep = max(MIN_STRING, max(len(p[k]) for p, k in strings) // 2)
    changed = False
    for parent, key in strings:
        text = parent[key]
        earlier = _CLIPPED.search(text)  # clipped in an earlier round: count from the original
        head, omitted = (text[: earlier.start()], int(earlier.group(1))) if earlier else (text, 0)
        if len(head) > keep and _replace_if_smaller(parent, key, f"{head[:keep]}...[{len(head) - keep + omitted} chars omitted]"):
            counts["strings_clipped"] += not earlier
            changed = True
    return changed


def _cut_longest_list(holder: list[Any], counts: dict[str, int]) -> bool:
    """One round: every list with more items than half the longest keeps that half, plus a count of the rest."""
    lists = [(p, k) for p, k, _ in _walk(holder)[1:] if isinstance(p[k], list) and len(_items(p[k])[0]) > 1]
    if not lists:
        return False
    keep = max(1, max(len(_items(p[k])[0]) for p, k in lists) // 2)
    changed = False
    for parent, key in lists:
        real, left_out = _items(parent[key])
        if len(real) > keep and _replace_if_smaller(parent, key, [*real[:keep], f"[... {left_out + len(real) - keep} more items]"]):
            counts["items_omitted"] += len(real) - keep
            changed = True
    return changed


def _items(items: list[Any]) -> tuple[list[Any], int]:
    """A list's own items and how many an earlier round left out (its trailing marker)."""
    more = _MORE.match(items[-1]) if items and isinstance(items[-1], str) else None
    return (items[:-1], int(more.group(1))) if more else (items, 0)


def _collapse_deepest(holder: list[Any], counts: dict[str, int]) -> bool:
    containers = [(d, _size(p[k]), p, k) for p, k, d in _walk(holder)[1:] if isinstance(p[k], (dict, list)) and p[k]]
    for _, _, parent, key in sorted(containers, key=lambda s: (-s[0], -s[1])):
        node = parent[key]
        marker = f"[list of {len(node)} items omitted]" if isinstance(node, list) else f"[object of {len(node)} keys omitted]"
        if _replace_if_smaller(parent, key, marker):
            counts["parts_collapsed"] += 1
            return True
    return False
