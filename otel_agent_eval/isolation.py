"""Evaluator isolation: nothing an evaluator does is evaluated, and by default it is not traced.

Every evaluator run goes through ``evaluation_run`` (``safe_evaluate`` opens it).
It attaches a context whose current span is a non-recording span with a fresh
trace id and the *not sampled* flag, so that:

- with the SDK's default ``ParentBased`` sampler, every span an instrumentation
  starts under it (openai, httpx, requests, any GenAI instrumentation, whether or
  not it honours the suppression keys) is non-recording: it reaches no exporter;
- with a sampler that ignores the parent (``ALWAYS_ON``), the spans still carry
  that trace id, which ``is_evaluator_telemetry`` recognises at intake, as it
  recognises spans and log records that end on a thread running an evaluator
  (instrumentations that start a fresh root context).

The intake asks ``is_evaluator_telemetry`` only for a span or log record it would
otherwise admit (a GenAI span of a trace not yet kept), never for ordinary spans.
The memory of evaluation trace ids is bounded (``MAX_TRACE_IDS``, oldest first
out): a span started during an evaluator run and ended long after it (a stream
consumed later) is still recognised while its id is among the recent ones.

Known limit: a thread an evaluator starts itself gets neither the context (Python
threads do not inherit it) nor the thread mark; its spans are an ordinary app's.
"""

from __future__ import annotations

import os
import random
import threading
from collections import OrderedDict
from typing import NamedTuple

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

MAX_TRACE_IDS = 4096
"""Evaluation trace ids remembered (about 100 bytes each)."""

_RUN_KEY = otel_context.create_key("otel_agent_eval.evaluation_run")
_NOT_SAMPLED = TraceFlags(TraceFlags.DEFAULT)
_getrandbits = random.getrandbits  # what the SDK's RandomIdGenerator uses

_lock = threading.Lock()
_trace_ids: OrderedDict[int, None] = OrderedDict()
"""Recent evaluation trace ids, oldest first (O(1) eviction); read without the lock (``in`` is atomic)."""
_threads: dict[int, int] = {}
"""Idents of threads running an evaluator now, with their nesting depth."""


class EvaluationRun(NamedTuple):
    """What is being evaluated, by whom: read by the judge's own spans (``current_run``)."""

    evaluator: str
    trace_id: str
    """The evaluated agent trace (hex), not the evaluation context's own trace id."""
    span_id: str | None


class evaluation_run:  # noqa: N801 - used like a function: ``with evaluation_run(run):``
    """Run an evaluator under a non-sampled context of its own, marked as evaluation.

    A class with plain code, not a generator: it is entered for every evaluator on
    every trace (a few microseconds).
    """

    __slots__ = ("_ident", "_run", "_token")

    def __init__(self, run: EvaluationRun) -> None:
        self._run = run

    def __enter__(self) -> None:
        trace_id = _getrandbits(128) or 1  # 0 is the invalid id
        parent = NonRecordingSpan(SpanContext(trace_id, _getrandbits(64) or 1, False, _NOT_SAMPLED))
        self._ident = ident = threading.get_ident()
        with _lock:
            _trace_ids[trace_id] = None
            if len(_trace_ids) > MAX_TRACE_IDS:
                _trace_ids.popitem(last=False)
            _threads[ident] = _threads.get(ident, 0) + 1
        self._token = otel_context.attach(otel_context.set_value(_RUN_KEY, self._run, trace.set_span_in_context(parent)))

    def __exit__(self, *exc: object) -> None:
        otel_context.detach(self._token)
        ident = self._ident
        with _lock:
            depth = _threads.pop(ident, 1) - 1
            if depth:
                _threads[ident] = depth


def _after_fork_in_child() -> None:
    """The forked child's own lock (a parent thread may have held this one) and no evaluator running."""
    global _lock
    _lock = threading.Lock()
    _threads.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def is_evaluator_telemetry(trace_id: int | None) -> bool:
    """True for a span or log record made by an evaluator: its trace is an evaluation
    context's, or it ends on a thread running an evaluator. Two dict look-ups."""
    return trace_id in _trace_ids or threading.get_ident() in _threads


def current_run() -> EvaluationRun | None:
    """The evaluator run of the current context, if any."""
    run = otel_context.get_value(_RUN_KEY)
    return run if isinstance(run, EvaluationRun) else None
