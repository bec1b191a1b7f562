"""The judge's deterministic argument check: the same code as ``tool_argument_validity``."""

from __future__ import annotations

from ..arguments import check_call, tool_schemas

__all__ = ["check_call", "tool_schemas"]
