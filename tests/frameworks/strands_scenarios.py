"""A scripted Strands Agents run against the local OpenAI-compatible server (``tests/openai_server.py``), with
Strands' own OpenAI model provider (``strands.models.openai.OpenAIModel``, streaming chat completions
by default): every model call is a real HTTP request. Strands traces itself (no instrumentor); where
its spans go is the caller's business (``strands_scenarios.traced_by``).

``run_concierge``, one agent ``concierge`` with three ``@tool`` functions:

- cycle 1: text ``THOUGHT`` and two calls at once, ``get_weather(city="Paris")`` and
  ``local_time(city="Paris")`` (a dict result: Strands sends it to the model as JSON text);
- cycle 2: ``book_table(restaurant="Chez Test", people=2)``, which raises (Strands' ``@tool``
  wrapper turns the exception into an ``error`` tool result ``TABLE_ERROR_SENT`` for the model);
- cycle 3: answers ``FINAL_ANSWER``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from opentelemetry import trace as trace_api
from opentelemetry.instrumentation.threading import ThreadingInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.util._once import Once
from strands import Agent, tool
from strands.models.openai import OpenAIModel
from strands.telemetry import tracer as strands_tracer

from tests.openai_server import FakeOpenAI, scripted, text, tool_calls

AGENT = "concierge"
MODEL = "m-strands"
SYSTEM_PROMPT = "You help travellers."
QUESTION = "What's the weather and the time in Paris, and can you get me a table at Chez Test for 2?"
THOUGHT = "Let me look that up."
TABLE_ERROR = "Chez Test is fully booked"
TABLE_ERROR_SENT = f"Error: RuntimeError - {TABLE_ERROR}"
"""What Strands' ``@tool`` wrapper sends the model when ``book_table`` raises."""
LOCAL_TIME = {"city": "Paris", "time": "19:30"}
LOCAL_TIME_SENT = '{"city": "Paris", "time": "19:30"}'
FINAL_ANSWER = "Paris is sunny (21C) and it is 19:30 there. Chez Test is fully booked, sorry."

SCRIPT = {
    MODEL: [
        tool_calls(
            ("call_weather", "get_weather", {"city": "Paris"}),
            ("call_time", "local_time", {"city": "Paris"}),
            content=THOUGHT,
        ),
        tool_calls(("call_book", "book_table", {"restaurant": "Chez Test", "people": 2})),
        text(FINAL_ANSWER),
    ],
}


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return "sunny, 21C"


@tool
def local_time(city: str) -> dict[str, Any]:
    """Local time in a city."""
    return dict(LOCAL_TIME)


@tool
def book_table(restaurant: str, people: int) -> str:
    """Book a restaurant table."""
    raise RuntimeError(f"{restaurant} is fully booked")


def scripted_server() -> FakeOpenAI:
    return scripted(SCRIPT)


def run_concierge(server: FakeOpenAI) -> str:
    """Runs the scenario (under ``traced_by``). Returns the agent's result as text."""
    model = OpenAIModel(
        client_args={"base_url": server.base_url, "api_key": "test", "max_retries": 0},
        model_id=MODEL,
    )
    agent = Agent(
        name=AGENT,
        model=model,
        tools=[get_weather, local_time, book_table],
        system_prompt=SYSTEM_PROMPT,
        callback_handler=None,  # the default prints the streamed text
    )
    return str(agent(QUESTION))


@contextmanager
def traced_by(provider: TracerProvider, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Strands' spans go to ``provider`` inside the block; the globals are restored after it.

    How Strands picks its tracer: every Agent, event loop cycle and tool executor calls
    ``strands.telemetry.tracer.get_tracer()``, a process-wide singleton built on first use from
    the *global* TracerProvider (``trace.get_tracer_provider()``), which also reads
    ``OTEL_SEMCONV_STABILITY_OPT_IN`` then and instruments ``threading``
    (``ThreadingInstrumentor``). ``StrandsTelemetry(tracer_provider=tp)`` only adds exporters to
    ``tp`` (when asked: ``setup_console_exporter``/``setup_otlp_exporter``); it does not route
    Strands' spans there, and ``StrandsTelemetry()`` creates and globally sets a provider of its
    own. So: make ``provider`` the global one, as an app does, but for this block only (OTel allows
    setting it once per process: its set-once guard is reset the way opentelemetry-test-utils'
    ``reset_trace_globals`` does), and drop Strands' singleton so it is rebuilt here, with the
    environment the caller set (monkeypatch restores both afterwards).
    """
    was_instrumented = ThreadingInstrumentor().is_instrumented_by_opentelemetry
    monkeypatch.setattr(trace_api, "_TRACER_PROVIDER_SET_ONCE", Once())
    monkeypatch.setattr(trace_api, "_TRACER_PROVIDER", None)
    trace_api.set_tracer_provider(provider)
    monkeypatch.setattr(strands_tracer, "_tracer_instance", None)
    try:
        yield
    finally:
        if not was_instrumented:
            ThreadingInstrumentor().uninstrument()
