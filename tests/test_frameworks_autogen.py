"""Acceptance (issue 15): AutoGen AgentChat 0.7 (``AssistantAgent`` alone, and a ``Swarm`` with a
handoff) with AutoGen's native OpenTelemetry tracing, every model call a real chat completions
request to the scripted local server (``tests/openai_server.py``) running in this process.

Which instrumentation: AutoGen's own tracing guide sets up its native spans (``autogen-core``
emits GenAI semconv ``create_agent`` / ``invoke_agent`` / ``execute_tool`` spans to the global
tracer provider, always on) plus OpenLLMetry's ``OpenAIInstrumentor`` for the model calls: that is
the ``native`` run, the one AutoGen documents. Arize Phoenix's users instrument with OpenInference's
``autogen-agentchat`` instrumentor instead: the ``openinference`` run. Its spans come *on top of*
the native ones (which stay on): an ``{agent}.on_messages_stream`` AGENT span inside each
``invoke_agent``, an ``OpenAIChatCompletionClient.create`` LLM span per model call (messages as
``llm.*_messages``, no tool definitions), a ``{agent}.{tool}`` TOOL span around each native
``execute_tool`` (arguments and result; OK with the error text as output when the tool raised,
while the native span inside it is ERROR), and a ``Swarm.run_stream`` CHAIN span around a team.

``autogen-core`` pins ``protobuf`` 5 and the main test venv has 7, so the framework runs in its
own venv (``tests/frameworks/envs/autogen.txt``) as a subprocess (``tests/frameworks/autogen_run.py``)
that writes its spans to an OTLP protobuf file.

Native tree: ``invoke_agent {name}`` (``gen_ai.agent.name``; no input or output recorded) ->
``openai.chat`` (OpenLLMetry, semconv ``gen_ai.input/output.messages``) and ``execute_tool {tool}``
(``gen_ai.tool.name``, ``gen_ai.tool.call.id``; no arguments or result; a tool that raised ends
ERROR with ``error.type`` and an exception event). ``create_agent {name}`` is a root span of its
own. In a team, AutoGen's runtime starts a new trace for every message it publishes
(``autogen publish`` roots, ``autogen process`` / ``autogen create`` children): each agent's turn
is an ``invoke_agent`` span in a trace of its own, with nothing linking it to the agent that
handed off to it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from otel_agent_eval import AgentTrace, assemble
from tests.frameworks import autogen_scenarios as sc
from tests.frameworks.fidelity import AUTOGEN, by_param, fidelity
from tests.frameworks.harness import (
    RecordSpan,
    all_traces,
    assert_traces,
    call,
    hex_span,
    only,
    step,
    steps_in_order,
    trace,
)
from tests.frameworks.venvs import framework_python, run_in_venv
from tests.openai_server import counted_usage, text, tool_calls

RUNNER = Path(__file__).resolve().parent / "frameworks" / "autogen_run.py"
TOOL_ERROR = f"RuntimeError: {sc.TABLE_ERROR}"
HANDOFF_RESULT = "Transferred to weather_agent, adopting the role of weather_agent immediately."

PLANNER_TURNS = [
    tool_calls(("call_paris", "get_weather", {"city": "Paris"}), ("call_rome", "get_weather", {"city": "Rome"})),
    tool_calls(("call_book", "book_table", {"restaurant": "Chez Test", "people": 2})),
]
SINGLE_SCRIPT = {sc.PLANNER_MODEL: [*PLANNER_TURNS, text(sc.ANSWER)]}
SWARM_SCRIPT = {
    sc.PLANNER_MODEL: [*PLANNER_TURNS, tool_calls(("call_handoff", "transfer_to_weather_agent", {}))],
    sc.WEATHER_MODEL: [tool_calls(("call_oslo", "get_weather", {"city": "Oslo"})), text(sc.FINAL_ANSWER)],
}


@dataclass
class Run:
    output: str
    spans: list[RecordSpan]
    instrumentation: str
    """``native`` (AutoGen's spans + OpenLLMetry's ``openai.chat``) or ``openinference``."""

    def traces(self) -> list[AgentTrace]:
        return sorted(assemble([s.record for s in self.spans]), key=lambda t: t.start_time_unix_nano)

    @property
    def native(self) -> bool:
        return self.instrumentation == "native"

    def chats(self) -> list[RecordSpan]:
        """The model calls: ``openai.chat`` (OpenLLMetry) or ``OpenAIChatCompletionClient.create`` (OpenInference)."""
        if self.native:
            return [s for s in self.spans if s.attributes.get("gen_ai.operation.name") == "chat"]
        return [s for s in self.spans if s.attributes.get("openinference.span.kind") == "LLM"]

    def tools(self, name: str) -> list[RecordSpan]:
        """The tool spans: AutoGen's ``execute_tool``, or OpenInference's TOOL span around it."""
        key = "gen_ai.tool.name" if self.native else "tool.name"
        return [s for s in self.spans if s.attributes.get(key) == name]

    def agent(self, name: str) -> RecordSpan:
        """The agent's span: AutoGen's ``invoke_agent``, or OpenInference's AGENT span inside it."""
        span_name = f"invoke_agent {name}" if self.native else f"{name}.on_messages_stream"
        return only(self.spans, lambda s: s.name == span_name)


def with_tools(expected: AgentTrace, run: Run, model: str) -> AgentTrace:
    """The tools offered to the model, as its first ``openai.chat`` span lists them (OpenInference's
    LLM spans list none)."""
    if not run.native:
        return expected
    chat = next(s for s in run.chats() if s.attributes.get("gen_ai.request.model") == model)
    return expected.model_copy(update={"tool_definitions": json.loads(chat.attributes["gen_ai.tool.definitions"])})


@pytest.fixture(scope="session")
def autogen_python() -> Path:
    return framework_python("autogen")


def run_scenario(python: Path, scenario: str, script: dict, out: Path, instrumentation: str) -> Run:
    output, spans, _ = run_in_venv(python, RUNNER, script, out, scenario, instrumentation)
    return Run(output, [RecordSpan(r) for r in spans], instrumentation)


INSTRUMENTATIONS = ["native", "openinference"]


@pytest.fixture(scope="module", params=INSTRUMENTATIONS)
def single(request: pytest.FixtureRequest, autogen_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    out = tmp_path_factory.mktemp("autogen") / "single.pb"
    return run_scenario(autogen_python, "single", SINGLE_SCRIPT, out, request.param)


@pytest.fixture(scope="module", params=INSTRUMENTATIONS)
def swarm(request: pytest.FixtureRequest, autogen_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    out = tmp_path_factory.mktemp("autogen") / "swarm.pb"
    return run_scenario(autogen_python, "swarm", SWARM_SCRIPT, out, request.param)


def planner_steps(run: Run) -> list:
    """The planner's two tool turns: parallel calls, then the failing tool (its result the error
    text AutoGen sent the model, read from the next call's input with its call id)."""
    c, weather, book = run.chats(), run.tools("get_weather"), run.tools("book_table")
    return [
        step(0, c[0], [call(weather[0], "get_weather", {"city": "Paris"}, sc.WEATHER["Paris"], call_id="call_paris"),
                       call(weather[1], "get_weather", {"city": "Rome"}, sc.WEATHER["Rome"], call_id="call_rome")],
             model=sc.PLANNER_MODEL, usage=counted_usage(0, {}, "")),
        step(1, c[1], [call(book[0], "book_table", {"restaurant": "Chez Test", "people": 2}, sc.TABLE_ERROR,
                            call_id="call_book", error=TOOL_ERROR)], model=sc.PLANNER_MODEL, usage=counted_usage(1, {}, "")),
    ]


# -- AssistantAgent alone --------------------------------------------------------------------------


def test_single_run_ended_with_the_scripted_answer(single: Run) -> None:
    assert single.output == sc.ANSWER
    book = only(single.spans, lambda s: s.attributes.get("gen_ai.tool.name") == "book_table")
    assert book.record.status_code == "ERROR" and {e.name for e in book.record.events} == {"exception"}
    assert "gen_ai.tool.call.arguments" not in book.attributes  # recovered from the requesting response
    if not single.native:  # OpenInference's TOOL span around it: OK, with the error text as its output
        oi_book = only(single.spans, lambda s: s.attributes.get("tool.name") == "book_table")
        assert (oi_book.record.status_code, oi_book.attributes["output.value"]) == ("OK", sc.TABLE_ERROR)


@fidelity(by_param("single", AUTOGEN), "parallel tools", "failing tool")
def test_single_steps(single: Run) -> None:
    """Arguments from the model's response (tool spans record none), parallel calls in one step,
    the failed tool an error although a result text is known; the agent's input the user's
    message and its final output the model's last text (the ``invoke_agent`` span records neither)."""
    c = single.chats()
    expected = trace(single.agent("planner"), "planner", input=sc.QUESTION, final_output=sc.ANSWER, steps=[
        *planner_steps(single), step(2, c[2], model=sc.PLANNER_MODEL, usage=counted_usage(2, {}, ""), output=sc.ANSWER),
    ])
    assert_traces(single.traces(), [with_tools(expected, single, sc.PLANNER_MODEL)])


@fidelity(by_param("single", AUTOGEN), "parallel tools", "failing tool")
def test_single_create_agent_span_is_no_agent_run(single: Run) -> None:
    """``create_agent planner`` (a root span of its own) yields no AgentTrace."""
    assert any(s.name == "create_agent planner" for s in single.spans)
    assert [t.agent_span_id for t in single.traces()] == [hex_span(single.agent("planner"))]


# -- Swarm with a handoff --------------------------------------------------------------------------


def test_swarm_run_ended_with_the_scripted_answer(swarm: Run) -> None:
    assert swarm.output == sc.FINAL_ANSWER
    agents = [s for s in swarm.spans if s.name.startswith("invoke_agent ")]
    # Natively each agent's turn is a trace of its own; OpenInference's ``Swarm.run_stream`` CHAIN
    # span holds them both.
    assert len({s.context.trace_id for s in agents}) == (2 if swarm.native else 1)


@fidelity(by_param("swarm", AUTOGEN), "handoff (`Swarm`)")
def test_swarm_one_step_per_model_response(swarm: Run) -> None:
    """The runtime's ``autogen publish/process/create`` spans are neither steps nor tool calls."""
    steps = steps_in_order(swarm.traces(), swarm.spans)
    assert [s.span_ids[0] for s in steps] == [hex_span(c) for c in swarm.chats()]
    assert [[c.name for c in s.tool_calls] for s in steps] == [
        ["get_weather", "get_weather"], ["book_table"], ["transfer_to_weather_agent"], ["get_weather"], []]


def expected_swarm(run: Run) -> list[AgentTrace]:
    """Natively two agents, unlinked (two traces), the handoff call without a result: AutoGen passes
    the transfer message on to the next agent's model call, in the other trace, as a user message
    with no call id. With OpenInference one trace: ``weather_agent`` is a child of the planner's
    step that handed off to it, and the handoff's TOOL span records the transfer message."""
    c, weather, handoff = run.chats(), run.tools("get_weather"), run.tools("transfer_to_weather_agent")
    handoff_result = None if run.native else HANDOFF_RESULT
    weather_agent = trace(run.agent("weather_agent"), "weather_agent", input=sc.QUESTION, final_output=sc.FINAL_ANSWER, steps=[
        step(0, c[3], [call(weather[2], "get_weather", {"city": "Oslo"}, sc.WEATHER["Oslo"], call_id="call_oslo")],
             model=sc.WEATHER_MODEL, usage=counted_usage(3, {}, "")),
        step(1, c[4], model=sc.WEATHER_MODEL, usage=counted_usage(4, {}, ""), output=sc.FINAL_ANSWER),
    ], parent_step_index=None if run.native else 2)
    weather_agent = with_tools(weather_agent, run, sc.WEATHER_MODEL)
    planner = with_tools(trace(run.agent("planner"), "planner", input=sc.QUESTION, final_output=None, steps=[
        *planner_steps(run),
        step(2, c[2], [call(handoff[0], "transfer_to_weather_agent", {}, handoff_result, call_id="call_handoff")],
             model=sc.PLANNER_MODEL, usage=counted_usage(2, {}, "")),
    ], children=[] if run.native else [weather_agent]), run, sc.PLANNER_MODEL)
    return [planner, weather_agent] if run.native else [planner]


@fidelity(by_param("swarm", AUTOGEN), "handoff (`Swarm`)")
def test_swarm_agents(swarm: Run) -> None:
    assert_traces(swarm.traces(), expected_swarm(swarm))


@fidelity(by_param("swarm", AUTOGEN), "handoff (`Swarm`)")
def test_swarm_no_empty_agent(swarm: Run) -> None:
    """Every agent run has its steps: the native ``invoke_agent`` span around OpenInference's AGENT
    span of the same agent is that agent, not another one (``rules.StackedAgents``)."""
    assert all(t.steps for t in all_traces(swarm.traces()))


@fidelity(by_param("swarm", AUTOGEN), "handoff (`Swarm`)")
def test_swarm_handed_off_agent_input_is_the_users_message(swarm: Run) -> None:
    """AutoGen sends the handed-off agent's model the handoff as a *user* message after the user's
    question (``Transferred to weather_agent, adopting the role of weather_agent immediately.``); it is
    AutoGen's, not the user's (``autogen.HandoffRelay``)."""
    traces = all_traces(swarm.traces())
    assert [t.input for t in traces] == [sc.QUESTION, sc.QUESTION]
