"""A tiny scripted agent that emits GenAI semantic-convention spans.

It behaves like an instrumented agent framework (``invoke_agent`` ->
``chat`` / ``execute_tool`` siblings, content in ``gen_ai.input.messages`` /
``gen_ai.output.messages``) with a scripted model instead of a network call.
The demo runs it; tests use it to produce semconv traces with the real SDK.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode


@dataclass
class Turn:
    """What the scripted model answers on one turn."""

    text: str | None = None
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    input_tokens: int = 120
    output_tokens: int = 30


class ToolError(Exception):
    """Raised by a scripted tool to fail its call."""


@dataclass
class ScriptedAgent:
    name: str
    tools: dict[str, Callable[..., Any]]
    model: str = "demo-model-1"
    provider: str = "demo"

    def run(
        self,
        tracer: trace.Tracer,
        task: str,
        turns: list[Turn],
        conversation_id: str | None = None,
        model_latency_s: float = 0.0,
    ) -> str | None:
        """Run the script under an ``invoke_agent`` span; returns the final text."""
        history: list[dict[str, Any]] = [{"role": "user", "parts": [{"type": "text", "content": task}]}]
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": self.name,
            "gen_ai.provider.name": self.provider,
            "gen_ai.request.model": self.model,
            "gen_ai.input.messages": json.dumps(history),
        }
        if conversation_id:
            attributes["gen_ai.conversation.id"] = conversation_id
        final: str | None = None
        with tracer.start_as_current_span(f"invoke_agent {self.name}", kind=SpanKind.INTERNAL, attributes=attributes) as agent_span:
            for number, turn in enumerate(turns):
                output = self._chat(tracer, history, turn, number, model_latency_s)
                history.append(output)
                if not turn.tool_calls:
                    final = turn.text
                    break
                results = [self._execute(tracer, f"call_{number}_{i}", name, args) for i, (name, args) in enumerate(turn.tool_calls)]
                history.append({"role": "tool", "parts": results})
            agent_span.set_attribute(
                "gen_ai.output.messages",
                json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": final or ""}], "finish_reason": "stop"}]),
            )
        return final

    def _chat(self, tracer: trace.Tracer, history: list[dict[str, Any]], turn: Turn, number: int, latency: float) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        if turn.text:
            parts.append({"type": "text", "content": turn.text})
        for i, (name, args) in enumerate(turn.tool_calls):
            parts.append({"type": "tool_call", "id": f"call_{number}_{i}", "name": name, "arguments": args})
        finish = "tool_call" if turn.tool_calls else "stop"
        output = {"role": "assistant", "parts": parts, "finish_reason": finish}
        with tracer.start_as_current_span(
            f"chat {self.model}",
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": self.provider,
                "gen_ai.request.model": self.model,
                "gen_ai.response.model": self.model,
                "gen_ai.input.messages": json.dumps(history),
            },
        ) as span:
            if latency:
                time.sleep(latency)
            span.set_attribute("gen_ai.output.messages", json.dumps([output]))
            span.set_attribute("gen_ai.response.finish_reasons", [finish])
            span.set_attribute("gen_ai.usage.input_tokens", turn.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", turn.output_tokens)
        return {"role": "assistant", "parts": parts}

    def _execute(self, tracer: trace.Tracer, call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
        with tracer.start_as_current_span(
            f"execute_tool {name}",
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.arguments": json.dumps(args),
            },
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            tool = self.tools.get(name)
            try:
                if tool is None:
                    raise ToolError(f"unknown tool {name!r}")
                result = tool(**args)
            except Exception as exc:  # noqa: BLE001 - the agent reports tool errors to the model
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, str(exc)))
                span.set_attribute("error.type", type(exc).__name__)
                return {"type": "tool_call_response", "id": call_id, "response": f"error: {exc}"}
            span.set_attribute("gen_ai.tool.call.result", json.dumps(result))
            return {"type": "tool_call_response", "id": call_id, "response": result}
