"""Manual tracing for agents no framework instruments.

Record an agent run by hand and it is emitted as OpenTelemetry GenAI semantic
convention spans (``invoke_agent``, ``chat``, ``execute_tool``), so the processor,
``serve``, ``evaluate`` and experiments treat it like any instrumented framework::

    from otel_agent_eval.manual import agent_run

    with agent_run("support", input="Refund order 42") as run:
        with run.step(thought="Look the order up first.") as step:
            step.tool_call("lookup_order", {"order_id": "42"}, result={"status": "paid"})
        with run.step() as step:
            step.tool_call("refund_order", {"order_id": "42"}, error="payment provider down")
        with run.step() as step:
            step.output("I could not refund order 42: the payment provider is down.")
        run.finish("I could not refund order 42: the payment provider is down.")

One ``run.step()`` is one model response: its thought (text alongside tool calls),
the tool calls it requested (each executed and recorded with ``tool_call``), or
its output (``step.output``). Spans go to ``tracer_provider`` (default: the
global one). Message content is recorded on the spans, as instrumentations do
with content capture on.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

SCOPE_NAME = "otel_agent_eval.manual"
PROVIDER = "manual"


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)


def _user_messages(text: str | None) -> str:
    parts = [{"type": "text", "content": text}] if text else []
    return _json([{"role": "user", "parts": parts}])


class ManualStep:
    """One model response. Use through ``AgentRun.step()``."""

    def __init__(self, run: AgentRun, index: int, thought: str) -> None:
        self._run = run
        self.index = index
        self.thought = thought
        self._output: str | None = None
        self._calls: list[dict[str, Any]] = []
        attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": PROVIDER}
        if run.model is not None:  # semconv: the model when known, and the span named after it; never a made-up one
            attributes["gen_ai.request.model"] = run.model
        self._model_span = run._tracer.start_span(
            f"chat {run.model}" if run.model is not None else "chat", context=run._context, kind=SpanKind.CLIENT,
            attributes=attributes,
        )
        self._responded_ns: int | None = None

    def tool_call(self, name: str, arguments: Any = None, result: Any = None, error: str | None = None,
                  *, call_id: str | None = None) -> str:
        """Record one tool call this response requested, and its execution: its result, or its error.

        Returns the call id (generated when not given), which ties the call to its execution.
        """
        if self._responded_ns is None:
            self._responded_ns = time.time_ns()  # the model answered; its tools run after it
        call_id = call_id or f"call_{uuid.uuid4().hex[:12]}"
        self._calls.append({"type": "tool_call", "id": call_id, "name": name, "arguments": arguments})
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id,
        }
        if arguments is not None:
            attributes["gen_ai.tool.call.arguments"] = _json(arguments)
        if result is not None:
            attributes["gen_ai.tool.call.result"] = _json(result)
        span = self._run._tracer.start_span(f"execute_tool {name}", context=self._run._context,
                                            kind=SpanKind.INTERNAL, attributes=attributes)
        if error is not None:
            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR, str(error)))
        span.end()
        return call_id

    def output(self, text: str) -> None:
        """The response's text when it called no tool (the answer)."""
        self._output = text

    def _end(self, error: BaseException | None) -> None:
        parts: list[dict[str, Any]] = []
        if self._calls:
            text = "\n".join(t for t in (self.thought, self._output) if t)
            if text:
                parts.append({"type": "text", "content": text})
            parts.extend(self._calls)
        else:
            if self.thought:
                parts.append({"type": "reasoning", "content": self.thought})
            if self._output:
                parts.append({"type": "text", "content": self._output})
        span = self._model_span
        span.set_attribute("gen_ai.output.messages", _json([
            {"role": "assistant", "parts": parts, "finish_reason": "tool_call" if self._calls else "stop"}
        ]))
        if self.index == 0 and self._run.input is not None:
            span.set_attribute("gen_ai.input.messages", _user_messages(self._run.input))
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        span.end(end_time=self._responded_ns)


class AgentRun:
    """One agent invocation. Use through ``agent_run()``."""

    def __init__(self, span: Span, tracer: trace.Tracer, name: str, input: str | None, model: str | None) -> None:
        self._span = span
        self._tracer = tracer
        self._context = trace.set_span_in_context(span)
        self.name = name
        self.input = input
        self.model = model
        self._steps = 0
        self._output: str | None = None

    @contextmanager
    def step(self, thought: str = "") -> Iterator[ManualStep]:
        """One model response: ``tool_call`` for each call it requested, ``output`` for its answer."""
        step = ManualStep(self, self._steps, thought)
        self._steps += 1
        try:
            yield step
        except BaseException as exc:
            step._end(exc)
            raise
        step._end(None)

    def finish(self, output: str) -> None:
        """The run's final answer to the user."""
        self._output = output

    def _end(self, error: BaseException | None) -> None:
        if self._output is not None:
            self._span.set_attribute("gen_ai.output.messages", _json([
                {"role": "assistant", "parts": [{"type": "text", "content": self._output}], "finish_reason": "stop"}
            ]))
        if error is not None:
            self._span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
            self._span.set_attribute("error.type", type(error).__qualname__)
        self._span.end()


@contextmanager
def agent_run(
    name: str, input: str | None = None, *, tracer_provider: trace.TracerProvider | None = None,
    model: str | None = None, conversation_id: str | None = None,
) -> Iterator[AgentRun]:
    """Record one agent run as an ``invoke_agent {name}`` span; an exception marks it failed and propagates."""
    tracer = trace.get_tracer(SCOPE_NAME, tracer_provider=tracer_provider)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name, "gen_ai.provider.name": PROVIDER,
    }
    if input is not None:
        attributes["gen_ai.input.messages"] = _user_messages(input)
    if conversation_id is not None:
        attributes["gen_ai.conversation.id"] = conversation_id
    span = tracer.start_span(f"invoke_agent {name}", kind=SpanKind.INTERNAL, attributes=attributes)
    run = AgentRun(span, tracer, name, input, model)
    with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
        try:
            yield run
        except BaseException as exc:
            run._end(exc)
            raise
    run._end(None)


__all__ = ["AgentRun", "ManualStep", "agent_run"]
