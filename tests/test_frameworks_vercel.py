"""Acceptance: the Vercel AI SDK (``ai`` 5 and 6) in node, ``generateText`` and ``streamText`` with
tools and ``experimental_telemetry`` (inputs and outputs recorded), its model ``@ai-sdk/openai``
pointed at the scripted local server (``tests/frameworks/vercel_scenarios.py``), its spans exported
by the OpenTelemetry JS SDK's OTLP exporter (http/protobuf and http/json) to ``otel-agent-eval
serve``'s receiver: ``EvalServer`` in this process, so a recording sink sees the AgentTraces the
pipeline evaluated, and once ``otel-agent-eval serve`` as a process, whose exported evaluation
spans are read back.

Tree (legacy AI SDK telemetry, scope ``ai``): ``ai.generateText`` / ``ai.streamText`` (the agent
scope: ``ai.telemetry.functionId``, ``ai.prompt``, ``ai.response.text``) -> per step one
``ai.generateText.doGenerate`` / ``ai.streamText.doStream`` (``ai.prompt.messages``,
``ai.response.text``, ``ai.response.toolCalls``, ``ai.usage.*``) and that step's ``ai.toolCall``
spans, all siblings under the call span. ``ai.toolCall.args`` / ``.result`` are
``JSON.stringify``'d (a string result is a JSON string); a tool that throws ends ERROR with an
exception event and no result, and the next model call is sent ``{type: "error-text", value}``.

Expected AgentTraces are built from the spans the SDK recorded (run.cjs writes them to a file),
not from what serve assembled: one step per model call, its tool calls in request order with
the arguments the model requested, results, and the thrown error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from otel_agent_eval import AgentTrace, ToolCall
from otel_agent_eval.config import Settings
from otel_agent_eval.model import EvaluatedTrace
from otel_agent_eval.serve.server import EvalServer, ServeOptions
from tests.frameworks import vercel_scenarios as sc
from tests.frameworks.fidelity import VERCEL, by_param, fidelity
from tests.frameworks.harness import RecordingSink, assert_traces, call, hex_span, step, trace
from tests.openai_server import FakeOpenAI, unexpected
from tests.serve.server_process import Receiver, ServerProcess, wait_for

# (ai major, OTLP protocol, OpenAI API the provider speaks): both protocols and both APIs per major.
TRANSPORTS = [
    ("ai5", "http/protobuf", "chat"),
    ("ai5", "http/json", "responses"),
    ("ai6", "http/protobuf", "chat"),
    ("ai6", "http/json", "responses"),
]
CALLS = ("ai.generateText", "ai.streamText")
# (scenario, function, content recorded): every scenario and function with recordInputs/recordOutputs
# on; with both off, the two functions (what assembly keeps without content).
RUNS = [(s, f, True) for f in sc.FUNCTIONS for s in sc.SCENARIOS if s != "invalid" or f != "agent"] + [
    (s, f, False) for f in sc.FUNCTIONS[:2] for s in sc.SCENARIOS if s != "invalid"]
# The SDK runs no tool for arguments its schema rejects and sends the model an error text, which
# only the next call's ai.prompt.messages records ({type: "error-text"}; streamText also marks the
# call invalid: true in ai.response.toolCalls): assembly reads that error-text as the call's error (core rule 5).
AGENT_RUNS = sum(2 if sc.SCENARIOS[s].expert else 1 for s, _, _ in RUNS)
"""AgentTraces evaluated: one per run, plus its sub-agent's."""


@dataclass
class Run:
    outputs: dict[str, dict[str, Any]]
    """run.cjs's line per run: the final text and step count, or the error."""
    evaluated: list[EvaluatedTrace]
    spans: list[dict[str, Any]]
    """Every span the SDK ended, as run.cjs wrote it."""
    server_errors: list[str]


@pytest.fixture(scope="module", params=TRANSPORTS, ids=lambda t: "-".join(t))
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    major, protocol, api = request.param
    spans_file = tmp_path_factory.mktemp(major) / "spans.jsonl"
    recorder = RecordingSink()
    settings = Settings.load(env={"OTEL_AGENT_EVAL_SETTLE_DELAY_SECONDS": "0.2",
                                  "OTEL_AGENT_EVAL_MAX_EVALUATIONS_PER_SECOND": "0"})
    server = EvalServer(settings, ServeOptions(host="127.0.0.1", http_port=0, grpc_port=None, admin_port=None))
    server.pipeline.sinks.append(recorder)
    server.start()
    try:
        with FakeOpenAI(unexpected()) as model:
            outputs = sc.run_node(major, protocol, api, f"http://127.0.0.1:{server.ports['http']}", model, RUNS, spans_file)
            wait_for(lambda: len(recorder.evaluated) >= AGENT_RUNS, 30, "every run evaluated")
            server_errors = list(model.errors)
    finally:
        server.stop(drain_seconds=2)
    yield Run(outputs, list(recorder.evaluated), sc.read_spans(spans_file), server_errors)


def _span(record: dict[str, Any]) -> SimpleNamespace:
    """A span record as the harness builders read a ReadableSpan (context ids, times, resource)."""
    context = SimpleNamespace(span_id=int(record["spanId"], 16), trace_id=int(record["traceId"], 16))
    return SimpleNamespace(context=context, start_time=int(record["start"]), end_time=int(record["end"]),
                           resource=SimpleNamespace(attributes=record["resource"]))


def expected_trace(scenario: sc.Scenario, name: str, spans: list[dict[str, Any]], content: bool) -> AgentTrace:
    """The AgentTrace of one run, from the scenario's turns and the spans the SDK recorded.

    Without content (recordInputs/recordOutputs off) the steps, tool names, call ids, errors, models
    and usage stay; the task, texts, arguments, results and tool definitions are not recorded."""
    root = next(s for s in spans if s["parentSpanId"] is None and s["attributes"].get("ai.telemetry.metadata.sessionId") == name)
    mine = [s for s in spans if s["traceId"] == root["traceId"]]
    expected = _agent(root, sc.AGENT, scenario.prompt, scenario.turns, name, mine, content)
    if scenario.expert:  # the sub-agent: its call span is the child of the ask_expert tool span
        (index, ask), = [(i, c) for i, t in enumerate(scenario.turns) for c in t.calls if c.name == "ask_expert"]
        tool = next(s for s in mine if s["attributes"].get("ai.toolCall.id") == ask.call_id)
        expert = next(s for s in mine if s["parentSpanId"] == tool["spanId"])
        child = _agent(expert, sc.EXPERT, ask.arguments["question"], scenario.expert, name, mine, content)
        expected.children = [child.model_copy(update={"parent_step_index": index})]
    return expected


def _rejected(requested: sc.Call, next_call: dict[str, Any]) -> ToolCall:
    """A call the SDK refused to execute: requested, not executed; its error (and result) is the
    text the model was sent, as the next model call's input records it."""
    messages = json.loads(next_call["attributes"]["ai.prompt.messages"])
    (sent,) = [part["output"]["value"] for m in messages if m["role"] == "tool" for part in m["content"]
               if part.get("toolCallId") == requested.call_id]
    assert sent.startswith(f"Invalid input for tool {requested.name}"), sent
    return ToolCall(name=requested.name, arguments=requested.arguments, result=sent, error=sent, call_id=requested.call_id,
                    requested=True, executed=False)


def _members(root: dict[str, Any], spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The spans under ``root``, without those of nested agent calls. Tool spans are the call span's
    children, except with streamText over the Responses API, where they are the doStream span's."""
    out, todo = [], [root["spanId"]]
    while todo:
        parent = todo.pop()
        for span in spans:
            if span["parentSpanId"] == parent and span["attributes"].get("ai.operationId") not in CALLS:
                out.append(span)
                todo.append(span["spanId"])
    return out


def _agent(root: dict[str, Any], agent: str, prompt: str, turns: tuple[sc.Turn, ...], name: str,
           spans: list[dict[str, Any]], content: bool) -> AgentTrace:
    """One agent invocation: ``root`` (ai.generateText / ai.streamText) and its child spans."""
    assert root["attributes"]["ai.telemetry.functionId"] == agent
    children = _members(root, spans)
    operation = root["attributes"]["ai.operationId"]  # ai.generateText | ai.streamText
    model_calls = sorted((s for s in children if s["attributes"].get("ai.operationId") in
                          (f"{operation}.doGenerate", f"{operation}.doStream")), key=lambda s: int(s["start"]))
    tools = {s["attributes"]["ai.toolCall.id"]: s for s in children if s["attributes"].get("ai.operationId") == "ai.toolCall"}
    assert len(model_calls) == len(turns), [s["name"] for s in children]
    model = name if agent == sc.AGENT else f"{name}-expert"
    kept = (lambda value: value) if content else (lambda value: None)
    steps = []
    for index, (turn, llm) in enumerate(zip(turns, model_calls)):
        # Calls in request order; their spans in start order, ties by span id (the SDK's times are
        # in milliseconds, so parallel tools often start together). Without content the request
        # order is not recorded: the calls are in span order too.
        executed = [c for c in turn.calls if not c.invalid]
        order = {c.call_id: (int(tools[c.call_id]["start"]), int(tools[c.call_id]["spanId"], 16)) for c in executed}
        ran = sorted((tools[c.call_id] for c in executed), key=lambda s: order[s["attributes"]["ai.toolCall.id"]])
        requested = turn.calls if content else sorted(turn.calls, key=lambda c: order[c.call_id])
        calls = [_rejected(c, model_calls[index + 1]) if c.invalid else
                 call(_span(tools[c.call_id]), c.name, kept(c.arguments), kept(c.result), call_id=c.call_id, error=c.error)
                 for c in requested]
        built = step(index, _span(llm), [c for c in calls if c.executed], model=model, usage=turn.usage,
                     thought=kept(turn.content if turn.calls else None), output=kept(None if turn.calls else turn.content))
        built.tool_calls = calls
        built.span_ids = [hex_span(_span(llm)), *(s["spanId"] for s in ran)]
        steps.append(built)
    # The trace ends with its last span: a child may end after the call span (JS start times are
    # rounded to the millisecond, ends are start + a precise duration).
    expected = trace(_span(root), agent, input=kept(prompt), final_output=kept(turns[-1].content), steps=steps,
                     conversation_id=name, end=max(int(s["end"]) for s in [root, *children]))
    if not content:
        expected.content_captured = False
        assert "ai.prompt.tools" not in model_calls[0]["attributes"]
        return expected
    # The tools offered, as the model calls record them (ai.prompt.tools: one JSON string per tool).
    expected.tool_definitions = [json.loads(t) for t in model_calls[0]["attributes"]["ai.prompt.tools"]]
    offered = sc.TOOLS if agent == sc.AGENT else sc.TOOLS[:1]
    assert [(t["name"], sorted(t["inputSchema"]["properties"])) for t in expected.tool_definitions] == offered
    return expected


@pytest.mark.parametrize(("scenario", "function", "content"), [
    pytest.param(*r, id=sc.run_name(*r)) for r in RUNS])
@fidelity(by_param("content", VERCEL), lambda params: sc.SCENARIOS[params["scenario"]].title)
def test_steps_assembled_by_serve(run: Run, scenario: str, function: str, content: bool) -> None:
    name = sc.run_name(scenario, function, content)
    expected = sc.SCENARIOS[scenario]
    assert run.server_errors == []
    output = run.outputs[name]
    assert "error" not in output, output["error"]
    assert (output["text"], output["steps"]) == (expected.final_output, len(expected.turns))

    evaluated = [e for e in run.evaluated if e.trace.conversation_id == name]
    # each agent invocation is evaluated once, the sub-agent on its own too (and as a child)
    assert sorted(e.trace.agent_name for e in evaluated) == [sc.AGENT, *([sc.EXPERT] if expected.expert else [])]
    root = next(e.trace for e in evaluated if e.trace.agent_name == sc.AGENT)
    assert_traces([root], [expected_trace(expected, name, run.spans, content)])

    for e in evaluated:
        labels = {r.evaluator: r.label for r in e.results}
        assert labels["loop_detection"] == "pass"
        # the thrown error reaches the evaluators: no later call succeeded, so it is unrecovered
        assert labels["tool_failure_recovery"] == ("fail" if scenario in ("failing", "invalid") else "pass")


def test_serve_process_exports_the_evaluations_of_each_run(tmp_path: Path) -> None:
    """``otel-agent-eval serve`` as users run it (a process): each agent run, sub-agents included, gets
    one evaluation span, on the run's call span, with the failed tool seen as unrecovered."""
    runs = [(s, "streamText", True) for s in sc.SCENARIOS]
    receiver = Receiver()
    # this checkout's package, whichever one the environment installed (the process runs in tmp_path)
    server = ServerProcess(tmp_path, receiver=receiver, env={"PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    try:
        with FakeOpenAI(unexpected()) as model:
            outputs = sc.run_node("ai6", "http/protobuf", "chat", server.http_endpoint, model, runs, tmp_path / "spans.jsonl")
            assert model.errors == [] and all("error" not in o for o in outputs.values()), outputs
        agents = {s["spanId"]: s for s in sc.read_spans(tmp_path / "spans.jsonl") if s["attributes"].get("ai.operationId") in CALLS}
        evaluations = wait_for(lambda: len(receiver.evaluation_spans()) >= len(agents) and receiver.evaluation_spans(),
                               30, "evaluation spans")
        metrics = server.metrics()
        assert metrics.sum("agent_eval_server_requests_total", transport="http", signal="traces", outcome="ok") >= 1
        assert metrics.sum("agent_eval_server_requests_total", transport="http", signal="traces") == metrics.sum(
            "agent_eval_server_requests_total", transport="http", signal="traces", outcome="ok"), "every export accepted"
        assert metrics.sum("agent_eval_server_spans_rejected_total") == 0
        server.stop()
    finally:
        server.kill()
        receiver.close()
    by_span = {e["attributes"]["agent_eval.evaluated_span_id"]: e for e in evaluations}
    assert sorted(by_span) == sorted(agents), "one evaluation per agent run, on its call span"
    for span_id, evaluation in by_span.items():
        agent = agents[span_id]["attributes"]
        assert evaluation["trace_id"] == agents[span_id]["traceId"]
        assert evaluation["attributes"]["agent_eval.agent.name"] == agent["ai.telemetry.functionId"]
        # a thrown tool and a refused call (invalid input) are both unrecovered failures
        failed = agent["ai.telemetry.metadata.sessionId"].startswith(("failing", "invalid")) and agent["ai.telemetry.functionId"] == sc.AGENT
        assert evaluation["attributes"]["agent_eval.tool_failure_recovery.label"] == ("fail" if failed else "pass")


def test_without_node_the_tests_skip_except_under_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A user without node gets a skip that says why; CI (``CI=true``) must run these tests, so it fails."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="node and npm are needed"):
        sc.install(sc.PROJECTS["ai5"])
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="cannot run under CI: node and npm are needed"):
        sc.install(sc.PROJECTS["ai5"])
