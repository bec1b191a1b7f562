"""Tool-call arguments against the tools' JSON schemas, with the ``jsonschema`` library.

``gen_ai.tool.definitions`` (and the other dialects' equivalents, which assembly
puts in ``AgentTrace.tool_definitions``) carries the tools an LLM was offered, each
with a JSON Schema of its parameters. The deterministic ``tool_argument_validity``
evaluator and the judge's ``tool_argument_accuracy`` both check calls here.

A validator is built once per distinct schema and cached (LRU, bounded): runs of
one agent offer the same tools again and again. ``jsonschema`` is imported on first
use, so importing the package stays cheap.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from ..assembly.dialects.base import canonical_json
from ..model import AgentTrace, EvalResult, ToolCall
from .base import Evaluator

MAX_CACHED_VALIDATORS = 512
"""Distinct parameter schemas whose validators are kept (a bound, whatever the apps send)."""

Check = Callable[[Any], list[str]]


def tool_schemas(definitions: Sequence[Any] | str | None) -> dict[str, dict[str, Any]]:
    """Tool name -> parameters schema, from semconv (``{"name", "parameters"}``), OpenAI
    (``{"function": {...}}``) or Anthropic / MCP style (``input_schema`` / ``inputSchema``)."""
    if isinstance(definitions, str):
        try:
            definitions = json.loads(definitions)
        except ValueError:
            return {}
    out: dict[str, dict[str, Any]] = {}
    for item in definitions or ():
        if not isinstance(item, dict):
            continue
        spec = item.get("function") if isinstance(item.get("function"), dict) else item
        name = spec.get("name")  # type: ignore[union-attr]
        if isinstance(name, str):
            params = spec.get("parameters", spec.get("input_schema", spec.get("inputSchema")))  # type: ignore[union-attr]
            out[name] = params if isinstance(params, dict) else {}
    return out


def checker(schema: dict[str, Any]) -> Check | None:
    """A function listing the problems of an arguments value under ``schema`` (cached per
    distinct schema); None when the schema itself is not a valid JSON Schema (not checked)."""
    return _checker(canonical_json(schema))


@lru_cache(maxsize=MAX_CACHED_VALIDATORS)
def _checker(schema_text: str) -> Check | None:
    import jsonschema
    from jsonschema.validators import validator_for
    from referencing.exceptions import Unresolvable

    schema = json.loads(schema_text)
    cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError:
        return None
    validator = cls(schema)

    def check(value: Any) -> list[str]:
        try:
            errors = sorted(validator.iter_errors(value), key=_order)
            return [_describe(error) for error in errors]
        except Unresolvable:  # a $ref to another document: not checked
            return []

    return check


def check_call(schemas: dict[str, dict[str, Any]], call: ToolCall) -> list[str]:
    """Problems with one call's arguments (empty when valid, or when its schema is unusable)."""
    if call.name not in schemas:
        return [f"tool {call.name!r} is not among the defined tools"]
    check = checker(schemas[call.name])
    return check_arguments(check, call.arguments) if check is not None else []


def check_arguments(check: Check, arguments: Any) -> list[str]:
    """``check`` applied to arguments as recorded: ``None`` is ``{}``, JSON text is parsed."""
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return ["arguments are not valid JSON"]
    return check(arguments)


def _order(error: Any) -> tuple[list[str], bool, str]:
    """By argument path; at one path, a missing required argument first (the plainest message)."""
    return list(map(str, error.absolute_path)), error.validator != "required", str(error.validator)


_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object", type(None): "null"}


def _describe(error: Any) -> str:
    """A short message with the argument's path (``arguments.items[0].id``)."""
    path = "arguments" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    kind, expected, value = error.validator, error.validator_value, error.instance
    if kind == "required":
        missing = [name for name in expected if isinstance(value, dict) and name not in value]
        return f"{path}: missing required {', '.join(map(repr, missing))}"
    if kind == "type":
        types = "/".join(expected) if isinstance(expected, list) else expected
        return f"{path}: expected {types}, got {_JSON_TYPES.get(type(value), type(value).__name__)}"
    if kind == "additionalProperties" and isinstance(value, dict):
        known = error.schema.get("properties", {})
        extra = [name for name in value if name not in known]
        return f"{path}: unexpected property {', '.join(map(repr, extra))}"
    if kind in ("maximum", "minimum"):
        return f"{path}: {value!r} {'>' if kind == 'maximum' else '<'} {kind} {expected!r}"
    if kind == "enum":
        return f"{path}: {value!r} not in {expected!r}"
    return f"{path}: {error.message}"[:300]


class ToolArgumentValidity(Evaluator):
    """Do the arguments of every tool call satisfy the called tool's JSON Schema?

    The schemas are the tool definitions the run recorded (``tool_definitions``
    passed here override them). A call of a tool that was not offered counts as
    invalid. Score: valid calls / calls; any invalid call fails (threshold 1.0). Skipped
    when the run recorded no tool definitions (``no_tool_definitions``) or made no
    tool call (``no_tool_calls``).
    """

    name = "tool_argument_validity"
    version = "1"
    default_threshold = 1.0
    telemetry_free = True

    def __init__(self, tool_definitions: Sequence[Any] | None = None, threshold: float | None = None) -> None:
        super().__init__(threshold)
        self.tool_definitions = tool_definitions

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        definitions = self.tool_definitions if self.tool_definitions is not None else trace.tool_definitions
        schemas = tool_schemas(definitions)
        if not schemas:
            return [self.skipped(trace, "the run recorded no tool definitions", reason="no_tool_definitions")]
        calls = trace.tool_calls
        if not calls:
            return [self.skipped(trace, "no tool call", reason="no_tool_calls")]
        checks: dict[str, Check | None] = {}
        invalid: dict[str, list[str]] = {}
        unchecked: set[str] = set()
        for n, call in enumerate(calls):
            if call.name not in schemas:
                invalid[f"{n}:{call.name}"] = [f"tool {call.name!r} is not among the defined tools"]
                continue
            if call.name not in checks:
                checks[call.name] = checker(schemas[call.name])
            check = checks[call.name]
            if check is None:
                unchecked.add(call.name)
                continue
            problems = check_arguments(check, call.arguments)
            if problems:
                invalid[f"{n}:{call.name}"] = problems
        details: dict[str, Any] = {"calls": len(calls), "invalid": invalid}
        if unchecked:
            details["invalid_schemas"] = sorted(unchecked)
        if not invalid:
            return [self.scored(trace, 1.0, f"all {len(calls)} tool calls have valid arguments", details)]
        first = next(iter(invalid.items()))
        explanation = f"{len(invalid)} of {len(calls)} tool calls with invalid arguments; {first[0]}: {first[1][0]}"
        return [self.scored(trace, 1 - len(invalid) / len(calls), explanation[:300], details)]
