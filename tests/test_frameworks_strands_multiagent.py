"""Acceptance: Strands multi-agent runs with a streaming model provider (``OpenAIModel``: every model
call a streamed chat completion from the scripted local server), traced by Strands itself in both of
its content modes (``tests/frameworks/strands_multiagent_scenarios.py``; the single-agent run with
parallel and failing tools is ``test_frameworks_strands.py``, streamed the same way).

- Agent as tool (``weather_agent.as_tool()``): the nested ``invoke_agent weather_agent`` runs under
  the planner's ``execute_tool weather_agent`` span: a child AgentTrace linked to that step; the
  call's result is the nested agent's answer as Strands sends it back (its text and a newline).
- Swarm: ``invoke_swarm`` -> one ``invoke_agent`` per node, siblings. Each node's model gets the
  swarm's ``Context:`` prompt (handoff message, ``User Request: {task}``, other agents) instead of
  the user's message; assembly takes the ``User Request`` as the agent's input. The handoff is a
  ``handoff_to_agent`` tool call; nothing on the target's span names the agent that handed off, so
  assembly links the target to the handoff step by that call (``rules.TransferTools``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

pytest.importorskip("strands")

from otel_agent_eval import AgentTrace
from tests.conftest import make_telemetry
from tests.frameworks import strands_multiagent_scenarios as sc
from tests.frameworks.fidelity import STRANDS, by_param, fidelity
from tests.frameworks.harness import (
    OWN_SCOPE,
    assemble_with_logs,
    assert_traces,
    call,
    differences,
    flat,
    only,
    step,
    trace,
)
from tests.frameworks.strands_scenarios import traced_by
from tests.openai_server import FakeOpenAI, RecordedRequest

DEFAULT, LATEST = "default", "gen_ai_latest_experimental"
MODES = (DEFAULT, LATEST)
SCENARIOS: dict[str, tuple[Callable[[], FakeOpenAI], Callable[[FakeOpenAI], str]]] = {
    "agent_as_tool": (sc.agent_as_tool_server, sc.run_agent_as_tool),
    "swarm": (sc.swarm_server, sc.run_swarm),
}


@dataclass
class Run:
    spans: list[ReadableSpan]
    output: str
    requests: list[RecordedRequest]

    def traces(self) -> list[AgentTrace]:
        return assemble_with_logs(self.spans)

    def agent(self, name: str) -> ReadableSpan:
        return only(self.spans, lambda s: s.name == f"invoke_agent {name}")

    def children(self, parent: ReadableSpan, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.parent is not None and s.parent.span_id == parent.context.span_id
                and s.name == name]

    def turns(self, agent: ReadableSpan) -> list[tuple[ReadableSpan, ReadableSpan]]:
        """(cycle span, its chat span) of one agent, in order."""
        return [(cycle, only(self.children(cycle, "chat"), lambda s: True))
                for cycle in self.children(agent, "execute_event_loop_cycle")]

    def tool(self, call_id: str) -> ReadableSpan:
        return only(self.spans, lambda s: s.attributes.get("gen_ai.tool.call.id") == call_id)


def _run(mode: str, scenario: str) -> Run:
    server_of, run = SCENARIOS[scenario]
    with pytest.MonkeyPatch.context() as monkeypatch:
        if mode == LATEST:
            monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", LATEST)
        else:
            monkeypatch.delenv("OTEL_SEMCONV_STABILITY_OPT_IN", raising=False)
        for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "LANGFUSE_BASE_URL"):
            monkeypatch.delenv(name, raising=False)
        telemetry = make_telemetry()
        try:
            with server_of() as server, traced_by(telemetry.tracer_provider, monkeypatch):
                output = run(server)
                assert server.errors == []
                requests = list(server.requests)
            return Run(telemetry.spans(exclude_scope=OWN_SCOPE), output, requests)
        finally:
            telemetry.shutdown()


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[tuple[str, str], Run]]:
    yield {(mode, scenario): _run(mode, scenario) for mode in MODES for scenario in SCENARIOS}


def _weather(run: Run, input: str, usage: int, parent_step: int | None) -> AgentTrace:
    agent = run.agent(sc.WEATHER_AGENT)
    (c0, l0), (c1, l1) = run.turns(agent)
    return trace(agent, sc.WEATHER_AGENT, input=input, final_output=sc.OSLO, parent_step_index=parent_step, steps=[
        step(0, l0, [call(run.tool("call_w"), "get_weather", {"city": "Oslo"}, "rainy, 8C", call_id="call_w")],
             model=sc.WEATHER_MODEL, usage=(usage, usage - 90), turn=c0),
        step(1, l1, model=sc.WEATHER_MODEL, usage=(usage + 1, usage - 89), output=sc.OSLO, turn=c1),
    ])


def expected_agent_as_tool(run: Run) -> list[AgentTrace]:
    planner = run.agent(sc.PLANNER)
    (c0, l0), (c1, l1) = run.turns(planner)
    nested = _weather(run, sc.WEATHER_REQUEST, 101, parent_step=0)
    ask = call(run.tool("call_a"), sc.WEATHER_AGENT, {"input": sc.WEATHER_REQUEST}, sc.OSLO + "\n", call_id="call_a")
    return [trace(planner, sc.PLANNER, input=sc.UMBRELLA_QUESTION, final_output=sc.UMBRELLA, steps=[
        step(0, l0, [ask], model=sc.PLANNER_MODEL, usage=(100, 10), turn=c0),
        step(1, l1, model=sc.PLANNER_MODEL, usage=(103, 13), output=sc.UMBRELLA, turn=c1),
    ], children=[nested])]


def expected_swarm(run: Run) -> list[AgentTrace]:
    triage = run.agent(sc.TRIAGE)
    (c0, l0), (c1, l1) = run.turns(triage)
    handoff = call(run.tool("call_h"), "handoff_to_agent", {"agent_name": sc.WEATHER_AGENT, "message": sc.HANDOFF_MESSAGE},
                   f"Handing off to {sc.WEATHER_AGENT}: {sc.HANDOFF_MESSAGE}", call_id="call_h")
    # Both agents' input is the user's request, not the swarm's context prompt around it.
    target = _weather(run, sc.OSLO_QUESTION, 102, parent_step=0)
    return [trace(triage, sc.TRIAGE, input=sc.OSLO_QUESTION, final_output=sc.HANDED_OFF, steps=[
        step(0, l0, [handoff], model=sc.TRIAGE_MODEL, usage=(100, 10), turn=c0),
        step(1, l1, model=sc.TRIAGE_MODEL, usage=(101, 11), output=sc.HANDED_OFF, turn=c1),
    ], children=[target])]


EXPECTED = {"agent_as_tool": expected_agent_as_tool, "swarm": expected_swarm}
OUTPUTS = {"agent_as_tool": sc.UMBRELLA + "\n", "swarm": "Status.COMPLETED"}

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_scripted_run_streamed(runs: dict[tuple[str, str], Run], mode: str, scenario: str) -> None:
    run = runs[mode, scenario]
    assert run.output == OUTPUTS[scenario]
    assert len(run.requests) == 4
    assert all(r.api == "chat" and r.body["stream"] is True and r.body["stream_options"] == {"include_usage": True}
               for r in run.requests)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scenario", SCENARIOS)
@fidelity(STRANDS, by_param("scenario", {"agent_as_tool": "agent as tool (`as_tool()`)", "swarm": "swarm (`handoff_to_agent`)"}))
def test_assembled_traces(runs: dict[tuple[str, str], Run], mode: str, scenario: str) -> None:
    run = runs[mode, scenario]
    assert_traces(run.traces(), EXPECTED[scenario](run))


@pytest.mark.parametrize("mode", MODES)
@fidelity(STRANDS, "swarm (`handoff_to_agent`)")
def test_swarm_agents(runs: dict[tuple[str, str], Run], mode: str) -> None:
    run = runs[mode, "swarm"]
    swarm = only(run.spans, lambda s: s.name == "invoke_swarm")
    assert {run.agent(sc.TRIAGE).parent.span_id, run.agent(sc.WEATHER_AGENT).parent.span_id} == {swarm.context.span_id}
    got, want = flat(run.traces()), flat(expected_swarm(run))
    assert got == want, "\n".join(differences(got, want))


@pytest.mark.parametrize("mode", MODES)
@fidelity(STRANDS, "swarm (`handoff_to_agent`)")
def test_a_swarm_agent_is_given_the_users_request(runs: dict[tuple[str, str], Run], mode: str) -> None:
    run = runs[mode, "swarm"]
    sent: Any = run.requests[-1].body["messages"][1]["content"]
    text = sent if isinstance(sent, str) else sent[0]["text"]
    assert text.startswith(f"Context:\nHandoff Message: {sc.HANDOFF_MESSAGE}\n\nUser Request: {sc.OSLO_QUESTION}\n\n")
    assert {t["agent_name"]: t["input"] for t in flat(run.traces())} == {
        sc.TRIAGE: sc.OSLO_QUESTION, sc.WEATHER_AGENT: sc.OSLO_QUESTION}


@pytest.mark.parametrize(("text", "task"), [
    ("Context:\nUser Request: Hi\n\nOther agents available for collaboration:\nAgent name: b.\n\n", "Hi"),
    ("Context:\nHandoff Message: over to you\n\nUser Request: Two\n\nparas\n\nPrevious agents who worked on this: a\n\n",
     "Two\n\nparas"),
    ("Context:\nUser Request: Alone\n\n", "Alone"),
    ("Context:\nsomething else", None),
    ("User Request: not from a swarm", None),
])
def test_swarm_task_is_the_user_request_of_the_swarm_prompt(text: str, task: str | None) -> None:
    from otel_agent_eval.assembly.dialects.semconv import swarm_task

    assert swarm_task(text) == task
