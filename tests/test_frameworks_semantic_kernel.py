"""Acceptance (issue 15): Semantic Kernel 1.45 ``ChatCompletionAgent`` with Semantic Kernel's native
GenAI OpenTelemetry diagnostics (``SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true``,
the setting its observability guide documents), every model call a real chat completions request to
the scripted local server (``tests/openai_server.py``) running in this process.

``semantic-kernel`` pins ``pydantic`` below the main test venv's, so the framework runs in its own
venv (``tests/frameworks/envs/semantic_kernel.txt``) as a subprocess
(``tests/frameworks/semantic_kernel_run.py``) that writes its spans and its log records to OTLP
protobuf files.

Native tree: ``invoke_agent {name}`` (``gen_ai.agent.name``; ``gen_ai.input.messages`` an empty
``[]``, ``gen_ai.output.messages`` the answer in the plain chat shape) -> ``AutoFunctionInvocationLoop``
(no GenAI attribute) -> ``chat {model}`` (model, usage, finish reason: **no content**) and
``execute_tool {plugin}-{function}`` (``gen_ai.tool.call.id``, ``.arguments`` and ``.result``; a
function that raised ends ERROR with ``error.type``, exception events and no result). The messages
are only in log records, one per message, on the ``semantic_kernel`` Python logger
(``gen_ai.system/user/assistant/tool.message`` with the chat message as a JSON string body, and
``gen_ai.choice`` with ``{"message": ..., "finish_reason": ...}`` as a JSON string body), each with
its ``chat`` span's ids. A plugin function that runs another agent (agent as tool) holds that
agent's ``invoke_agent`` span.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from otel_agent_eval import AgentTrace, assemble
from otel_agent_eval.formats.otlp import decode_logs_protobuf
from otel_agent_eval.pipeline.completion import join_log_records
from tests.frameworks import semantic_kernel_scenarios as sc
from tests.frameworks.fidelity import SEMANTIC_KERNEL, SEMANTIC_KERNEL_SPANS, fidelity
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

RUNNER = Path(__file__).resolve().parent / "frameworks" / "semantic_kernel_run.py"
TOOL_ERROR = f"RuntimeError: {sc.TABLE_ERROR}"
ECHOED_ERROR = f"An error occurred while invoking the function {sc.BOOK_TABLE}: {sc.TABLE_ERROR}"

PLANNER_TURNS = [
    tool_calls(("call_paris", sc.GET_WEATHER, {"city": "Paris"}), ("call_rome", sc.GET_WEATHER, {"city": "Rome"})),
    tool_calls(("call_book", sc.BOOK_TABLE, {"restaurant": "Chez Test", "people": 2})),
]
SINGLE_SCRIPT = {sc.PLANNER_MODEL: [*PLANNER_TURNS, text(sc.ANSWER)]}
AGENT_AS_TOOL_SCRIPT = {
    sc.PLANNER_MODEL: [*PLANNER_TURNS, tool_calls(("call_ask", sc.ASK_WEATHER, {"task": sc.WEATHER_TASK})),
                       text(sc.FINAL_ANSWER)],
    sc.WEATHER_MODEL: [tool_calls(("call_oslo", sc.GET_WEATHER, {"city": "Oslo"})), text(sc.WEATHER_ANSWER)],
}


@dataclass
class Run:
    output: str
    spans: list[RecordSpan]
    """The spans, each joined with its log records (what a backend holding both signals has)."""
    bare: list[RecordSpan]
    """The spans alone."""
    streamed: set[bool]
    """Whether the model requests asked for a stream."""

    def traces(self, spans: list[RecordSpan] | None = None) -> list[AgentTrace]:
        return assemble([s.record for s in (self.spans if spans is None else spans)])

    def chats(self, model: str) -> list[RecordSpan]:
        return [s for s in self.spans if s.attributes.get("gen_ai.operation.name") == "chat"
                and s.attributes.get("gen_ai.request.model") == model]

    def tools(self, name: str) -> list[RecordSpan]:
        return [s for s in self.spans if s.attributes.get("gen_ai.tool.name") == name]

    def agent(self, name: str) -> RecordSpan:
        return only(self.spans, lambda s: s.name == f"invoke_agent {name}")


def agent_trace(run: Run, name: str, **fields: object) -> AgentTrace:
    """``harness.trace`` plus the tools the agent span lists (``gen_ai.tool.definitions``)."""
    span = run.agent(name)
    expected = trace(span, name, **fields)  # type: ignore[arg-type]
    return expected.model_copy(update={"tool_definitions": json.loads(span.attributes["gen_ai.tool.definitions"])})


@pytest.fixture(scope="session")
def sk_python() -> Path:
    return framework_python("semantic_kernel")


def run_scenario(python: Path, scenario: str, script: dict, out: Path) -> Run:
    output, spans, requests = run_in_venv(python, RUNNER, script, out, scenario)
    streamed = {bool(r.body.get("stream")) for r in requests}
    logs = decode_logs_protobuf(Path(f"{out}.logs").read_bytes())
    joined = join_log_records(spans, logs)
    return Run(output, [RecordSpan(r) for r in joined], [RecordSpan(r) for r in spans], streamed)


@pytest.fixture(scope="module", params=["single", "streamed"])
def single(request: pytest.FixtureRequest, sk_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The lone agent, through ``get_response`` or streamed through ``invoke_stream``: the same spans."""
    out = tmp_path_factory.mktemp("sk") / f"{request.param}.pb"
    return run_scenario(sk_python, request.param, SINGLE_SCRIPT, out)


@pytest.fixture(scope="module")
def agent_as_tool(sk_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_scenario(sk_python, "agent_as_tool", AGENT_AS_TOOL_SCRIPT, tmp_path_factory.mktemp("sk") / "tool.pb")


def planner_steps(run: Run) -> list:
    """The planner's two tool turns: parallel calls, then the failing function (an error, although
    the error text Semantic Kernel sent the model is its result)."""
    c, weather, book = run.chats(sc.PLANNER_MODEL), run.tools(sc.GET_WEATHER), run.tools(sc.BOOK_TABLE)
    return [
        step(0, c[0], [call(weather[0], sc.GET_WEATHER, {"city": "Paris"}, sc.WEATHER["Paris"], call_id="call_paris"),
                       call(weather[1], sc.GET_WEATHER, {"city": "Rome"}, sc.WEATHER["Rome"], call_id="call_rome")],
             model=sc.PLANNER_MODEL, usage=counted_usage(0, {}, "")),
        step(1, c[1], [call(book[0], sc.BOOK_TABLE, {"restaurant": "Chez Test", "people": 2}, ECHOED_ERROR,
                            call_id="call_book", error=TOOL_ERROR)], model=sc.PLANNER_MODEL, usage=counted_usage(1, {}, "")),
    ]


def expected_single(run: Run) -> list[AgentTrace]:
    last = run.chats(sc.PLANNER_MODEL)[2]
    return [agent_trace(run, "planner", input=sc.QUESTION, final_output=sc.ANSWER, steps=[
        *planner_steps(run), step(2, last, model=sc.PLANNER_MODEL, usage=counted_usage(2, {}, ""), output=sc.ANSWER),
    ])]


def test_single_run_ended_with_the_scripted_answer(single: Run, request: pytest.FixtureRequest) -> None:
    assert single.output == sc.ANSWER
    assert single.streamed == {"streamed" in request.node.callspec.id}
    chat = single.chats(sc.PLANNER_MODEL)[0]
    assert not any(k.startswith(("gen_ai.input", "gen_ai.output")) for k in chat.record.attributes)
    book = only(single.spans, lambda s: s.attributes.get("gen_ai.tool.name") == sc.BOOK_TABLE)
    assert book.record.status_code == "ERROR" and "gen_ai.tool.call.result" not in book.attributes
    assert json.loads(single.agent("planner").attributes["gen_ai.input.messages"]) == []


@fidelity(SEMANTIC_KERNEL, "parallel tools", "failing function", "text answer")
def test_single_one_step_per_model_response(single: Run) -> None:
    """The ``AutoFunctionInvocationLoop`` span is neither a step nor a tool call."""
    steps = steps_in_order(single.traces(), single.spans)
    assert [s.span_ids[0] for s in steps] == [hex_span(c) for c in single.chats(sc.PLANNER_MODEL)]


@fidelity(SEMANTIC_KERNEL, "parallel tools", "failing function", "text answer")
def test_single_steps_with_log_records(single: Run) -> None:
    """The messages from the log records joined to their ``chat`` spans: the ``gen_ai.choice``
    body (a JSON string) holds the requested calls and the final text."""
    assert_traces(single.traces(), expected_single(single))


@fidelity(SEMANTIC_KERNEL_SPANS, "parallel tools", "failing function", "text answer")
def test_single_steps_from_spans_alone(single: Run) -> None:
    """Without the log records: the same calls (arguments, results and ids from the tool spans); the
    final answer, recorded only on the agent span, is the last step's output too
    (``rules.AnswerOnTheAgent``); the user's message is in no span."""
    (got,) = single.traces(single.bare)
    (want,) = expected_single(single)
    # Without the echo, the failed call's result (the error text the model was sent) is unknown.
    want.steps[1].tool_calls[0].result = None
    want.input = None
    assert want.steps[2].output == sc.ANSWER
    assert_traces([got], [want])


@fidelity(SEMANTIC_KERNEL, "agent as plugin function")
def test_agent_as_tool(agent_as_tool: Run) -> None:
    """The sub-agent's run is a child of the step whose function call ran it; the call's result is
    its answer."""
    run = agent_as_tool
    p, w = run.chats(sc.PLANNER_MODEL), run.chats(sc.WEATHER_MODEL)
    weather, ask = run.tools(sc.GET_WEATHER), run.tools(sc.ASK_WEATHER)
    sub = agent_trace(run, "weather_agent", input=sc.WEATHER_TASK, final_output=sc.WEATHER_ANSWER, steps=[
        step(0, w[0], [call(weather[2], sc.GET_WEATHER, {"city": "Oslo"}, sc.WEATHER["Oslo"], call_id="call_oslo")],
             model=sc.WEATHER_MODEL, usage=counted_usage(3, {}, "")),
        step(1, w[1], model=sc.WEATHER_MODEL, usage=counted_usage(4, {}, ""), output=sc.WEATHER_ANSWER),
    ], parent_step_index=2)
    planner = agent_trace(run, "planner", input=sc.QUESTION, final_output=sc.FINAL_ANSWER, steps=[
        *planner_steps(run),
        step(2, p[2], [call(ask[0], sc.ASK_WEATHER, {"task": sc.WEATHER_TASK}, sc.WEATHER_ANSWER, call_id="call_ask")],
             model=sc.PLANNER_MODEL, usage=counted_usage(2, {}, "")),
        step(3, p[3], model=sc.PLANNER_MODEL, usage=counted_usage(5, {}, ""), output=sc.FINAL_ANSWER),
    ], children=[sub])
    assert_traces(run.traces(), [planner])
    assert [t.agent_name for t in all_traces(run.traces())] == ["planner", "weather_agent"]
