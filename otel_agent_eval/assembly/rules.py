"""What a framework's structural rule sees and may change: scopes, and the ``Rule`` hooks.

A rule is a small object owned by a framework's dialect module (its ``RULES``), run only when
the index saw its hint (``Rule.hint``: an ``Operation`` field set on some span, or "agent"). The
core calls its hooks at three points and knows nothing of what they do:

* ``prepare(assembly)``: before scopes are made; may add or remove operations (a chain span
  that is an agent, an agent span that is only one turn of the run around it);
* ``link(assembly, scopes)``: scopes made and nested by ancestry; may re-parent them;
* ``regroup(assembly, scopes)``: model and tool calls placed in their scopes; may merge scopes.

``assembly`` is the core's ``TraceAssembly``: ``ops``, ``records``, ``ancestors``, ``nearest``,
``top``, ``scope_of``, ``absorb``, ``nested_runs`` and ``started_by``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .dialects.base import Operation

if TYPE_CHECKING:
    from ..records import SpanRecord


@dataclass(eq=False)
class Scope:
    """One agent run being assembled: its agent span (or local root) and the calls in it."""

    key: int
    """Span id of the agent span, or of the local root for an implicit scope."""
    agent: Operation | None
    root: SpanRecord
    llms: list[Operation] = field(default_factory=list)
    tools: list[Operation] = field(default_factory=list)
    steps: list[Operation] = field(default_factory=list)
    children: list[Scope] = field(default_factory=list)
    parent: Scope | None = None
    reruns: list[Operation] = field(default_factory=list)
    """Later runs of the same agent merged into this one (``TraceAssembly.absorb``)."""

    def within(self, ancestor: Scope) -> bool:
        """Is this scope ``ancestor`` or nested in it?"""
        current: Scope | None = self
        seen: set[int] = set()
        while current is not None and current.key not in seen:
            if current is ancestor:
                return True
            seen.add(current.key)
            current = current.parent
        return False

    def move_under(self, parent: Scope | None) -> None:
        """Make this scope a child of ``parent`` (None: a root)."""
        if self.parent is not None:
            self.parent.children.remove(self)
        self.parent = parent
        if parent is not None:
            parent.children.append(self)


class Rule:
    """A framework's structural rule; every hook does nothing unless overridden."""

    hint: str = "agent"
    """What triggers the rule: an ``Operation`` field set on some span, or "agent" (any trace with an agent)."""

    def prepare(self, assembly: Any) -> None:
        """Before scopes: add or remove operations."""

    def link(self, assembly: Any, scopes: dict[int, Scope]) -> None:
        """Scopes made: re-parent them."""

    def regroup(self, assembly: Any, scopes: dict[int, Scope]) -> None:
        """Calls placed: merge or re-link scopes."""
