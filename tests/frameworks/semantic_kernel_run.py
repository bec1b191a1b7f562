"""Scripted Semantic Kernel agent runs with Semantic Kernel's native GenAI OpenTelemetry
diagnostics; run in the Semantic Kernel virtualenv (``tests/frameworks/envs/semantic_kernel.txt``:
``semantic-kernel`` pins ``pydantic`` below the main test venv's), as
``python semantic_kernel_run.py SCENARIO BASE_URL OUT``. It writes the run's spans to OUT and its
log records to ``OUT.logs``, each one OTLP export request (protobuf), and prints the final output
as JSON.

Instrumentation, as Semantic Kernel's observability guide sets it up: the environment variable
``SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true`` (set before the import),
a global tracer provider, and a global logger provider with an OpenTelemetry ``LoggingHandler`` on
the ``semantic_kernel`` logger: the model's messages are recorded only as log records
(``gen_ai.user.message``, ``gen_ai.choice``, ...), not on the ``chat`` spans.

Scenarios (the model's script lives in the test):

- ``single``: a ``ChatCompletionAgent`` ``planner`` with the ``Travel`` plugin calls
  ``get_weather`` for Paris and Rome in one response (parallel), then ``book_table``, which raises
  (Semantic Kernel sends the error text back to the model), then answers.
- ``agent_as_tool``: the same ``planner``, also given the ``weather_agent`` plugin whose ``ask``
  function runs a second ``ChatCompletionAgent`` ``weather_agent`` (``get_weather`` for Oslo, then
  its answer); ``planner`` asks it after the failed booking, then answers.
- ``streamed``: ``single`` through ``invoke_stream`` (streamed chat completions).

Self-contained on purpose: this venv has neither the project nor its test helpers.
"""

from __future__ import annotations

import os

os.environ["SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE"] = "true"

import asyncio
import json
import logging
import sys

from openai import AsyncOpenAI
from opentelemetry import trace
from opentelemetry._logs import set_logger_provider
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import (
    InMemoryLogRecordExporter,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from semantic_kernel.agents import ChatCompletionAgent
from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion
from semantic_kernel.functions import kernel_function

# Run as a script: its directory is on sys.path, the project is not.
from semantic_kernel_scenarios import PLANNER_MODEL, QUESTION, WEATHER, WEATHER_MODEL


class Travel:
    @kernel_function(description="Current weather in a city.")
    def get_weather(self, city: str) -> str:
        return WEATHER[city]

    @kernel_function(description="Book a restaurant table.")
    def book_table(self, restaurant: str, people: int) -> str:
        raise RuntimeError(f"{restaurant} is fully booked")  # TABLE_ERROR


def service(base_url: str, model: str) -> OpenAIChatCompletion:
    return OpenAIChatCompletion(ai_model_id=model, async_client=AsyncOpenAI(base_url=base_url, api_key="test", max_retries=0))


class WeatherAgent:
    """A sub-agent as a plugin function: its run is the function's execution."""

    def __init__(self, base_url: str) -> None:
        self.agent = ChatCompletionAgent(name="weather_agent", instructions="You know the weather.", plugins=[Travel()],
                                         service=service(base_url, WEATHER_MODEL))

    @kernel_function(description="Ask the weather agent a question.")
    async def ask(self, task: str) -> str:
        return str((await self.agent.get_response(messages=task)).content)


async def run_single(base_url: str, *extra: object) -> str:
    planner = ChatCompletionAgent(name="planner", instructions="You plan trips.", plugins=[Travel(), *extra],
                                  service=service(base_url, PLANNER_MODEL))
    return str((await planner.get_response(messages=QUESTION)).content)


async def run_agent_as_tool(base_url: str) -> str:
    return await run_single(base_url, WeatherAgent(base_url))


async def run_streamed(base_url: str) -> str:
    planner = ChatCompletionAgent(name="planner", instructions="You plan trips.", plugins=[Travel()],
                                  service=service(base_url, PLANNER_MODEL))
    return "".join([str(chunk.content) async for chunk in planner.invoke_stream(messages=QUESTION)])


SCENARIOS = {"single": run_single, "agent_as_tool": run_agent_as_tool, "streamed": run_streamed}


def main(scenario: str, base_url: str, out: str) -> None:
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider, logger_provider = TracerProvider(), LoggerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    trace.set_tracer_provider(tracer_provider)
    set_logger_provider(logger_provider)
    handler = LoggingHandler(logger_provider=logger_provider)
    handler.addFilter(logging.Filter("semantic_kernel"))
    sk_logger = logging.getLogger("semantic_kernel")
    sk_logger.addHandler(handler)
    sk_logger.setLevel(logging.INFO)
    output = asyncio.run(SCENARIOS[scenario](base_url))
    tracer_provider.force_flush()
    logger_provider.force_flush()
    with open(out, "wb") as f:
        f.write(encode_spans(spans.get_finished_spans()).SerializeToString())
    with open(out + ".logs", "wb") as f:
        f.write(encode_logs(logs.get_finished_logs()).SerializeToString())
    print(json.dumps({"output": output}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
