"""Where a run came from: ``AgentTrace.metadata``, defined once.

A run's metadata is the resource attributes of the process that emitted its agent
span (``service.name``, ``service.version``, ``deployment.environment.name``) plus the
agent span's own scalar attributes, message content left out. Evaluators read it;
the sinks take the ``service`` label from it (``service_of``).

Resource attributes are the same for every span a process emits, so each source
reduces a resource to one shared, read-only mapping (``resource_metadata``) that
all its ``SpanRecord``s point to: nothing is copied per span.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

SERVICE_NAME = "service.name"
SERVICE_VERSION = "service.version"
DEPLOYMENT_ENVIRONMENT = "deployment.environment.name"
RESOURCE_KEYS: Mapping[str, str] = MappingProxyType({
    SERVICE_NAME: SERVICE_NAME,
    SERVICE_VERSION: SERVICE_VERSION,
    DEPLOYMENT_ENVIRONMENT: DEPLOYMENT_ENVIRONMENT,
    "deployment.environment": DEPLOYMENT_ENVIRONMENT,  # the spelling before semconv 1.27
})
"""Resource attribute read -> metadata key. The older spelling yields to the new one."""

NO_RESOURCE: Mapping[str, Any] = MappingProxyType({})
UNKNOWN_SERVICE = "unknown"
SDK_UNKNOWN_SERVICE = "unknown_service"
"""What SDKs report when no service name is set (``unknown_service:<process>``)."""

CONTENT_PREFIXES = (
    # GenAI semconv and its older spellings
    "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "gen_ai.tool.definitions",
    "gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "gen_ai.prompt", "gen_ai.completion", "gen_ai.content.",
    # OpenInference, OpenLLMetry, Vercel AI SDK, Google ADK, Pydantic AI / Logfire
    "input.value", "output.value", "llm.input_messages", "llm.output_messages", "llm.tools", "llm.prompts",
    "traceloop.entity.input", "traceloop.entity.output",
    "ai.prompt", "ai.response.text", "ai.response.toolCalls", "ai.response.reasoning", "ai.response.object",
    "ai.toolCall.args", "ai.toolCall.result", "ai.toolCall.input", "ai.toolCall.output",
    "gcp.vertex.agent.llm_request", "gcp.vertex.agent.llm_response", "gcp.vertex.agent.tool_call_args",
    "gcp.vertex.agent.tool_response", "gcp.vertex.agent.data",
    "all_messages_events", "pydantic_ai.all_messages", "final_result", "logfire.json_schema", "tool.parameters",
)
"""Span attribute keys (and key prefixes, for flattened ``llm.input_messages.0.message.content``)
holding message content: never metadata."""
_CONTENT_KEYS: dict[str, bool] = {}
"""Attribute key -> is it content (``CONTENT_PREFIXES``): an instrumentation writes the same keys on
every agent span, and one look-up is cheaper than comparing each key with every prefix."""
MAX_CONTENT_KEYS = 4_096
MAX_VALUE_CHARS = 1024
"""Longer string attributes are content under a key we do not know (a prompt, a document): left out."""

_last: tuple[object, Mapping[str, Any]] = (None, NO_RESOURCE)
"""The last resource seen and its mapping: an SDK provider has one resource for all its spans."""


def resource_metadata(attributes: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The metadata keys of one resource's attributes, as a read-only mapping to share."""
    if not attributes or not isinstance(attributes, Mapping):
        return NO_RESOURCE
    found: dict[str, Any] = {}
    for key, target in RESOURCE_KEYS.items():
        value = attributes.get(key)
        if value is not None and value != "" and target not in found:
            found[target] = _text(value) if not isinstance(value, (bool, int, float)) else value
    return MappingProxyType(found) if found else NO_RESOURCE


def _text(value: Any) -> str:
    """A string that encodes as UTF-8 (a Prometheus label value), whatever the resource held."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return str(value).encode("utf-8", "replace").decode("utf-8")


def sdk_resource_metadata(resource: Any) -> Mapping[str, Any]:
    """``resource_metadata`` of an SDK ``Resource``, computed once per resource object.

    Called for every span on the collector thread; a provider's spans share one
    ``Resource``, so this is one identity check per span.
    """
    global _last
    last = _last
    if last[0] is resource:
        return last[1]
    mapping = resource_metadata(resource.attributes) if resource is not None else NO_RESOURCE
    _last = (resource, mapping)  # one tuple swap: safe without a lock
    return mapping


def run_metadata(resource: Mapping[str, Any], agent_attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    """``AgentTrace.metadata``: the agent span's scalar attributes, then its resource's.

    Sequence values and message content (``CONTENT_PREFIXES``, or any string longer than
    ``MAX_VALUE_CHARS``) are left out; a resource key wins over a span attribute of that name.
    """
    metadata: dict[str, Any] = {}
    if agent_attributes:
        for key, value in agent_attributes.items():
            kind = type(value)
            if kind is str:
                if len(value) > MAX_VALUE_CHARS:
                    continue
            elif kind is not int and kind is not float and kind is not bool:
                continue
            content = _CONTENT_KEYS.get(key)
            if content is None:
                content = key.startswith(CONTENT_PREFIXES)
                if len(_CONTENT_KEYS) < MAX_CONTENT_KEYS:
                    _CONTENT_KEYS[key] = content
            if content:
                continue
            metadata[key] = value
    metadata.update(resource)
    return metadata


def service_of(metadata: Mapping[str, Any]) -> str:
    """The ``service`` label of a run: its resource's ``service.name``, else ``unknown``.

    The SDKs' stand-in for an unset name (``unknown_service``, ``unknown_service:python``)
    is ``unknown`` too: one value for one fact, whichever language sent the run.
    """
    name = metadata.get(SERVICE_NAME)
    if not name:
        return UNKNOWN_SERVICE
    name = str(name)
    return UNKNOWN_SERVICE if name.startswith(SDK_UNKNOWN_SERVICE) else name
