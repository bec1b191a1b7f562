"""A hand-rolled agent loop on the raw ``openai`` client, instrumented with the official
``opentelemetry-instrumentation-openai-v2`` (chat spans) and ``opentelemetry-util-genai``'s
``TelemetryHandler`` (the app's own ``invoke_agent`` / ``execute_tool`` spans), against the scripted
local server of ``tests/openai_server.py``.

The content capture mode is whatever ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` says
when the calls run (util-genai reads it per call); the tool spans follow the util's advice and only
get arguments/results when ``should_capture_content_on_span`` is true, like a well-behaved app.

``run_trip_agent``: turn 1 asks for ``get_weather`` and ``get_time`` in parallel; turn 2 asks for
``book_hotel``, which raises; turn 3 answers in text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.util.genai.handler import TelemetryHandler
from opentelemetry.util.genai.types import InputMessage, OutputMessage, Text

from tests.openai_server import Behaviour, FakeOpenAI, scripted, text, tool_calls

AGENT = "trip_agent"
MODEL = "gpt-test-trip"
QUESTION = "What is the weather and time in Paris? Then book me a hotel there."
SYSTEM = "You are a travel agent."
ANSWER = "It is sunny and 10:00 in Paris, but I could not book a hotel: no rooms left."
HOTEL_ERROR = "no rooms left in Paris"

SCRIPT: list[Behaviour] = [
    tool_calls(("call_weather_1", "get_weather", {"city": "Paris"}), ("call_time_1", "get_time", {"city": "Paris"})),
    tool_calls(("call_hotel_1", "book_hotel", {"city": "Paris", "nights": 2}), content="Now the hotel."),
    text(ANSWER),
]

TOOL_SCHEMAS = [
    {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": list(properties)}}}
    for name, description, properties in (
        ("get_weather", "Current weather in a city.", {"city": {"type": "string"}}),
        ("get_time", "Local time in a city.", {"city": {"type": "string"}}),
        ("book_hotel", "Book a hotel.", {"city": {"type": "string"}, "nights": {"type": "integer"}}),
    )
]


def get_weather(city: str) -> str:
    return "sunny, 21C"


def get_time(city: str) -> str:
    return "10:00"


def book_hotel(city: str, nights: int) -> str:
    raise ValueError(f"no rooms left in {city}")


TOOLS: dict[str, Callable[..., str]] = {"get_weather": get_weather, "get_time": get_time, "book_hotel": book_hotel}


def run_trip_agent(tp: TracerProvider, lp: LoggerProvider, server: FakeOpenAI) -> str:
    """The agent loop. ``OpenAIInstrumentor`` must already be instrumented with ``tp`` / ``lp``."""
    handler = TelemetryHandler(tracer_provider=tp, logger_provider=lp)
    client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    with handler.invoke_local_agent(agent_name=AGENT, request_model=MODEL) as agent:
        if handler.should_capture_content():
            agent.input_messages = [InputMessage(role="user", parts=[Text(content=QUESTION)])]
        for _ in range(10):
            completion = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOL_SCHEMAS)
            message = completion.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                if handler.should_capture_content():
                    agent.output_messages = [
                        OutputMessage(role="assistant", parts=[Text(content=message.content or "")], finish_reason="stop")
                    ]
                return message.content or ""
            for call in message.tool_calls:
                arguments = json.loads(call.function.arguments)
                tool = handler.tool(call.function.name, tool_call_id=call.id, tool_type="function")
                if tool.should_capture_content_on_span:
                    tool.arguments = arguments
                try:
                    result = TOOLS[call.function.name](**arguments)
                except Exception as exc:  # noqa: BLE001 - the agent reports tool errors to the model
                    tool.fail(exc)
                    result = f"Error: {exc}"
                else:
                    if tool.should_capture_content_on_span:
                        tool.tool_result = result
                    tool.stop()
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    raise AssertionError("the agent loop did not end")


def scripted_server() -> FakeOpenAI:
    return scripted({MODEL: SCRIPT})
