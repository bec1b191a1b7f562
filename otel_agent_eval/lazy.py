"""Public names of a package imported on first use (PEP 562), for packages whose users often need none of them."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, namespace: dict[str, Any], where: Mapping[str, tuple[str, ...]]) -> tuple[
    Callable[[str], Any], Callable[[], list[str]]
]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` (its ``globals()`` is ``namespace``) for the
    names ``where`` lists per relative module: each imported when first read, then kept in the package."""
    module_of = {name: module for module, names in where.items() for name in names}

    def __getattr__(name: str) -> Any:  # the module hook's own name
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value  # once: later look-ups do not come here
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *module_of})

    return __getattr__, __dir__
