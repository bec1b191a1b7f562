"""Evaluator isolation: nothing an evaluator does is evaluated, and by default it is not traced.

Every evaluator run goes through ``evaluation_run`` (``safe_evaluate`` opens it).
It runs under a context whose current span is a non-recording span with a fresh
trace id and the *not sampled* flag, so that:

- with the SDK's default ``ParentBased`` sampler, every span an instrumentation
  starts under it (openai, httpx, requests, any GenAI instrumentation, whether or
  not it honours the suppression keys) is non-recording: it reaches no exporter;
- with a sampler that ignores the parent (``ALWAYS_ON``), the spans still carry
  that trace id, which ``is_evaluator_telemetry`` recognises at intake, as it
  recognises spans and log records that end on a thread running an evaluator
  (instrumentations that start a fresh root context).

That context and the thread mark are an ``evaluation_scope``: ``evaluation_run`` opens one of its own,
unless it runs inside one that is still the current context (the pipeline's workers open one for all
the evaluators of one agent run: entering it costs more than most evaluators). ``run_evaluator`` (what
``safe_evaluate`` calls) runs each evaluator of such a scope in a copy of the current context
(``contextvars``): whatever it attaches or sets and leaves behind, even when it raises, dies with
that copy, so the next evaluator, and the caller, start from the scope's context again. A context
attached above the scope by other code makes the scope not hold: the evaluator then gets a scope of
its own, so each still starts under the non-recording parent.

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
from collections.abc import Callable
from contextvars import ContextVar, copy_context
from typing import Any, NamedTuple, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

MAX_TRACE_IDS = 4096
"""Evaluation trace ids remembered (about 100 bytes each)."""

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


class evaluation_scope:  # lower case: used like a function: ``with evaluation_scope():``
    """The isolation evaluators run in: a non-recording, not-sampled parent with a fresh trace id,
    attached, and the thread marked as running an evaluator. Entered once for all the evaluators of
    one agent run (``Stages``), or by ``evaluation_run`` for one.

    A class with plain code, not a generator: it is entered for every agent run evaluated.
    """

    __slots__ = ("_context", "_ident", "_scope_token", "_token")

    def __enter__(self) -> evaluation_scope:  # noqa: PYI034 - not subclassed; typing.Self is 3.11+
        trace_id = _getrandbits(128) or 1  # 0 is the invalid id
        parent = NonRecordingSpan(SpanContext(trace_id, _getrandbits(64) or 1, False, _NOT_SAMPLED))
        self._ident = ident = threading.get_ident()
        with _lock:
            _trace_ids[trace_id] = None
            if len(_trace_ids) > MAX_TRACE_IDS:
                _trace_ids.popitem(last=False)
            _threads[ident] = _threads.get(ident, 0) + 1
        self._context = context = trace.set_span_in_context(parent)
        self._token = otel_context.attach(context)
        self._scope_token = _scope.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _scope.reset(self._scope_token)
        otel_context.detach(self._token)
        ident = self._ident
        with _lock:
            depth = _threads.pop(ident, 1) - 1
            if depth:
                _threads[ident] = depth

    def holds(self) -> bool:
        """Is this scope's context still the current one (no context an evaluator attached above it)?"""
        return otel_context.get_current() is self._context


_scope: ContextVar[evaluation_scope | None] = ContextVar("otel_agent_eval.evaluation_scope", default=None)
_run: ContextVar[EvaluationRun | tuple[str, str, str | None] | None] = ContextVar("otel_agent_eval.evaluation_run", default=None)
"""The current run: an ``EvaluationRun``, or its fields as a plain tuple (``run_evaluator``: made for
every evaluator, read by few), which ``current_run`` turns into one."""

_Result = TypeVar("_Result")


class evaluation_run:  # lower case: used like a function: ``with evaluation_run(run):``
    """Run an evaluator in an ``evaluation_scope`` (the current one when it still holds, else one
    of its own), with ``run`` as the ``current_run``.

    A class with plain code, not a generator: it is entered for every evaluator on
    every trace.
    """

    __slots__ = ("_own", "_run", "_token")

    def __init__(self, run: EvaluationRun) -> None:
        self._run = run

    def __enter__(self) -> None:
        scope = _scope.get()
        if scope is not None and scope.holds():
            self._own = None
        else:
            self._own = evaluation_scope().__enter__()
        self._token = _run.set(self._run)

    def __exit__(self, *exc: object) -> None:
        _run.reset(self._token)
        if self._own is not None:
            self._own.__exit__()


def run_evaluator(evaluate: Callable[[Any], _Result], argument: Any, run: tuple[str, str, str | None]) -> _Result:
    """``evaluate(argument)`` as ``with evaluation_run(EvaluationRun(*run)):`` runs it, for one evaluator.

    Inside an ``evaluation_scope`` that holds (one per agent run: ``evaluate_run``, the pipeline's
    workers), the evaluator runs in a copy of the current context, with ``run`` as its current run:
    what it leaves attached or set is dropped with the copy (see the module docstring). No object
    and no ``with`` per evaluator: this runs for every evaluator on every agent run."""
    scope = _scope.get()
    if scope is not None and scope.holds():
        context = copy_context()
        context.run(_run.set, run)
        return context.run(evaluate, argument)
    with evaluation_run(EvaluationRun._make(run)):
        return evaluate(argument)


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
    run = _run.get()
    return run if run is None or type(run) is EvaluationRun else EvaluationRun._make(run)
