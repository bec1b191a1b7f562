"""Scripted LlamaIndex agent runs, traced by OpenInference's ``LlamaIndexInstrumentor``; run in the
LlamaIndex virtualenv (``tests/frameworks/envs/llamaindex.txt``: ``llama-index-llms-openai`` needs
``openai`` 2.x, the main test venv has 3.x), as ``python llamaindex_run.py SCENARIO BASE_URL OUT``.
It writes the run's spans to OUT as one OTLP ``ExportTraceServiceRequest`` (protobuf) and prints the
final output as JSON; the scripted OpenAI-compatible server and the checks live in the test process
(``tests/test_frameworks_llamaindex.py``, which holds the model's script); both read the shared
constants of ``llamaindex_scenarios.py``.

Scenarios:

- ``function``: an ``AgentWorkflow`` of two ``FunctionAgent``s. ``planner`` calls ``get_weather``
  for Paris and Rome in one response (parallel), then ``book_table``, which raises (LlamaIndex sends
  the error text back to the model), then hands off to ``weather_agent`` (the workflow's ``handoff``
  tool); ``weather_agent`` calls ``get_weather`` for Oslo and answers.
- ``function_blocking``: the same without streaming (``FunctionAgent(streaming=False)``: ``achat``).
- ``react``: a ``ReActAgent`` ``reactor`` whose model writes ``Thought/Action/Action Input`` text:
  ``get_weather`` for Paris, then ``book_table`` (raises), then the answer.

Self-contained on purpose: this venv has neither the project nor its test helpers.
"""

from __future__ import annotations

import asyncio
import json
import sys

from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent, ReActAgent
from llama_index.core.tools import FunctionTool
from llama_index.llms.openai import OpenAI
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

# Run as a script: its directory is on sys.path, the project is not.
from llamaindex_scenarios import PLANNER_MODEL, QUESTION, REACT_MODEL, WEATHER, WEATHER_MODEL


def get_weather(city: str) -> str:
    """Current weather in a city."""
    return WEATHER[city]


def book_table(restaurant: str, people: int) -> str:
    """Book a restaurant table."""
    raise RuntimeError(f"{restaurant} is fully booked")  # TABLE_ERROR


def llm(base_url: str, model: str) -> OpenAI:
    return OpenAI(model=model, api_base=base_url, api_key="test", max_retries=0, timeout=30)


def tools() -> list[FunctionTool]:
    return [FunctionTool.from_defaults(get_weather), FunctionTool.from_defaults(book_table)]


async def run_function(base_url: str, streaming: bool = True) -> str:
    planner = FunctionAgent(streaming=streaming,
        name="planner", description="Plans the trip.", system_prompt="You plan trips.", tools=tools(),
        llm=llm(base_url, PLANNER_MODEL), can_handoff_to=["weather_agent"],
    )
    weather_agent = FunctionAgent(streaming=streaming,
        name="weather_agent", description="Answers weather questions.", system_prompt="You know the weather.",
        tools=[FunctionTool.from_defaults(get_weather)], llm=llm(base_url, WEATHER_MODEL),
    )
    workflow = AgentWorkflow(agents=[planner, weather_agent], root_agent="planner")
    return str(await workflow.run(user_msg=QUESTION))


async def run_react(base_url: str) -> str:
    agent = ReActAgent(name="reactor", description="Answers travel questions.", tools=tools(), llm=llm(base_url, REACT_MODEL))
    return str(await agent.run(user_msg=QUESTION))


async def run_function_blocking(base_url: str) -> str:
    return await run_function(base_url, streaming=False)


SCENARIOS = {"function": run_function, "function_blocking": run_function_blocking, "react": run_react}


def main(scenario: str, base_url: str, out: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    LlamaIndexInstrumentor().instrument(tracer_provider=provider)
    try:
        output = asyncio.run(SCENARIOS[scenario](base_url))
    finally:
        LlamaIndexInstrumentor().uninstrument()
    provider.force_flush()
    with open(out, "wb") as f:
        f.write(encode_spans(exporter.get_finished_spans()).SerializeToString())
    print(json.dumps({"output": output}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
