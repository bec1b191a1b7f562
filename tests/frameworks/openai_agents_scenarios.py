"""Scripted OpenAI Agents SDK runs against the local OpenAI-compatible server (``tests/openai_server.py``),
with ``OpenAIChatCompletionsModel`` on an ``AsyncOpenAI(base_url=...)`` client: every model call is a
real chat completions request. Instrumentation (OpenInference, OpenLLMetry) is the caller's business.

``run_concierge``:

- ``concierge`` turn 1: calls ``weather_expert`` (another agent, exposed with ``Agent.as_tool``) with
  ``{"input": "Weather in Paris?"}``; ``weather_expert`` calls ``get_weather(city="Paris")``, then
  answers ``WEATHER_ANSWER``, which becomes the tool's result;
- ``concierge`` turn 2: calls ``book_table(restaurant="Chez Test", people=2)``, which raises
  (the SDK's default failure handler sends an error text back to the model);
- ``concierge`` turn 3: hands off to ``booking_agent`` (``transfer_to_booking_agent``);
- ``booking_agent`` turn 1: answers ``FINAL_ANSWER``.
"""

from __future__ import annotations

import asyncio

from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool
from openai import AsyncOpenAI

from tests.openai_server import FakeOpenAI, scripted, text, tool_calls

QUESTION = "What's the weather in Paris, and can you get me a table at Chez Test for 2?"
WEATHER_QUESTION = "Weather in Paris?"
WEATHER_ANSWER = "Sunny, 21C in Paris."
TABLE_ERROR = "Chez Test is fully booked"
FINAL_ANSWER = "Paris is sunny (21C). Chez Test is fully booked; I can book another restaurant for you."

CONCIERGE_MODEL = "m-concierge"
WEATHER_MODEL = "m-weather"
BOOKING_MODEL = "m-booking"

SCRIPT = {
    CONCIERGE_MODEL: [
        tool_calls(("call_ask_weather", "weather_expert", {"input": WEATHER_QUESTION})),
        tool_calls(("call_book_table", "book_table", {"restaurant": "Chez Test", "people": 2})),
        tool_calls(("call_handoff", "transfer_to_booking_agent", {})),
    ],
    WEATHER_MODEL: [
        tool_calls(("call_weather", "get_weather", {"city": "Paris"})),
        text(WEATHER_ANSWER),
    ],
    BOOKING_MODEL: [text(FINAL_ANSWER)],
}


@function_tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return "sunny, 21C"


@function_tool
def book_table(restaurant: str, people: int) -> str:
    """Book a restaurant table."""
    raise RuntimeError(f"{restaurant} is fully booked")


def build_agents(client: AsyncOpenAI) -> Agent:
    def model(name: str) -> OpenAIChatCompletionsModel:
        return OpenAIChatCompletionsModel(model=name, openai_client=client)

    settings = ModelSettings(parallel_tool_calls=None)
    weather_expert = Agent(
        name="weather_expert",
        instructions="You know the weather.",
        model=model(WEATHER_MODEL),
        tools=[get_weather],
        model_settings=settings,
    )
    booking_agent = Agent(
        name="booking_agent",
        instructions="You book restaurants.",
        handoff_description="Books restaurants.",
        model=model(BOOKING_MODEL),
        model_settings=settings,
    )
    return Agent(
        name="concierge",
        instructions="You help travellers.",
        model=model(CONCIERGE_MODEL),
        tools=[
            weather_expert.as_tool(tool_name="weather_expert", tool_description="Ask the weather expert."),
            book_table,
        ],
        handoffs=[booking_agent],
        model_settings=settings,
    )


def run_concierge(server: FakeOpenAI) -> str:
    """Runs the scenario (instrument before calling). Returns the final output."""

    async def main() -> str:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        try:
            result = await Runner.run(build_agents(client), QUESTION, max_turns=10)
        finally:
            await client.close()
        return str(result.final_output)

    return asyncio.run(main())


def scripted_server() -> FakeOpenAI:
    return scripted(SCRIPT)
