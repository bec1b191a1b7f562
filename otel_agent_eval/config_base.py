"""How every settings model is loaded: arguments over environment variables over defaults.

Shared by ``Settings`` (``config.py``) and the judge's ``JudgeSettings``; it knows no
setting of its own, so anything may import it.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

ENV_PREFIX = "OTEL_AGENT_EVAL_"


class ConfigError(ValueError):
    """A setting has a value that is not allowed."""


def comma_list(value: Any) -> Any:
    """``"a, b"`` (as environment variables give lists) -> ``("a", "b")``; other values as they are."""
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return value


M = TypeVar("M", bound=BaseModel)


def load_model(
    cls: type[M],
    prefix: str,
    env: Mapping[str, str] | None,
    overrides: Mapping[str, Any],
    *,
    fallbacks: Mapping[str, str] | None = None,
    secrets: tuple[str, ...] = (),
    given_as: Mapping[str, str] | None = None,
) -> M:
    """Validate field ``x`` from ``overrides``, else ``{prefix}X``, else a ``fallbacks``
    variable, else its default. Errors name the argument or variable, never a secret's value;
    ``given_as`` names an override as its caller took it (a command's ``--flag``)."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name in cls.model_fields:
        for var in (prefix + name.upper(), (fallbacks or {}).get(name)):
            raw = env.get(var) if var else None
            if raw is not None and raw.strip() != "":
                values[name] = raw.strip()
                sources[name] = var  # type: ignore[assignment]
                break
    unknown = [k for k in overrides if k not in cls.model_fields]
    if unknown:
        raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}; allowed: {', '.join(cls.model_fields)}")
    for name, value in overrides.items():
        if value is not None:
            values[name] = value
            sources[name] = argument_name(name, given_as)
    try:
        return cls(**values)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, prefix, sources, secrets)) from None


def argument_name(name: str, given_as: Mapping[str, str] | None) -> str:
    """How errors name a setting given as an argument: as the caller took it, else ``argument {name}``."""
    return (given_as or {}).get(name) or f"argument {name}"


def _describe(exc: ValidationError, prefix: str, sources: dict[str, str], secrets: tuple[str, ...]) -> str:
    lines = []
    for error in exc.errors():
        name = str(error["loc"][0]) if error["loc"] else "?"
        var = prefix + name.upper()
        where = sources.get(name, var)
        label = f"{where} ({var})" if where != var else var
        shown = "***" if name in secrets else repr(error.get("input"))
        lines.append(f"{label}: {error['msg']} (got {shown})")
    return "invalid configuration: " + "; ".join(lines)


def table_for(cls: type[BaseModel], prefix: str) -> str:
    """A Markdown table of a settings model's variables, defaults and meanings."""
    rows = ["| Variable | Default | Meaning |", "| --- | --- | --- |"]
    for name, field in cls.model_fields.items():
        default = field.default if field.default_factory is None else field.default_factory()  # type: ignore[call-arg]
        if isinstance(default, tuple):
            default = ",".join(default)
        rows.append(f"| `{prefix}{name.upper()}` | `{default}` | {field.description} |")
    return "\n".join(rows)


def threshold_values(thresholds: Any, known: Collection[str] | None = None) -> dict[str, float]:
    """Evaluator name -> threshold within [0, 1]; with ``known``, each name one of them."""
    if not isinstance(thresholds, dict):
        raise ValueError("expected a mapping of evaluator name to threshold")
    out: dict[str, float] = {}
    for name, raw in thresholds.items():
        if known is not None and name not in known:
            raise ValueError(f"unknown evaluator {name!r}; allowed: {', '.join(sorted(known))}")
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: threshold {raw!r} is not a number") from None
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name}: threshold {value:g} is outside [0, 1]")
        out[name] = value
    return out
