"""Acceptance: Google ADK 2.x (``google-adk``), traced by its own telemetry (scope
``gcp.vertex.agent``), its model the ``LiteLlm`` wrapper (LiteLLM's OpenAI provider) answered by the
scripted local server. ADK pins OpenTelemetry below the main test venv's, so it runs in a venv of its
own (``tests/frameworks/venvs.py``, ``envs/adk.txt``) as one subprocess (``frameworks/adk_run.py``)
that runs every (schema, scenario) below and writes each run's spans and log records as OTLP
protobuf; they are decoded, joined and assembled here.

Schemas (``MODES``):

- ``semconv_span`` / ``semconv_event``: ADK 2's default, GenAI semconv: ``invoke_workflow {root}``
  -> ``invoke_agent {name}`` -> ``generate_content {model}`` and ``execute_tool {tool}`` siblings
  (the tool spans are not under the model call that requested them). Content goes where
  ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` says: ``SPAN_ONLY`` on the spans
  (``gen_ai.input/output.messages``, ``gen_ai.tool.call.arguments/result``), ``EVENT_ONLY`` only in
  ``gen_ai.client.inference.operation.details`` log records of the model calls (tool spans then
  carry no arguments or results: assembly takes both from the model's request and the next call's
  history). Without it (the default) nothing is captured (``semconv_no_content``, ``tools`` only).
- ``legacy``: ``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1``, the ``gcp.vertex.agent.*`` schema:
  ``invocation`` -> ``invoke_agent`` -> ``call_llm`` (Gemini-shaped ``llm_request``/``llm_response``)
  wrapping a semconv ``generate_content`` span, and ``execute_tool`` with ``tool_call_args`` /
  ``tool_response``: two spans per model call, one step.

Scenario ``streamed`` is ``tools`` with ``StreamingMode.SSE``: semconv then records each streamed
chunk as an output message (finish reason ``""``) before the whole response.

In every schema: tool spans carry the model's call id (``gen_ai.tool.call.id``); a parallel batch is
followed by an ``execute_tool (merged)`` span with a synthetic id (not a tool call); a tool whose
result dict has an ``error`` key ends ERROR with only ``TOOL_ERROR`` as description; a tool that
raises ends ERROR with an exception event and ``<not specified>`` as call id; a transfer target's
``invoke_agent`` is a sibling of the agent that transferred (assembly links it by the
``transfer_to_agent`` call: ``rules.TransferTools``), and its model gets the other agent's turns as
``For context:`` user messages.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from otel_agent_eval import AgentTrace, ToolExpectation, assemble
from otel_agent_eval.config import Settings
from otel_agent_eval.evaluators import build_evaluators
from otel_agent_eval.formats.otlp import decode_logs_protobuf, decode_traces_protobuf
from otel_agent_eval.pipeline.completion import join_log_records
from otel_agent_eval.records import LogRecordData, SpanRecord
from tests.frameworks.fidelity import ADK, by_param, fidelity
from tests.frameworks.harness import (
    RecordSpan,
    all_traces,
    assert_traces,
    call,
    differences,
    dump,
    flat,
    shape,
    step,
    trace,
)
from tests.frameworks.venvs import framework_python
from tests.offline_reference import evaluate_records, read_files
from tests.openai_server import FakeOpenAI, RecordedRequest, scripted, text, tool_calls

RUNNER = Path(__file__).parent / "frameworks" / "adk_run.py"

SPAN, EVENT, LEGACY, OFF = "semconv_span", "semconv_event", "legacy", "semconv_no_content"
MODES = {
    SPAN: {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"},
    EVENT: {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY"},
    LEGACY: {"ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN": "1"},
}
NO_CONTENT = {}
"""ADK 2's default: no content captured (run for the ``tools`` scenario only)."""

# The questions and models are adk_run.py's.
QUESTION = "What's the weather in Paris and in Rome, the time in Rome, and can you get me a table at Chez Test for 2?"
BOOK_QUESTION = "Can you get me a table at Chez Test for 2?"
OSLO_QUESTION = "What's the weather in Oslo?"
UMBRELLA_QUESTION = "Should I pack an umbrella for Oslo?"
THOUGHT = "Checking Paris first."
FINAL = "Paris is sunny (21C), Rome sunny (25C) and it is 19:30 there; Chez Test is fully booked."
BOOKED = "Chez Test is fully booked"
OSLO = "Oslo is rainy, 8C."
UMBRELLA = "Yes, pack an umbrella: Oslo is rainy."
BOOK_ARGS = {"restaurant": "Chez Test", "people": 2}

SCRIPTS: dict[str, dict[str, list[Any]]] = {
    # single tool, then two at once, then a tool that fails (its error callback answers for it)
    "tools": {"m-concierge": [
        tool_calls(("call_w1", "get_weather", {"city": "Paris"}), content=THOUGHT),
        tool_calls(("call_w2", "get_weather", {"city": "Rome"}), ("call_t", "local_time", {"city": "Rome"})),
        tool_calls(("call_b", "book_table", BOOK_ARGS)),
        text(FINAL),
    ]},
    # the same, streamed (StreamingMode.SSE): ADK records every chunk as an output message
    "streamed": {"m-concierge": [
        tool_calls(("call_w1", "get_weather", {"city": "Paris"}), content=THOUGHT),
        tool_calls(("call_w2", "get_weather", {"city": "Rome"}), ("call_t", "local_time", {"city": "Rome"})),
        tool_calls(("call_b", "book_table", BOOK_ARGS)),
        text(FINAL),
    ]},
    # the tool raises and nothing catches it: the run ends with the exception
    "raises": {"m-concierge": [tool_calls(("call_b", "book_table", BOOK_ARGS))]},
    # multi-agent: a transfer to a sub-agent, and an agent called as a tool
    "transfer": {
        "m-coordinator": [tool_calls(("call_x", "transfer_to_agent", {"agent_name": "weather_agent"}))],
        "m-weather": [tool_calls(("call_w", "get_weather", {"city": "Oslo"})), text(OSLO)],
    },
    "agent_tool": {
        "m-planner": [tool_calls(("call_a", "weather_agent", {"request": "weather in Oslo"})), text(UMBRELLA)],
        "m-weather": [tool_calls(("call_w", "get_weather", {"city": "Oslo"})), text(OSLO)],
    },
}
SCENARIOS = tuple(SCRIPTS)
FIDELITY_SCENARIOS = {"tools": "single, parallel and failing tools", "streamed": "the same, streamed (`StreamingMode.SSE`)",
                      "raises": "a tool that raises (the run ends)", "transfer": "transfer (`transfer_to_agent`)",
                      "agent_tool": "agent as tool (`AgentTool`)"}
"""docs/fidelity.md's name of each scenario."""


def _function(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "description": description, "parameters": parameters, "type": "function"}


def _params(title: str, **fields: str) -> dict[str, Any]:
    """The JSON schema ADK derives from a function's signature."""
    return {"properties": {k: {"title": k.replace("_", " ").title(), "type": t} for k, t in fields.items()},
            "required": list(fields), "title": f"{title}Params", "type": "object"}


GET_WEATHER = _function("get_weather", "Current weather in a city.", _params("get_weather", city="string"))
LOCAL_TIME = _function("local_time", "Local time in a city.", _params("local_time", city="string"))
BOOK_TABLE = _function("book_table", "Book a restaurant table.",
                       _params("book_table", restaurant="string", people="integer"))
WEATHER_AGENT_TOOL = _function("weather_agent", "Answers weather questions.", {
    "type": "object", "properties": {"request": {"type": "string"}}, "required": ["request"]})


def transfer_tool(run: Run, target: str) -> dict[str, Any]:
    """ADK's ``transfer_to_agent``, its description as the tool span records it."""
    description = run.tool("call_x").attributes["gen_ai.tool.description"]
    parameters = _params("transfer_to_agent", agent_name="string")
    parameters["properties"]["agent_name"]["enum"] = [target]
    return _function("transfer_to_agent", description, parameters)


@dataclass
class Run:
    mode: str
    scenario: str
    output: str
    spans: list[SpanRecord]
    logs: list[LogRecordData]
    requests: list[RecordedRequest]
    spans_file: Path

    def traces(self) -> list[AgentTrace]:
        return assemble(join_log_records(self.spans, self.logs))

    def named(self, name: str) -> list[SpanRecord]:
        return sorted((s for s in self.spans if s.name == name), key=lambda s: s.start_time_unix_nano)

    def one(self, name: str) -> SpanRecord:
        found = self.named(name)
        assert len(found) == 1, [s.name for s in self.spans]
        return found[0]

    def model_calls(self, agent: SpanRecord) -> list[SpanRecord]:
        """The span of each model call of an agent: ``call_llm`` (legacy) else ``generate_content``."""
        name = "call_llm" if self.mode == LEGACY else "generate_content "
        return sorted((s for s in self.spans if s.parent_span_id == agent.span_id and s.name.startswith(name)),
                      key=lambda s: s.start_time_unix_nano)

    def tool(self, call_id: str) -> SpanRecord:
        found = [s for s in self.spans if s.attributes.get("gen_ai.tool.call.id") == call_id]
        assert len(found) == 1, call_id
        return found[0]


def _subprocess_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "ADK_", "LITELLM_", "GOOGLE_"))}
    env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost", LITELLM_LOCAL_MODEL_COST_MAP="True")
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Run]:
    python = framework_python("adk")
    out = tmp_path_factory.mktemp("adk")
    keys = [(mode, scenario) for mode in MODES for scenario in SCENARIOS] + [(OFF, "tools")]
    with contextlib.ExitStack() as stack:
        servers: dict[tuple[str, str], FakeOpenAI] = {key: stack.enter_context(scripted(SCRIPTS[key[1]])) for key in keys}
        plan = [{"scenario": scenario, "base_url": servers[mode, scenario].base_url, "env": MODES.get(mode, NO_CONTENT),
                 "out": str(out / f"{mode}-{scenario}")} for mode, scenario in keys]
        (out / "plan.json").write_text(json.dumps(plan))
        done = subprocess.run([str(python), str(RUNNER), str(out / "plan.json")], env=_subprocess_env({}),
                              capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-6000:]
        outputs = json.loads(done.stdout.strip().splitlines()[-1])["outputs"]
        for key, server in servers.items():
            assert server.errors == [], (key, server.errors)
        return {
            key: Run(key[0], key[1], output,
                     decode_traces_protobuf((out / f"{key[0]}-{key[1]}.spans").read_bytes()),
                     decode_logs_protobuf((out / f"{key[0]}-{key[1]}.logs").read_bytes()),
                     list(servers[key].requests), out / f"{key[0]}-{key[1]}.spans")
            for key, output in zip(keys, outputs)
        }


# --- expected AgentTraces --------------------------------------------------------------------------


def _agent_trace(run: Run, agent: SpanRecord, name: str, tools: list[dict[str, Any]], **kwargs: Any) -> AgentTrace:
    built = trace(RecordSpan(agent), name, conversation_id=agent.attributes.get("gen_ai.conversation.id"), **kwargs)
    return built.model_copy(update={"tool_definitions": tools})


def _call(run: Run, call_id: str, name: str, arguments: Any, result: Any, error: str | None = None) -> Any:
    return call(RecordSpan(run.tool(call_id)), name, arguments, result, call_id=call_id, error=error)


def expected_tools(run: Run) -> list[AgentTrace]:
    agent = run.one("invoke_agent concierge")
    llm = [RecordSpan(s) for s in run.model_calls(agent)]
    model = "openai/m-concierge"
    return [_agent_trace(run, agent, "concierge", [GET_WEATHER, LOCAL_TIME, BOOK_TABLE], input=QUESTION, final_output=FINAL, steps=[
        step(0, llm[0], [_call(run, "call_w1", "get_weather", {"city": "Paris"}, {"result": "sunny, 21C"})],
             model=model, usage=(100, 10), thought=THOUGHT),
        # Two calls at once; the merged-tools span after them is no call.
        step(1, llm[1], [
            _call(run, "call_w2", "get_weather", {"city": "Rome"}, {"result": "sunny, 25C"}),
            _call(run, "call_t", "local_time", {"city": "Rome"}, {"city": "Rome", "time": "19:30"}),
        ], model=model, usage=(101, 11)),
        # ERROR span (ADK's FunctionTool: a result with an ``error`` key) with the result the model got.
        step(2, llm[2], [_call(run, "call_b", "book_table", BOOK_ARGS, {"error": BOOKED}, error="TOOL_ERROR")],
             model=model, usage=(102, 12)),
        step(3, llm[3], model=model, usage=(103, 13), output=FINAL),
    ])]


def expected_raises(run: Run) -> list[AgentTrace]:
    agent = run.one("invoke_agent concierge")
    (llm,) = run.model_calls(agent)
    tool = run.one("execute_tool book_table")
    error = f"RuntimeError: {BOOKED}"
    # The tool span's call id is ``<not specified>``: the call keeps the id the model gave it.
    raised = call(RecordSpan(tool), "book_table", BOOK_ARGS, None, call_id="call_b", error=error)
    expected = _agent_trace(run, agent, "concierge", [BOOK_TABLE], input=BOOK_QUESTION, final_output=None, steps=[
        step(0, RecordSpan(llm), [raised], model="openai/m-concierge", usage=(100, 10)),
    ])
    return [expected.model_copy(update={"status": "error", "error": error})]


def _weather_trace(run: Run, agent: SpanRecord, tools: list[dict[str, Any]], input: str, usage: int,
                   parent_step: int | None) -> AgentTrace:
    llm = [RecordSpan(s) for s in run.model_calls(agent)]
    model = "openai/m-weather"
    return _agent_trace(run, agent, "weather_agent", tools, input=input, final_output=OSLO, parent_step_index=parent_step,
                        steps=[
        step(0, llm[0], [_call(run, "call_w", "get_weather", {"city": "Oslo"}, {"result": "rainy, 8C"})],
             model=model, usage=(usage, usage - 90)),
        step(1, llm[1], model=model, usage=(usage + 1, usage - 89), output=OSLO),
    ])


def expected_transfer(run: Run) -> list[AgentTrace]:
    coordinator, weather = run.one("invoke_agent coordinator"), run.one("invoke_agent weather_agent")
    (llm,) = run.model_calls(coordinator)
    # Event-only content: the transfer's result ({"result": null}) is on no span and in no later history.
    result = None if run.mode == EVENT else {"result": None}
    transfer = _call(run, "call_x", "transfer_to_agent", {"agent_name": "weather_agent"}, result)
    # The transfer target answers the user's question (not ADK's "For context:" relay of the coordinator).
    target = _weather_trace(run, weather, [transfer_tool(run, "coordinator"), GET_WEATHER], OSLO_QUESTION, 101,
                            parent_step=0)
    return [_agent_trace(run, coordinator, "coordinator", [transfer_tool(run, "weather_agent")], input=OSLO_QUESTION, final_output=None, steps=[
        step(0, RecordSpan(llm), [transfer], model="openai/m-coordinator", usage=(100, 10)),
    ], children=[target])]


def expected_agent_tool(run: Run) -> list[AgentTrace]:
    planner, weather = run.one("invoke_agent planner"), run.one("invoke_agent weather_agent")
    llm = [RecordSpan(s) for s in run.model_calls(planner)]
    model = "openai/m-planner"
    # Agent as tool: the nested agent's task is the request the planner's model wrote.
    nested = _weather_trace(run, weather, [GET_WEATHER], "weather in Oslo", 101, parent_step=0)
    return [_agent_trace(run, planner, "planner", [WEATHER_AGENT_TOOL], input=UMBRELLA_QUESTION, final_output=UMBRELLA, steps=[
        step(0, llm[0], [_call(run, "call_a", "weather_agent", {"request": "weather in Oslo"}, {"result": OSLO})],
             model=model, usage=(100, 10)),
        step(1, llm[1], model=model, usage=(103, 13), output=UMBRELLA),
    ], children=[nested])]


EXPECTED = {"tools": expected_tools, "streamed": expected_tools, "raises": expected_raises, "transfer": expected_transfer,
            "agent_tool": expected_agent_tool}


# --- the runs themselves ---------------------------------------------------------------------------

OUTPUTS = {"tools": FINAL, "streamed": FINAL, "raises": f"raised: {BOOKED}", "transfer": OSLO, "agent_tool": UMBRELLA}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_scripted_run_ran(runs: dict[tuple[str, str], Run], mode: str, scenario: str) -> None:
    run = runs[mode, scenario]
    assert run.output == OUTPUTS[scenario]
    assert {r.api for r in run.requests} == {"chat"}
    assert {r.body.get("stream", False) for r in run.requests} == {scenario == "streamed"}
    assert {s.scope_name for s in run.spans} == {"gcp.vertex.agent"}


@pytest.mark.parametrize("mode", MODES)
def test_span_tree(runs: dict[tuple[str, str], Run], mode: str) -> None:
    run = runs[mode, "tools"]
    by_id = {s.span_id: s for s in run.spans}
    tree = [(s.name, by_id[s.parent_span_id].name if s.parent_span_id else None)
            for s in sorted(run.spans, key=lambda s: s.start_time_unix_nano)]
    llm, root = ("call_llm", "invocation") if mode == LEGACY else ("generate_content openai/m-concierge", "invoke_workflow concierge")
    inner = [("generate_content openai/m-concierge", "call_llm")] if mode == LEGACY else []
    agent = "invoke_agent concierge"
    assert tree == [
        (root, None), (agent, root),
        (llm, agent), *inner, ("execute_tool get_weather", agent),
        (llm, agent), *inner, ("execute_tool get_weather", agent), ("execute_tool local_time", agent),
        ("execute_tool (merged)", agent),
        (llm, agent), *inner, ("execute_tool book_table", agent),
        (llm, agent), *inner,
    ]


def test_content_is_where_each_mode_puts_it(runs: dict[tuple[str, str], Run]) -> None:
    span, event, legacy = (runs[mode, "tools"] for mode in MODES)
    weather = lambda run: run.tool("call_w1").attributes  # noqa: E731
    assert (weather(span)["gen_ai.tool.call.arguments"], weather(span)["gen_ai.tool.call.result"]) == (
        '{"city": "Paris"}', '{"result": "sunny, 21C"}')
    assert (weather(legacy)["gcp.vertex.agent.tool_call_args"], weather(legacy)["gcp.vertex.agent.tool_response"]) == (
        '{"city": "Paris"}', '{"result": "sunny, 21C"}')
    assert not any(k.startswith(("gen_ai.tool.call.a", "gen_ai.tool.call.r", "gen_ai.input", "gen_ai.output"))
                   for s in event.spans for k in s.attributes)
    for run in (span, event):  # one details record per model call; with content only when EVENT_ONLY
        assert [log.event_name for log in run.logs] == ["gen_ai.client.inference.operation.details"] * 4
    assert all("gen_ai.output.messages" in log.attributes for log in event.logs)
    assert not any("gen_ai.output.messages" in log.attributes for log in span.logs)


# --- assembly --------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scenario", SCENARIOS)
@fidelity(by_param("mode", ADK), by_param("scenario", FIDELITY_SCENARIOS))
def test_assembled_traces(runs: dict[tuple[str, str], Run], mode: str, scenario: str) -> None:
    run = runs[mode, scenario]
    assert_traces(run.traces(), EXPECTED[scenario](run))


@pytest.mark.parametrize("mode", MODES)
@fidelity(by_param("mode", ADK), FIDELITY_SCENARIOS["transfer"])
def test_transfer_agents(runs: dict[tuple[str, str], Run], mode: str) -> None:
    """Each agent of the transfer, as expected, whatever links them."""
    run = runs[mode, "transfer"]
    got, want = flat(run.traces()), flat(expected_transfer(run))
    assert got == want, "\n".join(differences(got, want))


# --- the rules users expect, one test each ---------------------------------------------------------


@fidelity(ADK[LEGACY], FIDELITY_SCENARIOS["tools"])
def test_one_step_per_model_call_however_many_spans_wrap_it(runs: dict[tuple[str, str], Run]) -> None:
    """Legacy: ``call_llm`` wraps a ``generate_content`` span; one step per model call, named by the outer span."""
    run = runs[LEGACY, "tools"]
    (concierge,) = run.traces()
    assert len(run.named("call_llm")) == len(run.named("generate_content openai/m-concierge")) == len(run.requests) == 4
    assert [s.span_ids[0] for s in concierge.steps] == [format(s.span_id, "016x") for s in run.named("call_llm")]


@pytest.mark.parametrize("mode", MODES)
@fidelity(by_param("mode", ADK), FIDELITY_SCENARIOS["tools"])
def test_merged_tools_span_is_not_a_tool_call(runs: dict[tuple[str, str], Run], mode: str) -> None:
    run = runs[mode, "tools"]
    merged = run.one("execute_tool (merged)")
    assert merged.attributes["gen_ai.tool.name"] == "(merged tools)"
    (concierge,) = run.traces()
    calls = [c for s in concierge.steps for c in s.tool_calls]
    assert format(merged.span_id, "016x") not in {c.span_id for c in calls}
    assert [c.name for c in calls] == ["get_weather", "get_weather", "local_time", "book_table"]
    assert all(not s.issues for s in concierge.steps)


@pytest.mark.parametrize("mode", MODES)
@fidelity(by_param("mode", ADK), FIDELITY_SCENARIOS["tools"])
def test_arguments_are_the_ones_the_model_requested(runs: dict[tuple[str, str], Run], mode: str) -> None:
    run = runs[mode, "tools"]
    requested = [(c[0], c[1], c[2]) for b in SCRIPTS["tools"]["m-concierge"] for c in b.calls]
    (concierge,) = run.traces()
    assert [(c.call_id, c.name, c.arguments) for s in concierge.steps for c in s.tool_calls] == requested


@pytest.mark.parametrize("mode", MODES)
@fidelity(by_param("mode", ADK), FIDELITY_SCENARIOS["tools"])
def test_an_error_status_makes_an_error_even_with_a_result(runs: dict[tuple[str, str], Run], mode: str) -> None:
    run = runs[mode, "tools"]
    book = run.tool("call_b")
    assert (book.status_code, book.status_message, book.attributes["error.type"]) == ("ERROR", "TOOL_ERROR", "TOOL_ERROR")
    (concierge,) = run.traces()
    (failed,) = concierge.steps[2].tool_calls
    assert (failed.error, failed.result) == ("TOOL_ERROR", {"error": BOOKED})


@pytest.mark.parametrize("mode", MODES)
@fidelity(by_param("mode", ADK), FIDELITY_SCENARIOS["raises"])
def test_an_exception_event_makes_an_error(runs: dict[tuple[str, str], Run], mode: str) -> None:
    run = runs[mode, "raises"]
    tool = run.one("execute_tool book_table")
    assert "exception" in {e.name for e in tool.events}
    assert tool.attributes["gen_ai.tool.call.id"] == "<not specified>"
    (concierge,) = run.traces()
    (raised,) = concierge.steps[0].tool_calls
    assert (raised.error, raised.result, raised.call_id) == (f"RuntimeError: {BOOKED}", None, "call_b")


@pytest.mark.parametrize("mode", MODES)
@fidelity(by_param("mode", ADK), FIDELITY_SCENARIOS["transfer"])
def test_a_transferred_agent_is_given_the_users_message(runs: dict[tuple[str, str], Run], mode: str) -> None:
    run = runs[mode, "transfer"]
    last = run.requests[-1].body["messages"]
    assert [m["role"] for m in last[:3]] == ["system", "user", "user"]
    # ADK relays the coordinator's turn to the model as a user message
    assert last[2]["content"][0]["text"].startswith("For context:")
    names = {t.agent_name: t for t in all_traces(run.traces())}
    assert (names["weather_agent"].input, names["weather_agent"].final_output) == (OSLO_QUESTION, OSLO)
    assert (names["coordinator"].input, names["coordinator"].final_output) == (OSLO_QUESTION, None)


@pytest.mark.parametrize("mode", MODES)
@fidelity(by_param("mode", ADK), FIDELITY_SCENARIOS["streamed"])
def test_one_step_per_streamed_response_however_many_chunks_it_recorded(
        runs: dict[tuple[str, str], Run], mode: str) -> None:
    run = runs[mode, "streamed"]
    if mode == SPAN:  # one output message per chunk, then the whole response
        first = run.named("generate_content openai/m-concierge")[0]
        recorded = json.loads(first.attributes["gen_ai.output.messages"])
        assert [m["finish_reason"] for m in recorded] == [""] * (len(recorded) - 1) + ["stop"]
        assert len(recorded) > 2
    (concierge,) = run.traces()
    assert [(s.thought, s.output) for s in concierge.steps] == [(THOUGHT, None), (None, None), (None, None), (None, FINAL)]


@fidelity(ADK[OFF], FIDELITY_SCENARIOS["tools"])
def test_without_content_the_steps_keep_their_structure(runs: dict[tuple[str, str], Run]) -> None:
    """ADK 2's default captures no content: steps, calls, ids, errors, usage and tool names stay."""
    run = runs[OFF, "tools"]
    assert not any(k in s.attributes for s in run.spans for k in ("gen_ai.output.messages", "gen_ai.tool.call.arguments"))
    (expected_trace,) = expected_tools(run)
    expected = dump(expected_trace)
    expected.update(input=None, final_output=None, content_captured=False)
    for definition in expected["tool_definitions"]:
        definition["parameters"] = None  # ADK writes the definitions without their parameters
    for s in expected["steps"]:
        s.update(thought=None, output=None)
        for c in s["tool_calls"]:
            c.update(arguments=None, result=None)
    assert_traces(run.traces(), [AgentTrace.model_validate(expected)])


@pytest.mark.parametrize("mode", [SPAN, LEGACY])
@fidelity(by_param("mode", ADK), FIDELITY_SCENARIOS["tools"])
def test_the_exported_file_evaluates_offline(runs: dict[tuple[str, str], Run], mode: str) -> None:
    """What ``otel-agent-eval evaluate FILE`` does with the OTLP file ADK's process exported (spans only)."""
    run = runs[mode, "tools"]
    expectations = [ToolExpectation(agent="concierge", expected_tools=["get_weather", "local_time", "book_table"])]
    report = evaluate_records(read_files([run.spans_file]), build_evaluators(Settings(), expectations))
    ((evaluated, results),) = report.evaluated
    assert_traces([evaluated], expected_tools(run))
    assert {r.evaluator: r.label for r in results} == {
        "tool_call_accuracy": "pass",
        "tool_failure_recovery": "fail",  # book_table failed and was never retried
        "loop_detection": "pass",
        "step_budget": "pass",
    }


@fidelity(ADK[EVENT], FIDELITY_SCENARIOS["tools"])
def test_text_only_in_log_records_still_reaches_the_step(runs: dict[tuple[str, str], Run]) -> None:
    run = runs[EVENT, "tools"]
    assert not any("gen_ai.output.messages" in s.attributes for s in run.spans)
    (concierge,) = run.traces()
    assert (concierge.steps[0].thought, concierge.steps[-1].output, concierge.final_output) == (THOUGHT, FINAL, FINAL)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_schema_gives_the_same_steps(runs: dict[tuple[str, str], Run], scenario: str) -> None:
    """Same run, three schemas: the same steps, but for what event-only content cannot carry (a transfer's result)."""
    shapes = {mode: [shape(t) for t in runs[mode, scenario].traces()] for mode in MODES}
    for traces in shapes.values():  # an agent called as a tool runs in a session of its own, a new id each run
        for t in traces:
            for child in t["children"]:
                child["conversation_id"] = None
    if scenario == "transfer":
        shapes[EVENT][0]["steps"][0]["tool_calls"][0]["result"] = {"result": None}
    for mode in (EVENT, LEGACY):
        assert shapes[mode] == shapes[SPAN], "\n".join(differences(shapes[mode], shapes[SPAN]))
