"""Optional compiled build of the pure core (assembly) with mypyc: an experiment, not shipped.

``pip install .`` builds the pure-Python package, as always: it installs anywhere, and stays the
default and the fallback. ``OTEL_AGENT_EVAL_COMPILE=1 pip install --no-build-isolation .``, with
``mypy`` (mypyc; 2.4.1 is the version measured) and a C compiler in the build environment, compiles
the modules below into C extensions of the same source: outputs byte-identical, assembly plus
evaluation 1.21-1.36x fewer instructions (docs/performance.md, "Compiled core with mypyc").
``otel_agent_eval.compiled.compiled_modules()`` says which build is loaded.
"""

from __future__ import annotations

import glob
import os

from setuptools import setup

COMPILED = [
    *sorted(glob.glob("otel_agent_eval/assembly/*.py")),
    *sorted(glob.glob("otel_agent_eval/assembly/dialects/*.py")),
    # The evaluators' per-run view only: the built-in evaluator classes stay pure Python, since users
    # subclass them (and ``Evaluator``), and interpreted code cannot subclass a compiled class.
    "otel_agent_eval/evaluators/view.py",
]


def ext_modules() -> list:
    if os.environ.get("OTEL_AGENT_EVAL_COMPILE", "") not in ("1", "true", "yes"):
        return []
    try:
        from mypyc.build import mypycify  # only the compiled build needs mypy
    except ImportError:
        raise SystemExit(
            "OTEL_AGENT_EVAL_COMPILE=1 needs mypy (mypyc) and setuptools>=77 in the build environment: "
            "pip install mypy 'setuptools>=77', then pip install --no-build-isolation ."
        ) from None

    return mypycify(["--follow-imports=silent", "--ignore-missing-imports", *COMPILED], opt_level="3")


setup(ext_modules=ext_modules())
