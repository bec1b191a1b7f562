"""Which build of the pure core is loaded: pure Python (the default, and the fallback anywhere), or the
optional mypyc-compiled modules (``OTEL_AGENT_EVAL_COMPILE=1``, see ``setup.py``). Both run the same
source and give byte-identical outputs; this says which one a process runs, for a bug report or a benchmark.
"""

from __future__ import annotations

import importlib
from importlib.machinery import EXTENSION_SUFFIXES

CORE_MODULES = (
    "otel_agent_eval.assembly.core",
    "otel_agent_eval.assembly.index",
    "otel_agent_eval.assembly.steps",
    "otel_agent_eval.assembly.dialects",
    "otel_agent_eval.evaluators.tool_calls",
    "otel_agent_eval.evaluators.view",
)
"""A sample of the modules the compiled build compiles (``setup.py`` lists them all)."""


def compiled_modules() -> list[str]:
    """Those of ``CORE_MODULES`` loaded from a compiled extension (empty: the pure-Python build)."""
    return [
        name for name in CORE_MODULES
        if (getattr(importlib.import_module(name), "__file__", None) or "").endswith(tuple(EXTENSION_SUFFIXES))
    ]
