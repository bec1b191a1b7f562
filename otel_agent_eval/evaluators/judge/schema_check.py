"""Deterministic check of tool-call arguments against the tools' JSON schemas.

``gen_ai.tool.definitions`` carries the tools an LLM was offered, each with a
JSON schema of its parameters. A small validator (no dependency) covers the
keywords tool schemas use: type, enum, const, required, properties,
additionalProperties, items, minimum / maximum, minLength / maxLength,
minItems / maxItems, anyOf / oneOf. Other keywords are not checked.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...model import ToolCall

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "object": (dict,), "array": (list,), "null": (type(None),),
}


def tool_schemas(definitions: Sequence[Any] | str | None) -> dict[str, dict[str, Any]]:
    """Tool name -> parameters schema, from semconv (``{"name", "parameters"}``) or OpenAI style (``{"function": {...}}``)."""
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
        name = spec.get("name")
        if isinstance(name, str):
            params = spec.get("parameters", spec.get("input_schema", spec.get("inputSchema")))
            out[name] = params if isinstance(params, dict) else {}
    return out


def check_call(schemas: dict[str, dict[str, Any]], call: ToolCall) -> list[str]:
    """Problems with one call's arguments (empty when valid)."""
    if call.name not in schemas:
        return [f"tool {call.name!r} is not among the defined tools"]
    args = call.arguments
    if args is None:
        args = {}
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return ["arguments are not valid JSON"]
    return validate(args, schemas[call.name], "arguments")


def validate(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    if not isinstance(schema, dict) or not schema:
        return []
    problems: list[str] = []
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options and all(validate(value, o, path) for o in options):
            problems.append(f"{path}: matches none of {key}")
    expected = schema.get("type")
    if expected is not None:
        types = expected if isinstance(expected, list) else [expected]
        if not any(_is_type(value, t) for t in types):
            return problems + [f"{path}: expected {'/'.join(map(str, types))}, got {_json_type(value)}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: {value!r} not in {schema['enum']!r}")
    if "const" in schema and value != schema["const"]:
        problems.append(f"{path}: expected {schema['const']!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{path}: {value} < minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{path}: {value} > maximum {schema['maximum']}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            problems.append(f"{path}: shorter than {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append(f"{path}: longer than {schema['maxLength']}")
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            problems.append(f"{path}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            problems.append(f"{path}: more than {schema['maxItems']} items")
        if isinstance(schema.get("items"), dict):
            for i, item in enumerate(value):
                problems += validate(item, schema["items"], f"{path}[{i}]")
    if isinstance(value, dict):
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        for name in schema.get("required", []) or []:
            if name not in value:
                problems.append(f"{path}: missing required {name!r}")
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in properties:
                problems += validate(item, properties[name], f"{path}.{name}")
            elif extra is False:
                problems.append(f"{path}: unexpected property {name!r}")
            elif isinstance(extra, dict):
                problems += validate(item, extra, f"{path}.{name}")
    return problems


def _is_type(value: Any, name: Any) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(name, (object,)))


def _json_type(value: Any) -> str:
    for name, types in _TYPES.items():
        if _is_type(value, name):
            return name
    return type(value).__name__
