"""Evaluators by name: one name space for built-ins, judge evaluators, installed packages and specs.

- built-in deterministic evaluators (``tool_call_accuracy``, ...);
- built-in judge evaluators (``task_completion``, ...): they need a configured judge;
- evaluators that installed packages register under the entry-point group
  ``otel_agent_eval.evaluators`` (name = the entry point's name, value a class or a factory);
- ``module:Class`` (a class with a no-argument constructor) or ``module:function``
  (a factory returning one evaluator or a list): an arbitrary import, so only from
  trusted configuration (environment, command line), never from the wire.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from .arguments import ToolArgumentValidity
from .base import Evaluator
from .tool_calls import ToolCallAccuracy, ToolFailureRecovery
from .trajectory import LoopDetection, StepBudget

ENTRY_POINT_GROUP = "otel_agent_eval.evaluators"

BUILTIN_EVALUATORS: dict[str, type[Evaluator]] = {
    cls.name: cls for cls in (ToolCallAccuracy, ToolFailureRecovery, LoopDetection, StepBudget, ToolArgumentValidity)
}
JUDGE_EVALUATOR_NAMES = frozenset((
    "agent_memory", "plan_quality", "response_facts", "step_faithfulness", "task_completion",
    "tool_argument_accuracy", "tool_call_necessity", "trajectory_efficiency",
))
"""The built-in judge evaluators' names (``judge.evaluators.JUDGE_EVALUATORS``'s keys, a test holds them
equal): what a name check needs, without importing the judge package and its client."""


class UnknownEvaluator(ValueError):
    """A name or spec that resolves to no evaluator; the message names it and what is allowed."""


@dataclass(frozen=True)
class EvaluatorInfo:
    name: str
    description: str
    needs_judge: bool
    source: str
    """``builtin``, ``judge`` or ``entry_point``."""


def _first_line(obj: Any) -> str:
    doc = (getattr(obj, "__doc__", None) or "").strip()
    return doc.splitlines()[0].strip() if doc else ""


def _needs_judge(target: Any) -> bool:
    return bool(getattr(target, "needs_judge", False))


def _builtins() -> dict[str, type[Evaluator]]:
    return dict(BUILTIN_EVALUATORS)


def _judge_builtins() -> dict[str, type[Evaluator]]:
    from .judge.evaluators import JUDGE_EVALUATORS

    return dict(JUDGE_EVALUATORS)


def _entry_points() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def known_evaluator_names() -> set[str]:
    """Built-in, judge and installed (entry-point) evaluator names: what thresholds may be set for."""
    return {*BUILTIN_EVALUATORS, *JUDGE_EVALUATOR_NAMES, *entry_point_names()}


def entry_point_names() -> set[str]:
    """Names installed packages register (without loading them); built-in names cannot be taken."""
    registered = set(_entry_points())
    return registered - BUILTIN_EVALUATORS.keys() - JUDGE_EVALUATOR_NAMES


def check_name(spec: str) -> None:
    """Fail fast on a name that resolves to nothing, without importing anything (``module:attr``
    specs are imported when built)."""
    if ":" in spec or spec in BUILTIN_EVALUATORS or spec in JUDGE_EVALUATOR_NAMES or spec in _entry_points():
        return
    raise _unknown(spec)


def _unknown(spec: str) -> UnknownEvaluator:
    allowed = ", ".join(info.name for info in catalogue())
    return UnknownEvaluator(f"unknown evaluator {spec!r}; allowed: {allowed}, or module:Class / module:function")


def catalogue() -> list[EvaluatorInfo]:
    """Every evaluator that can be named, sorted by name (entry points are described once loaded)."""
    infos = [EvaluatorInfo(n, _first_line(c), False, "builtin") for n, c in _builtins().items()]
    infos += [EvaluatorInfo(n, _first_line(c), True, "judge") for n, c in _judge_builtins().items()]
    known = {info.name for info in infos}
    for name, ep in _entry_points().items():
        if name in known:
            continue  # a built-in name cannot be taken over by a package
        try:
            target = ep.load()
            infos.append(EvaluatorInfo(name, _first_line(target), _needs_judge(target), "entry_point"))
        except Exception as exc:  # noqa: BLE001 - a broken package must not hide the others
            infos.append(EvaluatorInfo(name, f"(cannot load: {type(exc).__name__}: {exc})"[:200], False, "entry_point"))
    return sorted(infos, key=lambda info: info.name)


def instantiate(target: Any, what: str) -> list[Evaluator]:
    """A class (no-argument constructor) or a factory (returning one evaluator or a list) -> evaluators."""
    try:
        made = target()
    except Exception as exc:
        raise UnknownEvaluator(f"{what}: could not create the evaluator: {type(exc).__name__}: {exc}") from exc
    made = made if isinstance(made, (list, tuple)) else [made]
    for item in made:
        if not isinstance(item, Evaluator):
            raise UnknownEvaluator(f"{what}: expected an Evaluator, got {type(item).__name__}")
    return list(made)


def import_spec(spec: str) -> Callable[[], Any]:
    """``module:attribute`` -> the attribute; the error names the spec."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise UnknownEvaluator(f"{spec!r}: expected module:Class or module:function")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise UnknownEvaluator(f"{spec!r}: cannot import it: {exc}") from exc
    if not callable(target):
        raise UnknownEvaluator(f"{spec!r}: not a class or function")
    return target  # type: ignore[no-any-return]


def resolve(
    spec: str, *, allow_import: bool, build_builtin: Callable[[str], list[Evaluator]] | None = None
) -> list[Evaluator]:
    """One name or spec -> evaluators. Built-in names are built by ``build_builtin`` (which knows
    the settings, expectations and the judge); ``allow_import`` admits ``module:attr`` specs."""
    if ":" in spec:
        if not allow_import:
            raise UnknownEvaluator(f"{spec!r}: module:attribute specs are not accepted here; name a built-in or installed evaluator")
        return instantiate(import_spec(spec), spec)
    if spec in BUILTIN_EVALUATORS or spec in JUDGE_EVALUATOR_NAMES:
        if build_builtin is None:
            raise UnknownEvaluator(f"{spec!r}: built-in evaluator, but nothing here builds built-ins")
        return build_builtin(spec)
    ep = _entry_points().get(spec)
    if ep is not None:
        try:
            target = ep.load()
        except Exception as exc:
            raise UnknownEvaluator(f"{spec!r}: entry point {ep.value!r} cannot be loaded: {exc}") from exc
        return instantiate(target, spec)
    raise _unknown(spec)


__all__ = [
    "ENTRY_POINT_GROUP", "EvaluatorInfo", "JUDGE_EVALUATOR_NAMES", "UnknownEvaluator", "catalogue", "check_name", "entry_point_names", "import_spec",
    "instantiate", "resolve",
]
