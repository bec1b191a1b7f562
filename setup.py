"""The optional C decoder of OTLP trace and log requests (``otel_agent_eval/formats/_otlp_native.c``).

Everything else is configured in ``pyproject.toml``. The extension is ``optional``: without a C
compiler (or on an interpreter other than CPython) the install goes on without it and OTLP
protobuf is decoded through upb alone, with the same results (``formats/otlp.py``).
"""

import platform

from setuptools import Extension, setup

native = [
    Extension(
        "otel_agent_eval.formats._otlp_native",
        ["otel_agent_eval/formats/_otlp_native.c"],
        optional=True,
        extra_compile_args=["-O2"] if platform.system() != "Windows" else [],
    )
] if platform.python_implementation() == "CPython" else []

setup(ext_modules=native)
