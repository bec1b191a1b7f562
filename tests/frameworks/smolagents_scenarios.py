"""Scripted smolagents runs against the local OpenAI-compatible server (``tests/openai_server.py``), with
``OpenAIServerModel`` pointed at it: every model call is a real chat completions request.
Instrumentation (OpenInference's ``SmolagentsInstrumentor``) is the caller's business.

``run_tool_calling`` (``ToolCallingAgent`` ``planner`` managing ``ToolCallingAgent`` ``weather_agent``):

- ``planner`` step 1: calls ``get_weather(city="Paris")`` and ``get_weather(city="Rome")`` in one
  response (parallel tool calls, run on the agent's thread pool);
- ``planner`` step 2: calls ``book_table(restaurant="Chez Test", people=2)``, which raises;
- ``planner`` step 3: calls the managed agent ``weather_agent(task=...)``, whose own run calls
  ``get_weather(city="Oslo")`` then ``final_answer(answer=WEATHER_ANSWER)``;
- ``planner`` step 4: ``final_answer(answer=FINAL_ANSWER)``.

``run_code`` (``CodeAgent`` ``coder``): the model writes tool use as Python code, no tool calls:

- step 1: code calling ``get_weather("Paris")`` and ``get_weather("Rome")``;
- step 2: code calling ``book_table("Chez Test", 2)``, which raises (the step fails, the agent goes on);
- step 3: code calling ``final_answer(FINAL_ANSWER)``.
"""

from __future__ import annotations

from smolagents import CodeAgent, OpenAIServerModel, ToolCallingAgent, tool

from tests.openai_server import Behaviour, FakeOpenAI, text, tool_calls

QUESTION = "What's the weather in Paris and Rome, and can you get me a table at Chez Test for 2?"
WEATHER_TASK = "Weather in Oslo?"
WEATHER_ANSWER = "Oslo is rainy, 8C."
TABLE_ERROR = "Chez Test is fully booked"
FINAL_ANSWER = "Paris is sunny (21C), Rome is sunny (25C), Oslo is rainy; Chez Test is fully booked."

PLANNER_MODEL = "m-planner"
WEATHER_MODEL = "m-weather"
CODER_MODEL = "m-coder"

WEATHER = {"Paris": "sunny, 21C", "Rome": "sunny, 25C", "Oslo": "rainy, 8C"}

TOOL_CALLING_SCRIPT = {
    PLANNER_MODEL: [
        tool_calls(("call_paris", "get_weather", {"city": "Paris"}), ("call_rome", "get_weather", {"city": "Rome"})),
        tool_calls(("call_book", "book_table", {"restaurant": "Chez Test", "people": 2})),
        tool_calls(("call_ask", "weather_agent", {"task": WEATHER_TASK})),
        tool_calls(("call_final", "final_answer", {"answer": FINAL_ANSWER})),
    ],
    WEATHER_MODEL: [
        tool_calls(("call_oslo", "get_weather", {"city": "Oslo"})),
        tool_calls(("call_weather_final", "final_answer", {"answer": WEATHER_ANSWER})),
    ],
}


def code(thought: str, source: str) -> Behaviour:
    return text(f"Thought: {thought}\n<code>\n{source}\n</code>")


CODE_THOUGHTS = ("I check the weather in both cities.", "I book the table.", "I give the answer.")
CODE_SOURCES = (
    'paris = get_weather(city="Paris")\nrome = get_weather(city="Rome")\nprint(paris, rome)',
    'print(book_table(restaurant="Chez Test", people=2))',
    f"final_answer({FINAL_ANSWER!r})",
)
CODE_SCRIPT = {CODER_MODEL: [code(t, s) for t, s in zip(CODE_THOUGHTS, CODE_SOURCES)]}


@tool
def get_weather(city: str) -> str:
    """Current weather in a city.

    Args:
        city: The city name.
    """
    return WEATHER[city]


@tool
def book_table(restaurant: str, people: int) -> str:
    """Book a restaurant table.

    Args:
        restaurant: The restaurant's name.
        people: How many people.
    """
    raise RuntimeError(f"{restaurant} is fully booked")


def _model(server: FakeOpenAI, name: str) -> OpenAIServerModel:
    return OpenAIServerModel(model_id=name, api_base=server.base_url, api_key="test", client_kwargs={"max_retries": 0})


def run_tool_calling(server: FakeOpenAI, stream: bool = False) -> str:
    """Runs the ``ToolCallingAgent`` scenario (instrument before calling), the model's answers
    streamed or not (``stream_outputs``: ``generate_stream`` instead of ``generate``). Returns the
    final output."""
    weather_agent = ToolCallingAgent(
        tools=[get_weather], model=_model(server, WEATHER_MODEL), name="weather_agent",
        description="Answers weather questions.", max_steps=4, verbosity_level=0, stream_outputs=stream,
    )
    planner = ToolCallingAgent(
        tools=[get_weather, book_table], model=_model(server, PLANNER_MODEL), managed_agents=[weather_agent],
        name="planner", max_steps=6, verbosity_level=0, stream_outputs=stream,
    )
    return str(planner.run(QUESTION))


def run_code(server: FakeOpenAI) -> str:
    """Runs the ``CodeAgent`` scenario (instrument before calling). Returns the final output."""
    coder = CodeAgent(
        tools=[get_weather, book_table], model=_model(server, CODER_MODEL), name="coder", max_steps=5, verbosity_level=0,
    )
    return str(coder.run(QUESTION))
