"""Scripted AutoGen AgentChat runs with AutoGen's native OpenTelemetry tracing; run in the AutoGen
virtualenv (``tests/frameworks/envs/autogen.txt``: ``autogen-core`` pins ``protobuf`` 5, the main
test venv has 7), as ``python autogen_run.py SCENARIO BASE_URL OUT [INSTRUMENTATION]``. It writes the run's spans to
OUT as one OTLP ``ExportTraceServiceRequest`` (protobuf) and prints the final output as JSON.

Instrumentation, as AutoGen's tracing guide sets it up: AutoGen's own spans (``create_agent``,
``invoke_agent``, ``execute_tool``; the runtime's ``autogen publish/process/create`` messaging
spans in a team) go to the global tracer provider; model calls are traced by OpenLLMetry's
``OpenAIInstrumentor`` (``opentelemetry-instrumentation-openai``), as ``openai.chat`` spans with
GenAI semconv messages (INSTRUMENTATION ``native``, the default). With ``openinference``,
OpenInference's ``AutogenAgentChatInstrumentor`` instead of OpenLLMetry (AutoGen's own spans stay on).

Scenarios (the model's script lives in the test):

- ``single``: an ``AssistantAgent`` ``planner`` calls ``get_weather`` for Paris and Rome in one
  response (parallel), then ``book_table``, which raises (AutoGen sends the error text back to the
  model), then answers.
- ``swarm``: a ``Swarm`` of ``planner`` (the same two tool turns, then a handoff to
  ``weather_agent`` through AutoGen's ``transfer_to_weather_agent`` tool) and ``weather_agent``
  (``get_weather`` for Oslo, then the answer, which ends the run).

Self-contained on purpose: this venv has neither the project nor its test helpers.
"""

from __future__ import annotations

import asyncio
import json
import sys

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import TextMessageTermination
from autogen_agentchat.teams import Swarm
from autogen_ext.models.openai import OpenAIChatCompletionClient
from openinference.instrumentation.autogen_agentchat import AutogenAgentChatInstrumentor
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

# Run as a script: its directory is on sys.path, the project is not.
from autogen_scenarios import PLANNER_MODEL, QUESTION, WEATHER, WEATHER_MODEL

MODEL_INFO = {"vision": False, "function_calling": True, "json_output": False, "family": "unknown",
              "structured_output": False}


def get_weather(city: str) -> str:
    """Current weather in a city."""
    return WEATHER[city]


def book_table(restaurant: str, people: int) -> str:
    """Book a restaurant table."""
    raise RuntimeError(f"{restaurant} is fully booked")  # TABLE_ERROR


def model(base_url: str, name: str) -> OpenAIChatCompletionClient:
    return OpenAIChatCompletionClient(model=name, base_url=base_url, api_key="test", max_retries=0, model_info=MODEL_INFO)


def planner(base_url: str, **kwargs: object) -> AssistantAgent:
    return AssistantAgent("planner", model_client=model(base_url, PLANNER_MODEL), tools=[get_weather, book_table],
                          system_message="You plan trips.", max_tool_iterations=5, **kwargs)


async def run_single(base_url: str) -> str:
    result = await planner(base_url).run(task=QUESTION)
    return result.messages[-1].content


async def run_swarm(base_url: str) -> str:
    weather_agent = AssistantAgent("weather_agent", model_client=model(base_url, WEATHER_MODEL), tools=[get_weather],
                                   system_message="You know the weather.", max_tool_iterations=5)
    team = Swarm([planner(base_url, handoffs=["weather_agent"]), weather_agent],
                 termination_condition=TextMessageTermination("weather_agent"))
    result = await team.run(task=QUESTION)
    return result.messages[-1].content


SCENARIOS = {"single": run_single, "swarm": run_swarm}


def main(scenario: str, base_url: str, out: str, instrumentation: str = "native") -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # AutoGen's own spans use the global provider
    instrumentor = OpenAIInstrumentor() if instrumentation == "native" else AutogenAgentChatInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        output = asyncio.run(SCENARIOS[scenario](base_url))
    finally:
        instrumentor.uninstrument()
    provider.force_flush()
    with open(out, "wb") as f:
        f.write(encode_spans(exporter.get_finished_spans()).SerializeToString())
    print(json.dumps({"output": output}))


if __name__ == "__main__":
    main(*sys.argv[1:5])
