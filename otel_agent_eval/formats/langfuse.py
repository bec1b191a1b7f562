"""Rebuild ``SpanRecord``s from Langfuse trace exports (the recorded framework traces).

Langfuse post-processes span attributes: it moves content attributes into the
observation's top-level ``input``/``output``, decodes some JSON strings into objects and
stringifies some numbers; span kind, status code and events are lost. This loader undoes
what can be undone without inventing data:

* ``metadata.attributes`` are kept; decoded objects go back to JSON strings, lists of
  scalars become tuples (as the SDK stores them), known numeric attributes become numbers.
* ``input``/``output`` are written back to the dialect's content attribute, unless that
  attribute exists, or the same value is still present under another attribute (Langfuse
  *copied* it, e.g. ADK ``gcp.vertex.agent.llm_request``, OpenInference ``input.value``),
  or it was derived from legacy indexed ``gen_ai.prompt.N.*`` attributes (Koog).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from os import PathLike
from pathlib import Path
from typing import Any

from ..metadata import resource_metadata
from ..records import STATUS_ERROR, STATUS_UNSET, SpanRecord

__all__ = ["content_attribute_keys", "load_attribute_map", "load_langfuse_export"]

_INT_PREFIXES = ("gen_ai.usage.", "llm.token_count.")
_INT_KEYS = frozenset(
    {
        "gen_ai.request.choice.count",
        "gen_ai.request.max_tokens",
        "gen_ai.request.seed",
        "gen_ai.request.top_k",
    }
)
_FLOAT_KEYS = frozenset(
    {
        "gen_ai.request.temperature",
        "gen_ai.request.top_p",
        "gen_ai.request.frequency_penalty",
        "gen_ai.request.presence_penalty",
        "gen_ai.client.operation.duration",
    }
)
_GENAI_MODEL_OPERATIONS = frozenset(
    {
        "chat",
        "text_completion",
        "generate_content",
        "embeddings",
        "invoke_agent",
        "create_agent",
    }
)
_GENAI_MESSAGE_SCOPES = frozenset({"agent_framework", "pydantic-ai"})
_LEGACY_INDEXED = re.compile(r"^gen_ai\.(prompt|completion)\.\d+\.")
_ISO = re.compile(
    r"^(?P<base>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})"
    r"(?:\.(?P<frac>\d{1,9}))?(?P<tz>Z|[+-]\d{2}:\d{2})?$"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def iso_to_unix_nano(value: str) -> int:
    """Parse an ISO-8601 timestamp to unix ns exactly (no float rounding; up to 9 digits)."""
    m = _ISO.match(value.strip())
    if m is None:
        raise ValueError(f"not an ISO-8601 timestamp: {value!r}")
    tz = m.group("tz") or "Z"
    base = datetime.fromisoformat(m.group("base") + ("+00:00" if tz == "Z" else tz))
    seconds = (base - _EPOCH) // timedelta(seconds=1)
    frac = (m.group("frac") or "").ljust(9, "0")
    return seconds * 1_000_000_000 + int(frac or 0)



def _to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (str, bool, int, float))


def _normalize_value(key: str, value: Any) -> Any:
    """Undo Langfuse's value post-processing for one attribute (None means drop)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return _to_json(value)
    if isinstance(value, list):
        if all(_is_scalar(v) for v in value):
            return tuple(value)
        return _to_json(value)
    if isinstance(value, str) and (
        key.startswith(_INT_PREFIXES) or key in _INT_KEYS or key in _FLOAT_KEYS
    ):
        try:
            return float(value) if key in _FLOAT_KEYS else int(value)
        except ValueError:
            return value
    return value


def _normalize_attributes(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in (raw or {}).items():
        normalized = _normalize_value(key, value)
        if normalized is not None:
            out[key] = normalized
    return out


def content_attribute_keys(
    name: str, attributes: Mapping[str, Any], scope_name: str
) -> tuple[str, str] | None:
    """Where this span's dialect keeps its input and output content, if anywhere."""
    operation = attributes.get("gen_ai.operation.name")
    if any(k.startswith("gcp.vertex.agent.") for k in attributes):  # Google ADK native
        if operation == "execute_tool" or name.startswith("execute_tool"):
            return "gcp.vertex.agent.tool_call_args", "gcp.vertex.agent.tool_response"
        if name == "call_llm":
            return "gcp.vertex.agent.llm_request", "gcp.vertex.agent.llm_response"
    if "openinference.span.kind" in attributes:
        return "input.value", "output.value"
    if scope_name == "pydantic-ai" and (
        name.startswith("running tool") or "tool_arguments" in attributes
    ):
        return "tool_arguments", "tool_response"
    if operation == "execute_tool" or (operation is None and "gen_ai.tool.name" in attributes):
        return "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"
    if operation in _GENAI_MODEL_OPERATIONS or scope_name in _GENAI_MESSAGE_SCOPES:
        if any(_LEGACY_INDEXED.match(k) for k in attributes):
            return None  # Langfuse built input/output from gen_ai.prompt.N.* (Koog)
        return "gen_ai.input.messages", "gen_ai.output.messages"
    if scope_name == "langfuse-sdk":
        return "langfuse.observation.input", "langfuse.observation.output"
    return None


def _same_content(value: Any, existing: Any) -> bool:
    if existing == value or (isinstance(existing, tuple) and list(existing) == value):
        return True
    if isinstance(existing, str) and not isinstance(value, str):
        try:
            return json.loads(existing) == value
        except ValueError:
            return False
    return False


def _restore_content(attributes: dict[str, Any], key: str, value: Any) -> None:
    if value is None or key in attributes:
        return
    if any(_same_content(value, existing) for existing in attributes.values()):
        return  # still present under another key: Langfuse copied, not moved it
    attributes[key] = value if isinstance(value, str) else _to_json(value)


def _record_from_observation(obs: Mapping[str, Any], resources: dict[Any, Mapping[str, Any]]) -> SpanRecord:
    """``resources`` shares one ``resource_metadata`` mapping per distinct resource of an export."""
    metadata = obs.get("metadata") or {}
    resource = resource_metadata(metadata.get("resourceAttributes"))
    resource = resources.setdefault(tuple(resource.items()), resource)
    scope_name = (metadata.get("scope") or {}).get("name") or ""
    name = obs.get("name") or ""
    attributes = _normalize_attributes(metadata.get("attributes"))
    keys = content_attribute_keys(name, attributes, scope_name)
    if keys is not None:
        _restore_content(attributes, keys[0], obs.get("input"))
        _restore_content(attributes, keys[1], obs.get("output"))
    start = iso_to_unix_nano(obs["startTime"])
    end = iso_to_unix_nano(obs["endTime"]) if obs.get("endTime") else start
    parent = obs.get("parentObservationId")
    is_error = obs.get("level") == "ERROR"
    return SpanRecord(
        trace_id=int(obs["traceId"], 16),
        span_id=int(obs["id"], 16),
        parent_span_id=int(parent, 16) if parent else None,
        name=name,
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        attributes=attributes,
        status_code=STATUS_ERROR if is_error else STATUS_UNSET,
        status_message=(obs.get("statusMessage") or None) if is_error else None,
        scope_name=scope_name,
        resource=resource,
    )


def load_langfuse_export(path: str | PathLike[str]) -> list[SpanRecord]:
    """Load a Langfuse trace export (``{"trace": ..., "observations": [...]}``).

    Returns one record per observation, ordered by start time. Span kind is not in the
    export, so every record is INTERNAL; events are empty.
    """
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    observations = doc.get("observations") if isinstance(doc, dict) else None
    if not isinstance(observations, list):
        raise ValueError(f"{path}: not a Langfuse export (no 'observations' list)")
    records = []
    resources: dict[Any, Mapping[str, Any]] = {}
    for i, obs in enumerate(observations):
        try:
            records.append(_record_from_observation(obs, resources))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: observations[{i}]: {exc!r}") from exc
    return sorted(records, key=lambda r: (r.start_time_unix_nano, r.end_time_unix_nano))


def load_attribute_map(
    path: str | PathLike[str],
    *,
    trace_id: int = 1,
    span_id: int = 1,
    name: str | None = None,
    kind: str = "CLIENT",
) -> SpanRecord:
    """Wrap a flat ``{attribute: value}`` file (one span's attributes) as a root span.

    The file has no ids, times or name: ids and kind are parameters (GenAI model spans
    are CLIENT), times are 0, and the name defaults to the semconv ``{operation} {model}``.
    """
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a JSON object of attributes")
    attributes = _normalize_attributes(raw)
    if name is None:
        parts = [attributes.get("gen_ai.operation.name"), attributes.get("gen_ai.request.model")]
        name = " ".join(str(p) for p in parts if p) or Path(path).stem
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=None,
        name=name,
        start_time_unix_nano=0,
        end_time_unix_nano=0,
        attributes=attributes,
        kind=kind,
    )
