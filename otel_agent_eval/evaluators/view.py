"""One agent run as the built-in evaluators read it: its tool calls flattened, their names, errors and
identities, each computed once per run, on first use.

Several evaluators of one run read the same calls, and reading a field of a pydantic model costs
more than reading a plain object's (the model's class defines ``__getattr__``). ``evaluate_run`` and
the pipeline's workers open one view per run (``with RunView(trace):``) and drop it when the run's
evaluators are done; an evaluator asks ``run_view(trace)`` and gets that view, or a fresh one
outside. Evaluators are pure functions of the trace, so nothing changes the trace while its view is
open. The view couples no evaluator to another: each asks for the facts it needs, whichever
computed them first.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any

from ..assembly.dialects.base import canonical_json
from ..model import AgentTrace, ToolCall

Identity = tuple[str, Any]
"""A tool call's (name, arguments key): equal for two calls exactly when their names are equal and
their arguments' canonical JSON texts are (``call_identities``)."""


class RunView:
    """The facts of one agent run that several evaluators read (see the module docstring). As a
    context manager, the view ``run_view`` returns for its trace until exit."""

    __slots__ = ("_arguments", "_calls", "_errors", "_identities", "_names", "_token", "trace")

    def __init__(self, trace: AgentTrace) -> None:
        self.trace = trace
        self._calls = self._names = self._arguments = self._errors = self._identities = None

    def __enter__(self) -> None:
        self._token = _current.set(self)

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._token)

    _calls: list[ToolCall] | None
    _names: list[str] | None
    _arguments: list[Any] | None
    _errors: list[str | None] | None
    _identities: list[Identity] | None

    def _read_calls(self) -> None:
        """Every step's calls in order, and their names, arguments and errors: one pass, where a list
        per fact cost a loop each (-20 % instructions)."""
        calls: list[ToolCall] = []
        names: list[str] = []
        arguments: list[Any] = []
        errors: list[str | None] = []
        for step in self.trace.steps:
            for call in step.tool_calls:
                calls.append(call)
                names.append(call.name)
                arguments.append(call.arguments)
                errors.append(call.error)
        self._calls, self._names, self._arguments, self._errors = calls, names, arguments, errors

    @property
    def calls(self) -> list[ToolCall]:
        """``trace.tool_calls``: every step's calls, in order."""
        if self._calls is None:
            self._read_calls()
        return self._calls  # type: ignore[return-value]

    @property
    def names(self) -> list[str]:
        if self._names is None:
            self._read_calls()
        return self._names  # type: ignore[return-value]

    @property
    def arguments(self) -> list[Any]:
        if self._arguments is None:
            self._read_calls()
        return self._arguments  # type: ignore[return-value]

    @property
    def errors(self) -> list[str | None]:
        """Each call's error (None when it did not fail)."""
        if self._errors is None:
            self._read_calls()
        return self._errors  # type: ignore[return-value]

    @property
    def any_failed(self) -> bool:
        errors = self.errors
        return errors.count(None) != len(errors)

    @property
    def identities(self) -> list[Identity]:
        """Each call's identity by all its arguments (``call_identities``)."""
        if self._identities is None:
            self._identities = call_identities(self.names, self.arguments)
        return self._identities


_current: ContextVar[RunView | None] = ContextVar("otel_agent_eval.run_view", default=None)


def run_view(trace: AgentTrace) -> RunView:
    """The view opened for ``trace`` (``with RunView(trace):``), else a fresh one."""
    view = _current.get()
    if view is not None and view.trace is trace:
        return view
    return RunView(trace)


_SCALARS = (str, int, bool, type(None))
"""Exact types whose JSON text is one to one with (type, value): no float (``nan``, ``-0.0``)."""


def call_identities(names: Sequence[str], arguments: Sequence[Any]) -> list[Identity]:
    """Per call, (name, a key of its arguments) such that two identities are equal exactly when the
    names are and the canonical JSON texts of the arguments are: ``scalar_identities`` when they
    apply, else canonical JSON for every call (all or nothing: a call with other arguments, a JSON
    string, may encode as another's dict does)."""
    identities = scalar_identities(names, arguments)
    if identities is None:
        identities = [(name, canonical_json(value)) for name, value in zip(names, arguments)]
    return identities


def scalar_identities(names: Sequence[str], arguments: Sequence[Any]) -> list[Identity] | None:
    """Per call, (name, sorted (key, type, value) of its arguments), when every call's arguments are a
    dict of ``str`` keys to ``_SCALARS`` or None (no arguments recorded); else None.

    For such dicts two identities are equal exactly when the canonical JSON texts are (keys are
    sorted there too; ``1`` and ``True`` differ by type), and they cost less to make than an encoding.
    None's text, ``null``, is no dict's, and no other call's here (a JSON string ``"null"`` is not
    among them): its identity is (name, None).
    """
    identities: list[Identity] = []
    for name, value in zip(names, arguments):
        if type(value) is not dict:
            if value is None:
                identities.append((name, None))
                continue
            return None
        identity = []
        for key, item in value.items():
            kind = type(item)
            if type(key) is not str or kind not in _SCALARS:
                return None
            identity.append((key, kind, item))
        identity.sort()  # keys are unique: the values are never compared
        identities.append((name, tuple(identity)))
    return identities
