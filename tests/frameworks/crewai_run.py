"""Scripted CrewAI runs, traced by OpenInference's ``CrewAIInstrumentor`` and ``OpenAIInstrumentor``
(CrewAI's docs instrument both); run in the CrewAI virtualenv (``tests/frameworks/envs/crewai.txt``:
``crewai`` needs ``openai`` 2.x and ``pydantic`` 2.12, the main test venv has newer ones), as
``python crewai_run.py SCENARIO BASE_URL OUT [MODE]``. It writes the run's spans to OUT as one OTLP
``ExportTraceServiceRequest`` (protobuf) and prints the final output as JSON; the scripted server
and the checks live in the test process (``tests/test_frameworks_crewai.py``).

Scenarios:

- ``single``: a crew of one agent ``Trip planner`` and one task: the model calls ``get_weather``
  for Paris and Rome in one response (parallel), then ``book_table``, which raises, then answers.
- ``crew``: a crew of two agents with a task each, run in sequence: ``Weather researcher`` calls
  ``get_weather`` for Oslo and answers; ``Trip writer`` (that answer as its task's context) answers.
- ``delegate``: ``Trip planner`` (``allow_delegation=True``) calls CrewAI's ``delegate_work_to_coworker``
  tool for ``Weather researcher``, which calls ``get_weather`` for Oslo and answers; the planner answers.

MODE ``wrappers`` (the default, the instrumentor's recommended mode: it wraps CrewAI's methods) or
``events`` (``use_event_listener=True``, for CrewAI run through its event bus: spans from CrewAI's
events, LLM spans from its ``LLMCall*`` events; alone, as the openai instrumentor's spans would
not join the crew's trace in that mode).

Self-contained on purpose: this venv has neither the project nor its test helpers.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "false")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")

from crewai import LLM, Agent, Crew, Process, Task
from crewai.tools import tool
from openinference.instrumentation.crewai import CrewAIInstrumentor
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

# Run as a script: its directory is on sys.path, the project is not.
from crewai_scenarios import (
    PLANNER_MODEL,
    QUESTION,
    RESEARCH_TASK,
    WEATHER,
    WEATHER_MODEL,
    WRITE_TASK,
    WRITER_MODEL,
)


@tool("get_weather")
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return WEATHER[city]


@tool("book_table")
def book_table(restaurant: str, people: int) -> str:
    """Book a restaurant table."""
    raise RuntimeError(f"{restaurant} is fully booked")  # TABLE_ERROR


def llm(base_url: str, model: str) -> LLM:
    return LLM(model=f"openai/{model}", base_url=base_url, api_key="test", max_retries=0, timeout=30)


def run_single(base_url: str) -> str:
    planner = Agent(role="Trip planner", goal="Plan trips", backstory="You plan trips.", tools=[get_weather, book_table],
                    llm=llm(base_url, PLANNER_MODEL), allow_delegation=False, max_iter=5, verbose=False)
    task = Task(description=QUESTION, expected_output="A short answer.", agent=planner)
    return str(Crew(agents=[planner], tasks=[task], process=Process.sequential, verbose=False).kickoff())


def run_crew(base_url: str) -> str:
    researcher = Agent(role="Weather researcher", goal="Find the weather", backstory="You know the weather.",
                       tools=[get_weather], llm=llm(base_url, WEATHER_MODEL), allow_delegation=False, max_iter=4, verbose=False)
    writer = Agent(role="Trip writer", goal="Write trip advice", backstory="You write trip advice.",
                   llm=llm(base_url, WRITER_MODEL), allow_delegation=False, max_iter=2, verbose=False)
    research = Task(description=RESEARCH_TASK, expected_output="The weather.", agent=researcher)
    write = Task(description=WRITE_TASK, expected_output="One sentence.", agent=writer, context=[research])
    return str(Crew(agents=[researcher, writer], tasks=[research, write], process=Process.sequential, verbose=False).kickoff())


def run_delegate(base_url: str) -> str:
    planner = Agent(role="Trip planner", goal="Plan trips", backstory="You plan trips.", llm=llm(base_url, PLANNER_MODEL),
                    allow_delegation=True, max_iter=3, verbose=False)
    researcher = Agent(role="Weather researcher", goal="Find the weather", backstory="You know the weather.",
                       tools=[get_weather], llm=llm(base_url, WEATHER_MODEL), allow_delegation=False, max_iter=3, verbose=False)
    task = Task(description=WRITE_TASK, expected_output="One sentence.", agent=planner)
    return str(Crew(agents=[planner, researcher], tasks=[task], process=Process.sequential, verbose=False).kickoff())


SCENARIOS = {"single": run_single, "crew": run_crew, "delegate": run_delegate}


def main(scenario: str, base_url: str, out: str, mode: str = "wrappers") -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    if mode == "events":  # the LLM spans come from CrewAI's events: no openai instrumentor
        CrewAIInstrumentor().instrument(tracer_provider=provider, use_event_listener=True)
        instrumentors = []
    else:
        instrumentors = [CrewAIInstrumentor(), OpenAIInstrumentor()]
        for instrumentor in instrumentors:
            instrumentor.instrument(tracer_provider=provider)
    try:
        output = SCENARIOS[scenario](base_url)
    finally:
        for instrumentor in instrumentors:
            instrumentor.uninstrument()
    provider.force_flush()
    with open(out, "wb") as f:
        f.write(encode_spans(exporter.get_finished_spans()).SerializeToString())
    print(json.dumps({"output": output}))


if __name__ == "__main__":
    main(*sys.argv[1:5])
