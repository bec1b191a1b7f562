"""The judge's own spans, for those who want to see judge calls and their cost.

Off by default: judge requests run under the evaluation context (``isolation.py``),
which no sampler-honouring provider records. With ``judge_tracer_provider=`` on
the processor, each judge HTTP attempt becomes one ``chat {model}`` CLIENT span
(GenAI semantic conventions: operation, provider, request and response model,
token usage, ``error.type``) on that provider, plus ``agent_eval.evaluator.name``
and a link to the evaluated agent span. It is a root span of its own trace and is
never made current, so instrumentations of the HTTP call below stay under the
evaluation context; its scope is ``OWN_SCOPE``, which the processor never keeps.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, Tracer

from ...isolation import current_run
from ...records import OWN_SCOPE


def judge_tracer(provider: trace.TracerProvider | None) -> Tracer | None:
    """The tracer for judge spans, or None (no judge spans)."""
    return None if provider is None else provider.get_tracer(OWN_SCOPE)


def _same(completion: Any) -> Any:
    return completion


@contextlib.contextmanager
def judge_span(tracer: Tracer | None, client: Any, model: str, temperature: float | None) -> Iterator[Callable[[Any], Any]]:
    """Around one judge request: yields ``record(completion) -> completion``, which adds the response attributes."""
    if tracer is None:
        yield _same
        return
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": model,
    }
    if temperature is not None:
        attributes["gen_ai.request.temperature"] = temperature
    url = getattr(client, "base_url", None)
    if getattr(url, "host", None):
        attributes["server.address"] = url.host
        if url.port:
            attributes["server.port"] = url.port
    links = []
    run = current_run()
    if run is not None:
        attributes["agent_eval.evaluator.name"] = run.evaluator
        if run.span_id:
            links.append(Link(SpanContext(int(run.trace_id, 16), int(run.span_id, 16), is_remote=True)))
    span = tracer.start_span(f"chat {model}", context=Context(), kind=SpanKind.CLIENT, attributes=attributes, links=links)

    def record(completion: Any) -> Any:
        with contextlib.suppress(Exception):  # a span must never fail a judge call
            _response_attributes(span, completion)
        return completion

    try:
        yield record
    except BaseException as exc:
        span.set_attribute("error.type", type(exc).__qualname__)
        span.set_status(Status(StatusCode.ERROR, str(exc)[:200]))
        raise
    finally:
        span.end()


def _response_attributes(span: Any, completion: Any) -> None:
    for key, value in (("gen_ai.response.model", getattr(completion, "model", None)),
                       ("gen_ai.response.id", getattr(completion, "id", None))):
        if value:
            span.set_attribute(key, value)
    reasons = [c.finish_reason for c in getattr(completion, "choices", None) or () if getattr(c, "finish_reason", None)]
    if reasons:
        span.set_attribute("gen_ai.response.finish_reasons", reasons)
    usage = getattr(completion, "usage", None)
    if usage is not None:
        if usage.prompt_tokens is not None:
            span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
        if usage.completion_tokens is not None:
            span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
