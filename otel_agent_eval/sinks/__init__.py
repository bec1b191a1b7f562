"""Where results go: OpenTelemetry (spans + log events, ``otel.py``) and Prometheus (``prometheus.py``).

Any object with a ``name`` and an ``emit(EvaluatedTrace)`` is a sink (``Sink``): the
pipeline calls ``emit`` on a worker thread once per run and phase; an exception is
counted (``agent_eval_sink_errors_total``) and never stops the other sinks.
"""

from __future__ import annotations

from typing import Protocol

from ..model import EvaluatedTrace


class Sink(Protocol):
    name: str

    def emit(self, evaluated: EvaluatedTrace) -> None: ...


__all__ = ["EvaluatedTrace", "Sink"]
