"""Scripted Agno runs against the local OpenAI-compatible server (``tests/openai_server.py``), with
``OpenAIChat`` pointed at it: every model call is a real chat completions request. Instrumentation
(OpenInference's ``AgnoInstrumentor``, which Agno's own ``agno.tracing.setup_tracing`` installs too)
is the caller's business.

``run_agent`` (``Agent`` ``planner``), blocking (``run``) or async and streamed (``arun(stream=True)``):

- response 1: ``get_weather(city="Paris")`` and ``get_weather(city="Rome")`` (parallel tool calls);
- response 2: ``book_table(restaurant="Chez Test", people=2)``, which raises (Agno sends the error
  text back to the model);
- response 3: the answer.

``run_team`` (``Team`` ``lead`` with member ``Agent`` ``weather_agent``): the leader calls Agno's
``delegate_task_to_member`` tool; the member calls ``get_weather(city="Oslo")`` and answers; the
leader answers.
"""

from __future__ import annotations

import asyncio

from agno.agent import Agent
from agno.models.openai import OpenAIChat
from agno.team import Team

from tests.openai_server import FakeOpenAI, text, tool_calls

QUESTION = "What's the weather in Paris and Rome, and can you get me a table at Chez Test for 2?"
TABLE_ERROR = "Chez Test is fully booked"
ANSWER = "Paris is sunny (21C), Rome is sunny (25C); Chez Test is fully booked."
TEAM_QUESTION = "What's the weather in Oslo?"
WEATHER_TASK = "Weather in Oslo?"
WEATHER_ANSWER = "Oslo is rainy, 8C."
TEAM_ANSWER = "Oslo is rainy (8C)."

PLANNER_MODEL = "m-planner"
LEAD_MODEL = "m-lead"
WEATHER_MODEL = "m-weather"

WEATHER = {"Paris": "sunny, 21C", "Rome": "sunny, 25C", "Oslo": "rainy, 8C"}

AGENT_SCRIPT = {
    PLANNER_MODEL: [
        tool_calls(("call_paris", "get_weather", {"city": "Paris"}), ("call_rome", "get_weather", {"city": "Rome"})),
        tool_calls(("call_book", "book_table", {"restaurant": "Chez Test", "people": 2})),
        text(ANSWER),
    ],
}
TEAM_SCRIPT = {
    LEAD_MODEL: [
        tool_calls(("call_ask", "delegate_task_to_member", {"member_id": "weather-agent", "task": WEATHER_TASK})),
        text(TEAM_ANSWER),
    ],
    WEATHER_MODEL: [tool_calls(("call_oslo", "get_weather", {"city": "Oslo"})), text(WEATHER_ANSWER)],
}


def get_weather(city: str) -> str:
    """Current weather in a city."""
    return WEATHER[city]


def book_table(restaurant: str, people: int) -> str:
    """Book a restaurant table."""
    raise RuntimeError(f"{restaurant} is fully booked")  # TABLE_ERROR


def _model(server: FakeOpenAI, name: str) -> OpenAIChat:
    return OpenAIChat(id=name, base_url=server.base_url, api_key="test", max_retries=0)


def run_agent(server: FakeOpenAI, streamed: bool = False) -> str:
    """Runs the single-agent scenario (instrument before calling). Returns the final output."""
    agent = Agent(name="planner", model=_model(server, PLANNER_MODEL), tools=[get_weather, book_table],
                  instructions="You plan trips.")
    if not streamed:
        return str(agent.run(QUESTION).content)

    async def streamed_run() -> str:
        chunks = [e.content async for e in agent.arun(QUESTION, stream=True)
                  if type(e).__name__ == "RunContentEvent" and isinstance(e.content, str)]
        return "".join(chunks)

    return asyncio.run(streamed_run())


def run_team(server: FakeOpenAI) -> str:
    """Runs the team scenario (instrument before calling). Returns the final output."""
    member = Agent(name="weather_agent", role="Knows the weather", model=_model(server, WEATHER_MODEL), tools=[get_weather])
    team = Team(name="lead", members=[member], model=_model(server, LEAD_MODEL))
    return str(team.run(TEAM_QUESTION).content)
