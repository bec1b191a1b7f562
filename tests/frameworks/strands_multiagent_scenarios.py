"""Scripted Strands multi-agent runs against the local OpenAI-compatible server, each model call a
streamed chat completion (Strands' ``OpenAIModel`` always streams: ``stream: true`` with
``stream_options.include_usage``, answered as ``chat.completion.chunk`` Server-Sent Events). Traced by
Strands itself, under ``strands_scenarios.traced_by``.

- ``run_agent_as_tool``: ``planner`` has ``weather_agent.as_tool()``; it calls it (one call), the
  weather agent calls ``get_weather`` for Oslo (one call) and answers, the planner answers.
- ``run_swarm``: a ``Swarm`` of ``triage`` and ``weather_agent``: triage hands off with Strands'
  ``handoff_to_agent`` tool and ends its turn (a second model call), the weather agent calls
  ``get_weather`` and answers.
"""

from __future__ import annotations

from typing import Any

from strands import Agent, tool
from strands.models.openai import OpenAIModel
from strands.multiagent import Swarm

from tests.openai_server import FakeOpenAI, scripted, text, tool_calls

PLANNER, TRIAGE, WEATHER_AGENT = "planner", "triage", "weather_agent"
PLANNER_MODEL, TRIAGE_MODEL, WEATHER_MODEL = "m-planner", "m-triage", "m-weather"
UMBRELLA_QUESTION = "Should I pack an umbrella for Oslo?"
OSLO_QUESTION = "What's the weather in Oslo?"
WEATHER_REQUEST = "What's the weather in Oslo?"
OSLO = "Oslo is rainy, 8C."
UMBRELLA = "Yes, pack an umbrella: Oslo is rainy."
HANDOFF_MESSAGE = "The user asks about the weather in Oslo."
HANDED_OFF = "Handed off to the weather agent."


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return "rainy, 8C"


def _weather_replies() -> list[Any]:
    return [tool_calls(("call_w", "get_weather", {"city": "Oslo"})), text(OSLO)]


AGENT_AS_TOOL_SCRIPT = {
    PLANNER_MODEL: [tool_calls(("call_a", WEATHER_AGENT, {"input": WEATHER_REQUEST})), text(UMBRELLA)],
    WEATHER_MODEL: _weather_replies(),
}
SWARM_SCRIPT = {
    TRIAGE_MODEL: [
        tool_calls(("call_h", "handoff_to_agent", {"agent_name": WEATHER_AGENT, "message": HANDOFF_MESSAGE})),
        text(HANDED_OFF),
    ],
    WEATHER_MODEL: _weather_replies(),
}


def _model(server: FakeOpenAI, model: str) -> OpenAIModel:
    return OpenAIModel(client_args={"base_url": server.base_url, "api_key": "test", "max_retries": 0}, model_id=model)


def _weather_agent(server: FakeOpenAI) -> Agent:
    return Agent(name=WEATHER_AGENT, description="Answers weather questions.", model=_model(server, WEATHER_MODEL),
                 tools=[get_weather], system_prompt="You know the weather.", callback_handler=None)


def agent_as_tool_server() -> FakeOpenAI:
    return scripted(AGENT_AS_TOOL_SCRIPT)


def swarm_server() -> FakeOpenAI:
    return scripted(SWARM_SCRIPT)


def run_agent_as_tool(server: FakeOpenAI) -> str:
    planner = Agent(name=PLANNER, model=_model(server, PLANNER_MODEL), tools=[_weather_agent(server).as_tool()],
                    system_prompt="You plan trips.", callback_handler=None)
    return str(planner(UMBRELLA_QUESTION))


def run_swarm(server: FakeOpenAI) -> str:
    triage = Agent(name=TRIAGE, description="Routes questions.", model=_model(server, TRIAGE_MODEL),
                   system_prompt="Route questions to the right agent.", callback_handler=None)
    swarm = Swarm([triage, _weather_agent(server)], entry_point=triage)
    result = swarm(OSLO_QUESTION)
    return str(result.status)
