"""Acceptance (issue 15): CrewAI crews with OpenInference's ``CrewAIInstrumentor`` and
``OpenAIInstrumentor`` (the pair CrewAI's docs instrument), every model call a real chat completions
request to the scripted local server (``tests/openai_server.py``) running in this process.

CrewAI needs ``openai`` 2.x and ``pydantic`` 2.12 (the main test venv has newer ones), so it runs in
its own venv (``tests/frameworks/venvs.py``, ``tests/frameworks/envs/crewai.txt``) as a subprocess
(``tests/frameworks/crewai_run.py``) that writes its spans to an OTLP protobuf file.

OpenInference tree: ``Crew_{id}.kickoff`` (CHAIN, the root: ``output.value`` the ``CrewOutput`` as
JSON) -> per task ``{role}._execute_core`` (AGENT: ``graph.node.id`` the agent's role, ``input.value``
the agent's configuration as JSON, ``output.value`` the ``TaskOutput`` as JSON; the next task's agent
names the previous one in ``graph.node.parent_id``) -> per model response ``ChatCompletion`` (LLM,
from the openai instrumentor; CrewAI 1.x calls the openai client itself, no LiteLLM or wrapper LLM
span) and per tool call ``{tool}.run`` (TOOL: ``input.value`` the requested arguments; no call id; a
tool that raised ends ERROR with an exception event and no output, and CrewAI sends the model
``Error executing tool: ...``).

The instrumentor's event-listener mode (``use_event_listener=True``, for crews run through CrewAI's
event bus; alone, without the openai instrumentor, whose spans would not join the crew's trace
there) differs: the AGENT span is ``{role}.{task}.execute`` (``input.value`` the task as the model
gets it), the LLM spans ``{model}.llm_call`` record a response that calls tools only as the raw
tool-call list in ``output.value``, and the calls they echo name the tool by its Python repr
(``'get_weather'``); a failed tool ends ERROR without an exception event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from otel_agent_eval import AgentTrace, assemble
from otel_agent_eval.cli.main import main
from tests.frameworks import crewai_scenarios as sc
from tests.frameworks.fidelity import CREWAI, by_param, fidelity
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

RUNNER = Path(__file__).resolve().parent / "frameworks" / "crewai_run.py"
TOOL_RESULT = f"Error executing tool: {sc.TABLE_ERROR}"  # what CrewAI sends the model back

SINGLE_SCRIPT = {
    sc.PLANNER_MODEL: [
        tool_calls(("call_paris", "get_weather", {"city": "Paris"}), ("call_rome", "get_weather", {"city": "Rome"})),
        tool_calls(("call_book", "book_table", {"restaurant": "Chez Test", "people": 2})),
        text(sc.ANSWER),
    ],
}
DELEGATE_ARGS = {"task": sc.RESEARCH_TASK, "context": "A trip to Oslo.", "coworker": "Weather researcher"}
DELEGATE_SCRIPT = {
    sc.PLANNER_MODEL: [tool_calls(("call_ask", "delegate_work_to_coworker", DELEGATE_ARGS)), text(sc.WRITE_ANSWER)],
    sc.WEATHER_MODEL: [tool_calls(("call_oslo", "get_weather", {"city": "Oslo"})), text(sc.RESEARCH_ANSWER)],
}
CREW_SCRIPT = {
    sc.WEATHER_MODEL: [tool_calls(("call_oslo", "get_weather", {"city": "Oslo"})), text(sc.RESEARCH_ANSWER)],
    sc.WRITER_MODEL: [text(sc.WRITE_ANSWER)],
}


def usage_of(n: int) -> tuple[int, int]:
    return counted_usage(n, {}, "")


@dataclass
class Run:
    output: str
    spans: list[RecordSpan]
    path: Path
    prompts: dict[str, str]
    """Per model, the user message of its first request: the task as CrewAI renders it."""
    mode: str

    def input_of(self, role: str, model: str) -> str:
        """The agent's input: the task's user message, or in events mode, its own ``input.value``."""
        return self.prompts[model] if self.mode == "wrappers" else self.agent(role).attributes["input.value"]

    def traces(self) -> list[AgentTrace]:
        return assemble([s.record for s in self.spans])

    def llms(self, model: str) -> list[RecordSpan]:
        return [s for s in self.spans if s.attributes.get("openinference.span.kind") == "LLM"
                and s.attributes.get("llm.model_name") == model]

    def tools(self, name: str) -> list[RecordSpan]:
        return [s for s in self.spans if s.attributes.get("tool.name") == name]

    def agent(self, role: str) -> RecordSpan:
        return only(self.spans, lambda s: s.attributes.get("openinference.span.kind") == "AGENT"
                    and s.attributes.get("graph.node.id") == role)


@pytest.fixture(scope="session")
def crewai_python() -> Path:
    return framework_python("crewai")


def run_scenario(python: Path, scenario: str, script: dict, out: Path, mode: str) -> Run:
    output, spans, requests = run_in_venv(python, RUNNER, script, out, scenario, mode)
    prompts: dict[str, str] = {}
    for request in requests:
        user = [m["content"] for m in request.body["messages"] if m["role"] == "user"]
        prompts.setdefault(request.body["model"], user[0])
    return Run(output, [RecordSpan(r) for r in spans], out, prompts, mode)


MODES = ["wrappers", "events"]


@pytest.fixture(scope="module", params=MODES)
def single(request: pytest.FixtureRequest, crewai_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    out = tmp_path_factory.mktemp("crewai") / f"single-{request.param}.pb"
    return run_scenario(crewai_python, "single", SINGLE_SCRIPT, out, request.param)


@pytest.fixture(scope="module", params=MODES)
def crew(request: pytest.FixtureRequest, crewai_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    out = tmp_path_factory.mktemp("crewai") / f"crew-{request.param}.pb"
    return run_scenario(crewai_python, "crew", CREW_SCRIPT, out, request.param)


# -- one agent: parallel and failing tools ---------------------------------------------------------


def test_single_run_ended_with_the_scripted_answer(single: Run) -> None:
    assert single.output == sc.ANSWER
    (book,) = single.tools("book_table")
    assert book.record.status_code == "ERROR" and "output.value" not in book.attributes
    assert [e.name for e in book.record.events] == (["exception"] if single.mode == "wrappers" else [])


@fidelity(by_param("single", CREWAI), "parallel tools", "failing tool")
def test_single_steps(single: Run) -> None:
    """One step per model response; parallel calls in one step matched to their call ids; the
    failed tool an error, its result the text CrewAI sent back to the model; the agent named after
    its role, its output the model's final text (not the ``TaskOutput`` JSON)."""
    llms, (book,) = single.llms(sc.PLANNER_MODEL), single.tools("book_table")
    weather = {json.loads(s.attributes["input.value"])["city"]: s for s in single.tools("get_weather")}
    assert_traces(single.traces(), [trace(
        single.agent("Trip planner"), "Trip planner", input=single.input_of("Trip planner", sc.PLANNER_MODEL), final_output=sc.ANSWER,
        steps=[
            step(0, llms[0], [call(weather["Paris"], "get_weather", {"city": "Paris"}, sc.WEATHER["Paris"], call_id="call_paris"),
                              call(weather["Rome"], "get_weather", {"city": "Rome"}, sc.WEATHER["Rome"], call_id="call_rome")],
                 model=sc.PLANNER_MODEL, usage=usage_of(0)),
            step(1, llms[1], [call(book, "book_table", {"restaurant": "Chez Test", "people": 2}, TOOL_RESULT,
                                   call_id="call_book", error=sc.TABLE_ERROR)], model=sc.PLANNER_MODEL, usage=usage_of(1)),
            step(2, llms[2], model=sc.PLANNER_MODEL, usage=usage_of(2), output=sc.ANSWER),
        ])])


@fidelity(by_param("single", CREWAI), "parallel tools", "failing tool")
def test_single_agent_input_is_the_task(single: Run) -> None:
    """The input is the task (its description, then the expected output): in the default mode, where
    the AGENT span's ``input.value`` is the agent's configuration as JSON, the user message CrewAI
    wrote for the task, never that JSON."""
    (got,) = single.traces()
    assert got.input.startswith(f"\nCurrent Task: {sc.QUESTION}\n" if single.mode == "wrappers" else f"{sc.QUESTION}\n")


# -- a crew of two agents --------------------------------------------------------------------------


def expected_crew(run: Run) -> list[AgentTrace]:
    weather, writer = run.llms(sc.WEATHER_MODEL), run.llms(sc.WRITER_MODEL)
    (oslo,) = run.tools("get_weather")
    return [
        trace(run.agent("Weather researcher"), "Weather researcher", input=run.input_of("Weather researcher", sc.WEATHER_MODEL),
              final_output=sc.RESEARCH_ANSWER, steps=[
            step(0, weather[0], [call(oslo, "get_weather", {"city": "Oslo"}, sc.WEATHER["Oslo"], call_id="call_oslo")],
                 model=sc.WEATHER_MODEL, usage=usage_of(0)),
            step(1, weather[1], model=sc.WEATHER_MODEL, usage=usage_of(1), output=sc.RESEARCH_ANSWER),
        ]),
        trace(run.agent("Trip writer"), "Trip writer", input=run.input_of("Trip writer", sc.WRITER_MODEL), final_output=sc.WRITE_ANSWER,
              steps=[step(0, writer[0], model=sc.WRITER_MODEL, usage=usage_of(2), output=sc.WRITE_ANSWER)]),
    ]


def test_crew_run_ended_with_the_scripted_answer(crew: Run) -> None:
    assert crew.output == sc.WRITE_ANSWER
    assert crew.agent("Trip writer").attributes["graph.node.parent_id"] == "Weather researcher"


@fidelity(by_param("crew", CREWAI), "crew of two agents (sequential)")
def test_crew_one_step_per_model_response(crew: Run) -> None:
    steps = steps_in_order(crew.traces(), crew.spans)
    llms = crew.llms(sc.WEATHER_MODEL) + crew.llms(sc.WRITER_MODEL)
    assert [s.span_ids[0] for s in steps] == [hex_span(s) for s in llms]


@fidelity(by_param("crew", CREWAI), "crew of two agents (sequential)")
def test_crew_agents_are_peers(crew: Run) -> None:
    """A sequential crew runs its agents one after the other: two agents, neither a sub-agent of the
    other (``graph.node.parent_id`` names the previous task's agent, not who handed over), each with
    its task (the writer's with the researcher's answer as context) and its own final text."""
    assert_traces(crew.traces(), expected_crew(crew))
    assert sc.RESEARCH_ANSWER in crew.traces()[1].input


# -- delegation to a coworker ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def delegate(crewai_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    out = tmp_path_factory.mktemp("crewai") / "delegate.pb"
    return run_scenario(crewai_python, "delegate", DELEGATE_SCRIPT, out, "wrappers")


def test_delegate_run_ended_with_the_scripted_answer(delegate: Run) -> None:
    assert delegate.output == sc.WRITE_ANSWER
    (_tool,) = delegate.tools("Delegate work to coworker")  # the model calls it delegate_work_to_coworker
    assert [s.name for s in delegate.spans if s.attributes.get("openinference.span.kind") == "AGENT"] == [
        "Trip planner._execute_core"]  # the coworker runs inside the tool span, with no AGENT span


@fidelity(CREWAI["wrappers"], "delegation to a coworker")
def test_delegate_call_is_the_requested_one(delegate: Run) -> None:
    """The delegation tool span (``tool.name`` ``Delegate work to coworker``) is the model's
    ``delegate_work_to_coworker`` call, not a second, unrequested call: its model-facing name is
    the first line of CrewAI's ``tool.description``."""
    (planner,) = delegate.traces()
    first = planner.steps[0]
    assert [(c.name, c.arguments, c.call_id, c.requested, c.result) for c in first.tool_calls] == [
        ("delegate_work_to_coworker", DELEGATE_ARGS, "call_ask", True, sc.RESEARCH_ANSWER)]
    assert first.issues == []


@fidelity(CREWAI["wrappers"], "delegation to a coworker")
def test_delegate_coworker_is_a_child_agent(delegate: Run) -> None:
    """No AGENT span for the coworker: the delegation tool (``coworker`` its argument) with model calls
    under it ran the agent it names (``rules.TransferTools``): its own AgentTrace, keyed by the tool
    span, linked to the planner's step that delegated, with its own tool call."""
    planner_llms, weather_llms = delegate.llms(sc.PLANNER_MODEL), delegate.llms(sc.WEATHER_MODEL)
    (ask,), (oslo,) = delegate.tools("Delegate work to coworker"), delegate.tools("get_weather")
    coworker = trace(ask, "Weather researcher", input=delegate.prompts[sc.WEATHER_MODEL], final_output=sc.RESEARCH_ANSWER,
                     parent_step_index=0, steps=[
        step(0, weather_llms[0], [call(oslo, "get_weather", {"city": "Oslo"}, sc.WEATHER["Oslo"], call_id="call_oslo")],
             model=sc.WEATHER_MODEL, usage=usage_of(1)),
        step(1, weather_llms[1], model=sc.WEATHER_MODEL, usage=usage_of(2), output=sc.RESEARCH_ANSWER),
    ])
    planner = trace(delegate.agent("Trip planner"), "Trip planner", input=delegate.input_of("Trip planner", sc.PLANNER_MODEL),
                    final_output=sc.WRITE_ANSWER, children=[coworker], steps=[
        step(0, planner_llms[0], [call(ask, "delegate_work_to_coworker", DELEGATE_ARGS, sc.RESEARCH_ANSWER, call_id="call_ask")],
             model=sc.PLANNER_MODEL, usage=usage_of(0)),
        step(1, planner_llms[1], model=sc.PLANNER_MODEL, usage=usage_of(3), output=sc.WRITE_ANSWER),
    ])
    assert_traces(delegate.traces(), [planner])


# -- offline evaluation of the exported file -------------------------------------------------------


def evaluate_command(run: Run, capsys: pytest.CaptureFixture[str]) -> dict:
    """``otel-agent-eval evaluate`` on the file the framework's venv wrote: the same steps, scored."""
    assert main(["evaluate", str(run.path), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["traces_read"], report["traces_without_agent"]) == (1, 0)
    assert [r["trace"] for r in report["agent_runs"]] == [t.model_dump(mode="json") for t in all_traces(run.traces())]
    return report["totals"]


def test_evaluate_command_reads_the_single_file(single: Run, capsys: pytest.CaptureFixture[str]) -> None:
    # The failed book_table is read as a failure, never retried.
    assert evaluate_command(single, capsys)["tool_failure_recovery"]["pass_rate"] == 0.0


def test_evaluate_command_reads_the_crew_file(crew: Run, capsys: pytest.CaptureFixture[str]) -> None:
    evaluate_command(crew, capsys)
