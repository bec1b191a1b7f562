"""Acceptance (issue 15): LlamaIndex agents (``FunctionAgent`` in an ``AgentWorkflow`` with a handoff,
and ``ReActAgent``) with OpenInference's ``LlamaIndexInstrumentor``, every model call a real streamed
chat completions request to the scripted local server (``tests/openai_server.py``) running in this
process.

LlamaIndex's OpenAI LLM needs ``openai`` 2.x and the main test venv has 3.x, so the framework runs
in its own venv (``tests/frameworks/venvs.py``, ``tests/frameworks/envs/llamaindex.txt``) as a
subprocess (``tests/frameworks/llamaindex_run.py``) that writes its spans to an OTLP protobuf file,
read back here with ``otel_agent_eval.formats.otlp.read_trace_file``.

OpenInference tree (all CHAIN unless said): ``AgentWorkflow.run`` / ``ReActAgent.run`` (the root:
``input.value`` the workflow's start state, ``output.value`` a truncated Python repr of its
``StopEvent``) -> per model response ``run_agent_step`` -> ``OpenAI._prepare_chat_with_tools`` (LLM,
builds the request: no response) and ``OpenAI.astream_chat`` or, not streamed, ``OpenAI.achat``
(LLM: the response), for ReAct also
``ReActOutputParser.parse``; then per tool call ``call_tool`` -> ``FunctionTool.acall`` (TOOL:
``input.value`` ``{"kwargs": {...}}``, plus an injected ``ctx`` for the handoff tool; ``output.value``
a ``ToolOutput`` as JSON; a tool that raised ends ERROR with an exception event and no output), and
``aggregate_tool_results``. No AGENT span: the agents' names appear only inside Python reprs
(``current_agent_name='planner'``) on CHAIN spans; assembly reads each ``run_agent_step`` as a turn of
the agent its event names, and an agent's turns as its run (``openinference.AgentTurns``). Tool spans carry
no call id (ReAct's ids are made up by LlamaIndex and recorded only in ``call_tool``'s repr).
Streamed responses carry no token usage (LlamaIndex does not ask for it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from otel_agent_eval import AgentStep, AgentTrace, TokenUsage, assemble
from otel_agent_eval.cli.main import main
from tests.frameworks import llamaindex_scenarios as sc
from tests.frameworks.fidelity import LLAMAINDEX_FUNCTION, LLAMAINDEX_REACT, fidelity
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

RUNNER = Path(__file__).resolve().parent / "frameworks" / "llamaindex_run.py"
TOOL_ERROR = f"RuntimeError: {sc.TABLE_ERROR}"
HANDOFF_RESULT = (
    f"Agent weather_agent is now handling the request due to the following reason: {sc.HANDOFF_REASON}.\n"
    "Please continue with the current request."
)

FUNCTION_SCRIPT = {
    sc.PLANNER_MODEL: [
        tool_calls(("call_paris", "get_weather", {"city": "Paris"}), ("call_rome", "get_weather", {"city": "Rome"})),
        tool_calls(("call_book", "book_table", {"restaurant": "Chez Test", "people": 2})),
        tool_calls(("call_handoff", "handoff", {"to_agent": "weather_agent", "reason": sc.HANDOFF_REASON})),
    ],
    sc.WEATHER_MODEL: [tool_calls(("call_oslo", "get_weather", {"city": "Oslo"})), text(sc.FINAL_ANSWER)],
}
REACT_TEXTS = (
    f'Thought: {sc.REACT_THOUGHTS[0]}\nAction: get_weather\nAction Input: {{"city": "Paris"}}',
    f'Thought: {sc.REACT_THOUGHTS[1]}\nAction: book_table\nAction Input: {{"restaurant": "Chez Test", "people": 2}}',
    f"Thought: {sc.REACT_THOUGHTS[2]}\nAnswer: {sc.REACT_ANSWER}",
)
REACT_SCRIPT = {sc.REACT_MODEL: [text(t) for t in REACT_TEXTS]}


@dataclass
class Run:
    output: str
    spans: list[RecordSpan]
    path: Path
    """The OTLP protobuf file the run exported."""
    streamed: bool = True

    def traces(self) -> list[AgentTrace]:
        return assemble([s.record for s in self.spans])

    def responses(self) -> list[RecordSpan]:
        """The LLM spans that hold a model response, in order."""
        return [s for s in self.spans if s.name in ("OpenAI.astream_chat", "OpenAI.achat")]

    def usage(self, n: int) -> tuple[int, int]:
        """The n-th response's usage: none when streamed (LlamaIndex asks for no usage then)."""
        return (0, 0) if self.streamed else counted_usage(n, {}, "")

    def tools(self, name: str) -> list[RecordSpan]:
        return [s for s in self.spans if s.attributes.get("tool.name") == name]


@pytest.fixture(scope="session")
def llamaindex_python() -> Path:
    return framework_python("llamaindex")


def run_scenario(python: Path, scenario: str, script: dict, out: Path) -> Run:
    output, spans, _ = run_in_venv(python, RUNNER, script, out, scenario)
    return Run(output, [RecordSpan(r) for r in spans], out, streamed=scenario != "function_blocking")


@pytest.fixture(scope="module", params=["function", "function_blocking"])
def function(request: pytest.FixtureRequest, llamaindex_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The workflow, its model calls streamed (``astream_chat``) or not (``achat``)."""
    out = tmp_path_factory.mktemp("li") / f"{request.param}.pb"
    return run_scenario(llamaindex_python, request.param, FUNCTION_SCRIPT, out)


@pytest.fixture(scope="module")
def react(llamaindex_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_scenario(llamaindex_python, "react", REACT_SCRIPT, tmp_path_factory.mktemp("li") / "react.pb")


# -- FunctionAgent in an AgentWorkflow -------------------------------------------------------------


def test_function_run_ended_with_the_scripted_answer(function: Run) -> None:
    assert function.output == sc.FINAL_ANSWER
    assert not any(s.attributes.get("openinference.span.kind") == "AGENT" for s in function.spans)
    prepares = [s for s in function.spans if s.name == "OpenAI._prepare_chat_with_tools"]
    assert len(prepares) == len(function.responses()) == 5  # two LLM spans per model call
    handoff = only(function.spans, lambda s: s.attributes.get("tool.name") == "handoff")
    assert "ctx" in json.loads(handoff.attributes["input.value"])["kwargs"]  # injected by LlamaIndex


@fidelity(LLAMAINDEX_FUNCTION, "parallel tools", "failing tool", "handoff")
def test_function_one_step_per_model_response(function: Run) -> None:
    """The ``_prepare_chat_with_tools`` LLM span is no step; the ``call_tool`` and
    ``aggregate_tool_results`` CHAIN spans are no tool calls."""
    steps = steps_in_order(function.traces(), function.spans)
    assert [s.span_ids[0] for s in steps] == [hex_span(r) for r in function.responses()]
    assert [len(s.tool_calls) for s in steps] == [2, 1, 1, 1, 0]


def expected_function_steps(function: Run) -> list[AgentStep]:
    """Parallel calls in one step; arguments unwrapped from ``{"kwargs": ...}`` without the injected
    ``ctx``; results the text the model got back, not the ``ToolOutput`` JSON; the failed tool an
    error (its result the error text LlamaIndex sent back to the model, with the call id)."""
    r, weather, book, handoff = function.responses(), function.tools("get_weather"), function.tools("book_table"), function.tools("handoff")
    return [
        step(0, r[0], [call(weather[0], "get_weather", {"city": "Paris"}, sc.WEATHER["Paris"], call_id="call_paris"),
                       call(weather[1], "get_weather", {"city": "Rome"}, sc.WEATHER["Rome"], call_id="call_rome")],
             model=sc.PLANNER_MODEL, usage=function.usage(0)),
        step(1, r[1], [call(book[0], "book_table", {"restaurant": "Chez Test", "people": 2}, sc.TABLE_ERROR,
                            call_id="call_book", error=TOOL_ERROR)], model=sc.PLANNER_MODEL, usage=function.usage(1)),
        step(2, r[2], [call(handoff[0], "handoff", {"to_agent": "weather_agent", "reason": sc.HANDOFF_REASON},
                            HANDOFF_RESULT, call_id="call_handoff")], model=sc.PLANNER_MODEL, usage=function.usage(2)),
        step(3, r[3], [call(weather[2], "get_weather", {"city": "Oslo"}, sc.WEATHER["Oslo"], call_id="call_oslo")],
             model=sc.WEATHER_MODEL, usage=function.usage(3)),
        step(4, r[4], model=sc.WEATHER_MODEL, usage=function.usage(4), output=sc.FINAL_ANSWER),
    ]


def test_function_steps(function: Run) -> None:
    got = [s.model_copy(update={"index": i}) for i, s in enumerate(steps_in_order(function.traces(), function.spans))]
    expected = expected_function_steps(function)
    assert [s.model_dump(mode="json") for s in got] == [s.model_dump(mode="json") for s in expected]


@fidelity(LLAMAINDEX_FUNCTION, "handoff")
def test_function_input_and_final_output(function: Run) -> None:
    """The user's message and the model's final text, not the ``StopEvent(...)`` repr."""
    traces = all_traces(function.traces())
    assert (traces[0].input, traces[-1].final_output) == (sc.QUESTION, sc.FINAL_ANSWER)


@fidelity(LLAMAINDEX_FUNCTION, "handoff")
def test_function_agents_split_at_the_handoff(function: Run) -> None:
    """No AGENT span: each agent's turns (``run_agent_step``, named by the event's ``current_agent_name``)
    are its run (``openinference.AgentTurns``); the planner is the run of the root span, the agent it
    handed off to its child, linked to the handoff step."""
    root = only(function.spans, lambda s: s.record.parent_span_id is None)
    turns = [s for s in function.spans if s.name == "AgentWorkflow.run_agent_step"]
    steps = expected_function_steps(function)
    for index, s in enumerate(steps[3:]):
        s.index = index
    weather = trace(turns[3], "weather_agent", input=sc.QUESTION, final_output=sc.FINAL_ANSWER, steps=steps[3:],
                    parent_step_index=2, end=turns[4].end_time)
    expected = [trace(root, "planner", input=sc.QUESTION, final_output=None, steps=steps[:3], children=[weather])]
    got = function.traces()
    assert_traces(got, expected)


# -- ReActAgent ------------------------------------------------------------------------------------


def expected_react(run: Run, agent_name: str) -> list[AgentTrace]:
    r, root = run.responses(), only(run.spans, lambda s: s.record.parent_span_id is None)
    weather, book = run.tools("get_weather"), run.tools("book_table")
    return [trace(root, agent_name, input=sc.QUESTION, final_output=sc.REACT_ANSWER, steps=[
        # Tool use written as text: the step's calls are the tool spans run under it, without call ids.
        step(0, r[0], [call(weather[0], "get_weather", {"city": "Paris"}, sc.WEATHER["Paris"], call_id=None)],
             model=sc.REACT_MODEL, usage=run.usage(0), thought=REACT_TEXTS[0]),
        step(1, r[1], [call(book[0], "book_table", {"restaurant": "Chez Test", "people": 2}, None, call_id=None,
                            error=TOOL_ERROR)], model=sc.REACT_MODEL, usage=run.usage(1), thought=REACT_TEXTS[1]),
        # The last response: its thought, and the answer as the output.
        step(2, r[2], model=sc.REACT_MODEL, usage=run.usage(2), thought=sc.REACT_THOUGHTS[2], output=sc.REACT_ANSWER),
    ])]


def test_react_run_ended_with_the_scripted_answer(react: Run) -> None:
    assert react.output == sc.REACT_ANSWER
    assert len(react.responses()) == 3


@fidelity(LLAMAINDEX_REACT, "one tool per step", "failing tool")
def test_react_steps(react: Run) -> None:
    """Everything but the agent's name (see the next test)."""
    (got,) = react.traces()
    assert_traces([got], expected_react(react, got.agent_name))
    assert got.usage == TokenUsage()


@fidelity(LLAMAINDEX_REACT, "agent name")
def test_react_agent_is_named_by_its_name_not_a_method(react: Run) -> None:
    """No AGENT span: the name is in the event repr on each ``run_agent_step`` span (``current_agent_name``),
    not the root span's ``ReActAgent.run``."""
    (got,) = react.traces()
    assert got.agent_name == "reactor"


# -- offline evaluation of the exported file -------------------------------------------------------


def evaluate_command(run: Run, capsys: pytest.CaptureFixture[str]) -> dict:
    """``otel-agent-eval evaluate`` on the file the framework's venv wrote: the same steps, scored."""
    assert main(["evaluate", str(run.path), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["traces_read"], report["traces_without_agent"]) == (1, 0)
    assert [r["trace"] for r in report["agent_runs"]] == [t.model_dump(mode="json") for t in all_traces(run.traces())]
    return report["totals"]


def test_evaluate_command_reads_the_workflow_file(function: Run, capsys: pytest.CaptureFixture[str]) -> None:
    # The planner's failed book_table is read as a failure, never retried; weather_agent had none.
    assert evaluate_command(function, capsys)["tool_failure_recovery"]["pass_rate"] == 0.5


def test_evaluate_command_reads_the_react_file(react: Run, capsys: pytest.CaptureFixture[str]) -> None:
    assert evaluate_command(react, capsys)["tool_failure_recovery"]["pass_rate"] == 0.0
