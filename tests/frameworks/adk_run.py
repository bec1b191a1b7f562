"""Scripted Google ADK runs, traced by ADK's own telemetry (tracer and logger scope
``gcp.vertex.agent``); run in the ADK virtualenv (``tests/frameworks/envs/adk.txt``: ADK pins
OpenTelemetry below the main test venv's), as ``python adk_run.py PLAN.json``. The model
is ADK's ``LiteLlm`` wrapper (``openai/<model>`` with ``api_base``: LiteLLM's OpenAI provider, so
every model call is a chat completion to the scripted local server).

It writes the run's spans to ``OUT.spans`` (an OTLP ``ExportTraceServiceRequest``) and its log
records to ``OUT.logs`` (an ``ExportLogsServiceRequest``), both protobuf, and prints the final text
of the run as JSON. The schema and content capture come from the environment the caller sets
(``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN``, ``OTEL_SEMCONV_STABILITY_OPT_IN``,
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``); the scripted server and the checks live in
the test process (``tests/test_frameworks_adk.py``, which holds the script: names here must match).

Scenarios:

- ``tools``: one ``LlmAgent`` ``concierge``: ``get_weather`` for Paris (one call), then
  ``get_weather`` for Rome and ``local_time`` for Rome at once (parallel), then ``book_table``,
  which raises (ADK's ``on_tool_error_callback`` turns the exception into the tool result the model
  gets), then the answer.
- ``streamed``: ``tools`` with ``StreamingMode.SSE``: LiteLLM streams every model call, ADK yields
  partial responses as they arrive.
- ``raises``: ``concierge`` without that callback: ``book_table`` raises, and the exception ends the
  run (the runner prints it as the output).
- ``transfer``: ``coordinator`` with ``sub_agents=[weather_agent]``: the coordinator calls
  ``transfer_to_agent``, ``weather_agent`` calls ``get_weather`` and answers.
- ``agent_tool``: ``planner`` with ``AgentTool(weather_agent)``: the planner calls the agent as a
  tool, which calls ``get_weather`` and answers; the planner answers.

Self-contained on purpose: this venv has neither the project nor its test helpers.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download of LiteLLM's price list

from google.adk.agents import LlmAgent, RunConfig
from google.adk.agents.run_config import StreamingMode
from google.adk.models.lite_llm import LiteLlm
from google.adk.runners import InMemoryRunner
from google.adk.tools.agent_tool import AgentTool
from google.genai import types
from opentelemetry import _logs, trace
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

QUESTIONS = {
    "streamed": "What's the weather in Paris and in Rome, the time in Rome, and can you get me a table at Chez Test for 2?",
    "tools": "What's the weather in Paris and in Rome, the time in Rome, and can you get me a table at Chez Test for 2?",
    "raises": "Can you get me a table at Chez Test for 2?",
    "transfer": "What's the weather in Oslo?",
    "agent_tool": "Should I pack an umbrella for Oslo?",
}
MODELS = {"concierge": "m-concierge", "coordinator": "m-coordinator", "planner": "m-planner", "weather_agent": "m-weather"}
WEATHER = {"Paris": "sunny, 21C", "Rome": "sunny, 25C", "Oslo": "rainy, 8C"}


def get_weather(city: str) -> str:
    """Current weather in a city."""
    return WEATHER[city]


def local_time(city: str) -> dict[str, str]:
    """Local time in a city."""
    return {"city": city, "time": "19:30"}


def book_table(restaurant: str, people: int) -> str:
    """Book a restaurant table."""
    raise RuntimeError(f"{restaurant} is fully booked")


async def tool_error(tool: Any, args: dict[str, Any], tool_context: Any, error: Exception) -> dict[str, Any]:
    """ADK's hook for a raising tool: its return value is the result the model gets."""
    return {"error": str(error)}


def model(base_url: str, agent: str) -> LiteLlm:
    return LiteLlm(model=f"openai/{MODELS[agent]}", api_base=base_url, api_key="test", num_retries=0)


def weather_agent(base_url: str) -> LlmAgent:
    return LlmAgent(
        name="weather_agent", model=model(base_url, "weather_agent"), description="Answers weather questions.",
        instruction="You know the weather.", tools=[get_weather],
    )


def build(scenario: str, base_url: str) -> LlmAgent:
    if scenario in ("tools", "streamed"):
        return LlmAgent(
            name="concierge", model=model(base_url, "concierge"), instruction="You help travellers.",
            tools=[get_weather, local_time, book_table], on_tool_error_callback=tool_error,
        )
    if scenario == "raises":
        return LlmAgent(
            name="concierge", model=model(base_url, "concierge"), instruction="You help travellers.", tools=[book_table],
        )
    if scenario == "transfer":
        return LlmAgent(
            name="coordinator", model=model(base_url, "coordinator"), instruction="Route questions.",
            sub_agents=[weather_agent(base_url)],
        )
    if scenario == "agent_tool":
        return LlmAgent(
            name="planner", model=model(base_url, "planner"), instruction="You plan trips.",
            tools=[AgentTool(agent=weather_agent(base_url))],
        )
    raise ValueError(scenario)


async def run(scenario: str, base_url: str) -> str:
    runner = InMemoryRunner(agent=build(scenario, base_url), app_name="travel")
    session = await runner.session_service.create_session(app_name="travel", user_id="u1", session_id="s1")
    message = types.Content(role="user", parts=[types.Part(text=QUESTIONS[scenario])])
    final = ""
    config = RunConfig(streaming_mode=StreamingMode.SSE if scenario == "streamed" else StreamingMode.NONE)
    try:
        async for event in runner.run_async(user_id="u1", session_id=session.id, new_message=message, run_config=config):
            if event.is_final_response() and event.content and event.content.parts:
                final = "".join(p.text or "" for p in event.content.parts)
    except RuntimeError as error:  # the ``raises`` scenario
        return f"raised: {error}"
    return final


def main(plan_path: str) -> None:
    """Runs each entry of the plan (``[{"scenario", "base_url", "env", "out"}]``) in turn, with its
    environment set (ADK reads its telemetry switches at each run), and writes its spans and logs."""
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider, logger_provider = TracerProvider(), LoggerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    trace.set_tracer_provider(tracer_provider)  # ADK's tracer and logger are the global ones
    _logs.set_logger_provider(logger_provider)
    with open(plan_path) as f:
        plan = json.load(f)
    outputs = []
    base_env = dict(os.environ)
    for entry in plan:
        os.environ.clear()
        os.environ.update(base_env, **entry["env"])
        outputs.append(asyncio.run(run(entry["scenario"], entry["base_url"])))
        tracer_provider.force_flush()
        logger_provider.force_flush()
        with open(entry["out"] + ".spans", "wb") as f:
            f.write(encode_spans(spans.get_finished_spans()).SerializeToString())
        with open(entry["out"] + ".logs", "wb") as f:
            f.write(encode_logs(logs.get_finished_logs()).SerializeToString())
        spans.clear()
        logs.clear()
    print(json.dumps({"outputs": outputs}))


if __name__ == "__main__":
    main(sys.argv[1])
