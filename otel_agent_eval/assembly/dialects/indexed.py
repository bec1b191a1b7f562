"""Flattened attributes (``{prefix}{index}{infix}{field}``), as OpenInference and OpenLLMetry record messages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def indexed_fields(attrs: Mapping[str, Any], prefix: str, infix: str = ".") -> dict[int, dict[str, Any]]:
    """Flattened attributes ``{prefix}{index}{infix}{field}`` as ``{index: {field: value}}``, in key order.

    The keys are picked by one list comprehension (a span may carry a hundred: the whole history,
    flattened) that compares each key with the range of strings starting with ``prefix``
    (``prefix <= key < after``, ``after`` the prefix with its last character incremented: two
    string comparisons, half the cost of ``str.startswith``). Each picked key is split into its
    index and field once per process (``_key_splits``): the same few keys (``gen_ai.prompt.3.content``)
    recur on every span of an instrumentation, and slicing, partitioning and converting them again,
    and hashing the new field strings, cost several times the look-up.
    """
    grouped: dict[int, dict[str, Any]] = {}
    splits = _key_splits(prefix, infix)
    after = prefix[:-1] + chr(ord(prefix[-1]) + 1)  # prefix: never empty
    last = None
    fields: dict[str, Any] = {}
    for key in [key for key in attrs if prefix <= key < after]:
        split = splits.get(key, _UNSPLIT)
        if split is _UNSPLIT:
            split = _split_key(key, len(prefix), infix)
            if len(splits) < MAX_KEY_SPLITS:
                splits[key] = split
        if split is None:
            continue
        index, field = split
        if index != last:  # a message's keys are usually adjacent: its dict found once per run of them
            last = index
            fields = grouped.setdefault(index, {})
        fields[field] = attrs[key]
    return grouped


MAX_KEY_SPLITS = 2_048
"""Keys remembered per (prefix, infix): beyond that, keys are split each time (bounded memory)."""
_MAX_SPLIT_TABLES = 64
_KEY_SPLITS: dict[tuple[str, str], dict[str, tuple[int, str] | None]] = {}
_UNSPLIT = object()


def _key_splits(prefix: str, infix: str) -> dict[str, tuple[int, str] | None]:
    """The remembered splits of the keys read with this prefix and infix (a few pairs, all constants
    of the dialects; a pair beyond ``_MAX_SPLIT_TABLES`` of them gets a throwaway dict)."""
    splits = _KEY_SPLITS.get((prefix, infix))
    if splits is None:
        splits = {}
        if len(_KEY_SPLITS) < _MAX_SPLIT_TABLES:
            _KEY_SPLITS[prefix, infix] = splits
    return splits


def _split_key(key: str, skip: int, infix: str) -> tuple[int, str] | None:
    """``(index, field)`` of ``key[skip:]`` = ``{index}{infix}{field}``; None when it is not that
    (a non-decimal index, no infix, an empty field)."""
    index, found, field = key[skip:].partition(infix)
    return (int(index), field) if found and field and index.isdecimal() else None
