"""Flattened attributes (``{prefix}{index}{infix}{field}``), as OpenInference and OpenLLMetry record messages.

A span may carry a hundred such keys (the whole history, flattened), and the same few keys
(``gen_ai.prompt.3.content``) recur on every span of an instrumentation. So a ``Flattened`` reader
classifies every key it meets once and remembers it (bounded): a span's keys are then sorted out
in C (``map`` of the remembered splits' ``__getitem__``, ``filter``), with no Python step per key
(a third of the cost of comparing each key with the prefix in a list comprehension), and a
field that is itself flattened (a message's ``tool_calls.{j}.{field}``) is split along with it.

A reader given a ``compile`` function also remembers *layouts*: what ``compile`` made of a set of picked
keys (which key holds a message's role, its content, its calls' names...), keyed by that set. A span
whose every key was met before is then read without a Python step per key: whether its keys are all
known (``set.issuperset``), which of them are picks (a dict view ``&`` the known picks: it iterates the
smaller side) and its layout are looked up in C, and only the layout's keys are read. Layouts depend on
the keys alone, not on the values, so the few shapes an instrumentation writes a model response in
(one choice, with or without content, with 0..n tool calls) are compiled once each.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Nested = tuple[int, int, str]
"""``(rule, j, subfield)``: a field that is ``{nested prefix}{j}{nested infix}{subfield}`` of the
reader's ``rule``-th nested rule."""
Pick = tuple[str, int, str, "Nested | None"]
"""``(key, index, field, nested)`` of a key that is ``{prefix}{index}{infix}{field}``."""

MAX_KEYS = 4_096
"""Keys remembered per reader: beyond that, a key not remembered is classified each time (bounded memory)."""
MAX_LAYOUTS = 1_024
"""Layouts remembered per reader: beyond that, a span with a layout not remembered has it compiled each time."""


class Flattened:
    """The keys ``{prefix}{index}{infix}{field}`` of a span; ``nested``: ``(prefix, infix)`` rules of a
    field that is flattened in turn (``("tool_calls.", ".")``)."""

    __slots__ = ("prefix", "infix", "nested", "compile", "_splits", "_lookup", "_known", "_picked", "_layouts")

    def __init__(self, prefix: str, infix: str = ".", nested: tuple[tuple[str, str], ...] = (),
                 compile: Callable[[list[Pick]], Any] | None = None) -> None:
        self.prefix, self.infix, self.nested, self.compile = prefix, infix, nested, compile
        self._splits: dict[str, Pick | bool] = {}
        """Every key met: its pick, or ``False`` for a key that is none."""
        self._lookup = self._splits.__getitem__
        self._known: set[str] = set()
        """The keys of ``_splits`` that no other key can stand for: every key that is no pick, and the picks
        whose index (and nested index) is spelled canonically (``3``, not ``03``: both would be message 3,
        and which one wins depends on the key order that a set of keys does not keep)."""
        self._picked: set[str] = set()
        """The picks of ``_known``."""
        self._layouts: dict[frozenset[str], Any] = {}

    def picks(self, attrs: Mapping[str, Any]) -> list[Pick]:
        """The span's keys that are ``{prefix}{index}{infix}{field}``, as ``(key, index, field, nested)``,
        in key order; a key not met before (``KeyError``) sends the span through ``_learn``."""
        try:
            return list(filter(None, map(self._lookup, attrs)))  # type: ignore[arg-type]
        except KeyError:
            return self._learn(attrs)

    def fields(self, attrs: Mapping[str, Any]) -> dict[int, dict[str, Any]]:
        """``{index: {field: value}}``, in key order (nested fields whole)."""
        grouped: dict[int, dict[str, Any]] = {}
        last = None
        fields: dict[str, Any] = {}
        for key, index, field, _ in self.picks(attrs):
            if index != last:  # a message's keys are usually adjacent: its dict found once per run of them
                last = index
                fields = grouped.setdefault(index, {})
            fields[field] = attrs[key]
        return grouped

    def layout(self, attrs: Mapping[str, Any]) -> Any:
        """``compile(picks)`` of the span's picks (``compile`` must not depend on their order, and reads no
        value: it says which keys to read), remembered per set of picked keys when every key of the span
        was met before and is known (``_known``); else compiled from ``picks``, in key order."""
        if self._known.issuperset(attrs):
            keys = frozenset(attrs.keys() & self._picked)
            layout = self._layouts.get(keys)
            if layout is None:
                layout = self.compile(list(map(self._lookup, keys)))  # type: ignore[misc]
                if len(self._layouts) < MAX_LAYOUTS:
                    self._layouts[keys] = layout
            return layout
        return self.compile(self.picks(attrs))  # type: ignore[misc]

    def _learn(self, attrs: Mapping[str, Any]) -> list[Pick]:
        """``picks`` of a span with a key not met before: classify it, remember it while there is room."""
        splits = self._splits
        picked = []
        for key in attrs:
            split = splits.get(key)
            if split is None:
                split = self._split(key)
                if len(splits) < MAX_KEYS:
                    splits[key] = split
                    if not split:
                        self._known.add(key)
                    elif _canonical(split, self.prefix, self.infix, self.nested):
                        self._known.add(key)
                        self._picked.add(key)
            if split:
                picked.append(split)
        return picked  # type: ignore[return-value]

    def _split(self, key: str) -> Pick | bool:
        found = split_key(key, self.prefix, self.infix)
        if found is None:
            return False
        index, field = found
        for rule, (prefix, infix) in enumerate(self.nested):
            nested = split_key(field, prefix, infix)
            if nested is not None:
                return key, index, field, (rule, *nested)
        return key, index, field, None


def _canonical(pick: Pick, prefix: str, infix: str, nested: tuple[tuple[str, str], ...]) -> bool:
    """Is ``pick``'s key the one spelling of its index (and nested index), so that no other key of a span
    can give the same field?"""
    key, index, field, inner = pick
    if key != f"{prefix}{index}{infix}{field}":
        return False
    if inner is None:
        return True
    rule, j, subfield = inner
    prefix, infix = nested[rule]
    return field == f"{prefix}{j}{infix}{subfield}"


def split_key(key: str, prefix: str, infix: str) -> tuple[int, str] | None:
    """``(index, field)`` when ``key`` is ``{prefix}{index}{infix}{field}`` (a decimal index, a non-empty
    field), else None."""
    if not key.startswith(prefix):
        return None
    index, found, field = key[len(prefix):].partition(infix)
    return (int(index), field) if found and field and index.isdecimal() else None


def indexed_fields(attrs: Mapping[str, Any], prefix: str, infix: str = ".") -> dict[int, dict[str, Any]]:
    """Flattened attributes ``{prefix}{index}{infix}{field}`` as ``{index: {field: value}}``, in key order."""
    reader = _READERS.get((prefix, infix))
    if reader is None:
        reader = Flattened(prefix, infix)
        if len(_READERS) < _MAX_READERS:
            _READERS[prefix, infix] = reader
    return reader.fields(attrs)


_READERS: dict[tuple[str, str], Flattened] = {}
_MAX_READERS = 64
