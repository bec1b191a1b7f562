"""The fidelity registry: which framework and instrumentation each acceptance test runs, which
scenario it checks, and what that telemetry loses and how assembly recovers it.

``docs/fidelity.md`` is generated from it (``python scripts/fidelity.py``):

- every scenario test in ``tests/test_frameworks_*.py`` and ``tests/test_pydantic_ai_processor.py``
  carries ``@fidelity(stack, *scenarios)`` (the ``fidelity`` marker); a test with a strict ``xfail``
  says its scenario's steps are not exact, and why; without one, they are;
- a ``Stack`` (framework × instrumentation) holds the descriptive columns, once, here;
- the prose around the tables is ``fidelity.md`` beside this file.

Loaded as a pytest plugin (``-p tests.frameworks.fidelity``, what ``collect`` does), this module
writes what collection saw to ``$OTEL_AGENT_EVAL_FIDELITY_OUT``: no framework runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "fidelity.md"
PROSE = Path(__file__).with_name("fidelity.md")
TEST_FILES = ("tests/test_frameworks_*.py", "tests/test_pydantic_ai_processor.py")
OUT_ENV = "OTEL_AGENT_EVAL_FIDELITY_OUT"
TABLES = "<!-- tables -->"
"""Where the generated tables go in ``fidelity.md``."""
SOURCE_NOTE = "<!-- The source of docs/fidelity.md"
"""``fidelity.md``'s first line, for its editors (not copied)."""


@dataclass(frozen=True)
class Stack:
    """A framework traced by one instrumentation: what its telemetry gives the assembled steps."""

    framework: str
    instrumentation: str
    call_ids: str
    arguments: str
    tool_errors: str
    agents: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.framework, self.instrumentation)


Params = Mapping[str, Any]
"""A collected test's parameters (``item.callspec.params``: its own and its fixtures')."""
StackSpec = Stack | Callable[[Params], Stack]
ScenarioSpec = str | Callable[[Params], str]


def fidelity(stack: StackSpec, *scenarios: ScenarioSpec) -> pytest.MarkDecorator:
    """The ``fidelity`` marker: this test checks the steps of ``scenarios`` under ``stack``.

    Either may depend on the test's parameters (``by_param``), for tests parametrized over
    instrumentations or scenarios."""
    assert scenarios, "a fidelity test names at least one scenario"
    return pytest.mark.fidelity(stack, *scenarios)


def by_param(name: str, values: Mapping[Any, Any]) -> Callable[[Params], Any]:
    """The value of ``values`` for the test's parameter ``name`` (a fixture's param too)."""
    return lambda params: values[params[name]]


# --- the stacks, in the order of the tables ----------------------------------------------------------

_ECHO_ERROR = "ERROR + exception event, no output; the result is the error text from the echo"

OPENAI_AGENTS = Stack(
    "OpenAI Agents SDK 0.24", "OpenInference `openai-agents` 2.6",
    call_ids="on LLM and TOOL spans",
    arguments="as requested; an empty `{}` the instrumentor drops is read from the raw response in `output.value`",
    tool_errors="ERROR status (SDK's redacted description) and the error text as result: error from the status",
    agents="names from AGENT spans; handoff target is a sibling AGENT span, linked through the `handoff to X` TOOL span")
OPENAI_AGENTS_OPENLLMETRY = Stack(
    "OpenAI Agents SDK 0.24", "OpenLLMetry `openai-agents` 0.62.4",
    call_ids="not on tool spans, no model output: recovered from the echo",
    arguments="`gen_ai.tool.call.arguments`",
    tool_errors="ERROR, `str()` of the SDK's error dict",
    agents="every agent span is a sibling under the workflow span: the agent that started inside a tool span of its "
           "name is that call's child, the agent started next after a `handoff` span the child of the agent that "
           "handed off (`traceloop.WorkflowSiblings`); no model text, no usage")
OPENAI_V2 = Stack(
    "`openai` client, hand-rolled loop", "OpenTelemetry `openai-v2` 2.4b0 (util-genai 1.1b0), span-only and event-only",
    call_ids="yes",
    arguments="event-only: from the requesting turn's output messages (log records)",
    tool_errors="the app's ERROR span",
    agents="`invoke_agent` span")
LANGGRAPH = Stack(
    "LangGraph 1.x (`create_react_agent`, subgraphs as nodes, handoff supervisor)", "OpenInference LangChain 0.1.80",
    call_ids="from the ToolMessage in the tool's `output.value`",
    arguments="the tool span records only a single argument's bare value: the requested arguments are kept",
    tool_errors="(not in scenario)",
    agents="the graph is the agent; the per-turn `agent` AGENT spans are its turns. Subgraphs as nodes: each sub-agent "
           "found by its nested `langgraph_checkpoint_ns`, a child of the parent graph. Handoff supervisor: the "
           "supervisor's runs merged into one agent; each worker a child linked to the step whose transfer handed off "
           "(the serialized `Command`)")
LANGGRAPH_OPENLLMETRY = Stack(
    "LangGraph 1.x `create_react_agent`", "OpenLLMetry LangChain 0.62.4",
    call_ids="from the ToolMessage in the result wrapper",
    arguments='unwrapped from the callback envelope `{"input_str", "inputs", ...}`',
    tool_errors="ERROR + exception event, no result",
    agents="model named only in `ls_model_name` metadata; no usage; multi-agent graphs as under OpenInference")
LANGGRAPH_LANGSMITH = Stack(
    "LangGraph 1.x `create_react_agent`", "LangSmith 0.15 OTel export (`tracing_mode=\"otel\"`)",
    call_ids="from the tool span (`gen_ai.tool.call.id`) and its ToolMessage",
    arguments="the tool span's `gen_ai.prompt` (`{}` for a call made with none)",
    tool_errors="(not in scenario)",
    agents="the graph span (a chain with no node) is the agent, its state the task and answer; sub-graphs found by "
           "their node under the outer node task's namespace; handoffs as under OpenInference")
STRANDS = Stack(
    "Strands 1.62 (streaming OpenAI provider)", "native GenAI spans, default and `gen_ai_latest_experimental`",
    call_ids="yes",
    arguments="from message events / details events",
    tool_errors="ERROR with the exception message; Bedrock result blocks unwrapped",
    agents="`invoke_agent` span; one step per event-loop cycle. Agent as tool: the nested `invoke_agent` under the "
           "tool span is a child at that step. Swarm: every node's `invoke_agent` is a sibling under `invoke_swarm`, "
           "its input the `User Request` of the swarm's `Context:` prompt; the agent a `handoff_to_agent` call names "
           "is the caller's child at that step (`rules.TransferTools`)")
PYDANTIC_AI = Stack(
    "pydantic-ai", "its own instrumentation",
    call_ids="yes", arguments="yes", tool_errors="`ToolRetryError` from the span", agents="agent span")
SMOLAGENTS_TOOL_CALLING = Stack(
    "smolagents 1.26 `ToolCallingAgent`", "OpenInference `smolagents` 0.1.43",
    call_ids="on the LLM span only; tool spans matched by name and arguments",
    arguments='unwrapped from `{"args": [], "sanitize_inputs_outputs": ..., "kwargs": {...}}`',
    tool_errors="ERROR + exception event, no `output.value`",
    agents="name from the `{name}.run` AGENT span, input from its `task` argument; the managed agent (no TOOL span) "
           "is a child of the step that called it, and its run fulfils that call, its final answer the result")
SMOLAGENTS_CODE = Stack(
    "smolagents 1.26 `CodeAgent`", "OpenInference `smolagents` 0.1.43",
    call_ids="none (tool use is code)",
    arguments="as the tool spans record them, unwrapped; positional arguments named after `tool.parameters`",
    tool_errors="ERROR + exception event",
    agents="as `ToolCallingAgent`; the step's thought is the whole response (code included)")
LLAMAINDEX_FUNCTION = Stack(
    "LlamaIndex 0.14 `FunctionAgent` in `AgentWorkflow`", "OpenInference `llama-index` 4.6.1 (own venv)",
    call_ids="on the LLM span only; tool spans matched by name and arguments",
    arguments='unwrapped from `{"kwargs": {...}}`, LlamaIndex\'s injected `ctx` dropped (not in the tool\'s schema); '
              "results the text of the `ToolOutput`",
    tool_errors=_ECHO_ERROR,
    agents="no AGENT span: the agents' names only in Python reprs on `run_agent_step` spans "
           "(`current_agent_name='planner'`): each such span is a turn of the agent it names, an agent's turns its "
           "run, split at the handoff and linked to it (`openinference.AgentTurns`); root "
           "output is a truncated `StopEvent(...)` repr, so the final output comes from the last step; no usage "
           "when streamed (LlamaIndex does not ask for it)")
LLAMAINDEX_REACT = Stack(
    "LlamaIndex 0.14 `ReActAgent`", "OpenInference `llama-index` 4.6.1 (own venv)",
    call_ids="none (tool use is text)",
    arguments="from the tool spans, unwrapped",
    tool_errors="ERROR + exception event; no result (the observation is echoed without an id)",
    agents="the name (`reactor`) only in the event reprs of its `run_agent_step` spans: read there, not the root "
           "span's `ReActAgent.run`; the last response's `Thought:` is its "
           "thought, its `Answer:` the final output")
_SK = "Semantic Kernel 1.45 `ChatCompletionAgent`"
_SK_DIAGNOSTICS = "native GenAI diagnostics (`SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true`)"
SEMANTIC_KERNEL = Stack(
    _SK, f"{_SK_DIAGNOSTICS}, spans + log records (own venv)",
    call_ids="on tool spans and in the messages",
    arguments="`gen_ai.tool.call.arguments` on the tool span, as requested",
    tool_errors="ERROR + `error.type` + exception events, no result; the result is the error text from the echo",
    agents="`invoke_agent {name}` span; the input (user's message) only in log records; a sub-agent run inside a "
           "plugin function is a child of the step that called it")
SEMANTIC_KERNEL_SPANS = Stack(
    _SK, f"{_SK_DIAGNOSTICS}, spans alone (own venv)",
    call_ids="on tool spans",
    arguments="`gen_ai.tool.call.arguments` on the tool span, as requested",
    tool_errors="ERROR + `error.type` + exception events, no result, and no echo: the failed call has no result",
    agents="`invoke_agent {name}` span, which records no input (`gen_ai.input.messages: []`); the answer is only on "
           "it, so the final output comes from the agent span")
_AUTOGEN = "AutoGen AgentChat 0.7.5 `AssistantAgent`, `Swarm`"
AUTOGEN = {
    "native": Stack(
        _AUTOGEN, "native GenAI spans (`autogen-core`) + OpenLLMetry `openai` 0.62.4 (own venv)",
        call_ids="on tool spans and in the messages",
        arguments="none on tool spans: from the requesting response",
        tool_errors="ERROR + `error.type` + exception event, no result; the result is the error text from the echo",
        agents="`invoke_agent {name}` span (no input, no output: from the model calls; the handoff message AutoGen "
               "sends the next agent's model as a user message is not its input: `autogen.HandoffRelay`); in a team "
               "every agent turn is its own trace: agents not linked"),
    "openinference": Stack(
        _AUTOGEN, "OpenInference `autogen-agentchat` 0.1.22 on top of the native spans (own venv)",
        call_ids="in the messages and on the native tool span",
        arguments="OpenInference's TOOL span (wraps the native `execute_tool`: one call, not two)",
        tool_errors="OpenInference TOOL span OK with the error text as output, the native span inside it ERROR: an error",
        agents="one trace under `Swarm.run_stream`: the handed-off agent is a child of the step that handed off; "
               "each agent's AGENT span sits inside its native `invoke_agent` span: two spans, one agent "
               "(`rules.StackedAgents`); the handed-off agent's input a Python repr of the messages, read from its "
               "model calls instead (`autogen.HandoffRelay`)"),
}
_CREWAI = "CrewAI 1.15 (native OpenAI provider)"
CREWAI = {
    "wrappers": Stack(
        _CREWAI, "OpenInference `crewai` 1.1.21 + `openai` 0.1.66 (own venv)",
        call_ids="on the LLM span (`ChatCompletion`) only; tool spans matched by name and arguments",
        arguments="as requested (`input.value` of `{tool}.run`)",
        tool_errors="ERROR + exception event, no output; the result is CrewAI's `Error executing tool: ...` from the echo",
        agents="name from the `{role}._execute_core` AGENT span (`graph.node.id`, the role); its `input.value` is the "
               "agent's configuration, so the input is the task as CrewAI renders it for the model (description, "
               "expected output, context); output the model's final text, not the `TaskOutput` JSON. A crew's agents "
               "are peers under the `Crew_{id}.kickoff` CHAIN: the instrumentor's `graph.node.parent_id` (the previous "
               "task's agent) is not read as a handoff. Delegation (`allow_delegation=True`): the TOOL span's "
               "`tool.name` is `Delegate work to coworker`, the model-facing name read from the first line of "
               "`tool.description`; the coworker has no AGENT span (its spans sit under the delegation tool, its role "
               "only in the tool's `coworker` argument): the agent that ran inside the tool span is a child AgentTrace at the "
               "delegating step (`rules.TransferTools`)"),
    "events": Stack(
        _CREWAI, "OpenInference `crewai` 1.1.21 in event-listener mode (`use_event_listener=True`), alone (own venv)",
        call_ids="on the LLM span only",
        arguments="as requested",
        tool_errors="ERROR, no exception event, no output; the result from the echo",
        agents="AGENT span `{role}.{task}.execute`, its `input.value` the task (description and expected output); "
               "LLM spans record a response that calls tools only as raw JSON in `output.value`, its echoed calls "
               "naming the tool by its Python repr"),
}
AGNO = Stack(
    "Agno 3.1 `Agent`, `Team`", "OpenInference `agno` 1.0.15 (what `agno.tracing.setup_tracing` installs)",
    call_ids="on the LLM span (`OpenAIChat.invoke` / `ainvoke_stream`) only; tool spans matched by name and arguments",
    arguments="exactly as requested",
    tool_errors="ERROR with no exception event and Agno's error text as `output.value`: an error (from the status), "
                "the text its result",
    agents="`{name}.run` AGENT span with `agent.name`, the user's message, the final text and `session.id` (the "
           "conversation id). Team: the member's AGENT span is a sibling of the delegating TOOL span: a child agent "
           "of the leader's step that delegated; the instrumentor leaves the team's span current after `Team.run` "
           "returns, so later spans of that thread join the finished team trace (upstream bug, pinned by a strict "
           "xfail; the tests run each scenario on a thread of its own)")
_ADK = "Google ADK 2.13 (`LiteLlm` model wrapper, own venv)"
_ADK_AGENTS = ("`invoke_agent` span. Agent as tool: the nested run (its own `invoke_workflow`/`invocation` and session) "
               "is a child linked to the step whose call ran it. Transfer: the target's `invoke_agent` is a sibling of "
               "the coordinator's and names no source; the first agent named by the call's `agent_name` started "
               "after it is the coordinator's child at that step (`rules.TransferTools`; event-only: the name from "
               "the model's request); its input is the user's message (ADK's `For context:` relays read as role "
               "`other_agent`)")
_ADK_IDS = ("kept (LiteLLM passes the model's ids through); a raising tool's is `<not specified>`: the call takes the "
            "model's id by name and arguments; the `execute_tool (merged)` span after a parallel batch (synthetic id) "
            "is no call")
_ADK_ERRORS = ("ERROR with only `TOOL_ERROR` when the error callback answers `{\"error\": ...}`: `error` `TOOL_ERROR`, "
               "the result what the model got; a raising tool: ERROR + exception event, `error` "
               "`RuntimeError: ...`, the agent `status: error`")
ADK = {
    "semconv_span": Stack(
        _ADK, "native telemetry, GenAI semconv (ADK 2's default), content on spans (`SPAN_ONLY`)",
        call_ids=_ADK_IDS, arguments="as requested, no envelope", tool_errors=_ADK_ERRORS, agents=_ADK_AGENTS),
    "semconv_event": Stack(
        _ADK, "native telemetry, GenAI semconv, content in log records (`EVENT_ONLY`)",
        call_ids=_ADK_IDS,
        arguments="not on tool spans: from the requesting call's output messages; results from the next call's "
                  "history (echo, by id); a transfer's result is on no span and in no later history",
        tool_errors=_ADK_ERRORS, agents=_ADK_AGENTS),
    "semconv_no_content": Stack(
        _ADK, "native telemetry, GenAI semconv, no content captured (ADK 2's default)",
        call_ids=_ADK_IDS,
        arguments="not recorded, nor texts, results or tool parameters (`content_captured: false`)",
        tool_errors="the status and `error.type`", agents="`invoke_agent` span"),
    "legacy": Stack(
        _ADK, "native telemetry, `gcp.vertex.agent` schema (`ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1`)",
        call_ids=_ADK_IDS, arguments="`tool_call_args`, as requested; definitions from `llm_request`",
        tool_errors=_ADK_ERRORS, agents=_ADK_AGENTS),
}
_VERCEL = "Vercel AI SDK `ai` 5.0 and 6.0 in node 20 (`generateText`, `streamText`, agent class)"
_VERCEL_TELEMETRY = "built-in `experimental_telemetry`, OpenTelemetry JS SDK 2.12 OTLP to `otel-agent-eval serve`"
VERCEL = {
    True: Stack(
        _VERCEL, _VERCEL_TELEMETRY,
        call_ids="on model (`ai.response.toolCalls`) and tool spans",
        arguments="`ai.toolCall.args` as requested; results `JSON.stringify`'d (a string result arrives quoted): "
                  "decoded as JSON",
        tool_errors="ERROR + exception event, no result; the result is the error text the next call was sent "
                    "(`{type: \"error-text\"}`); arguments the schema rejects run no tool",
        agents="the call span (`ai.generateText` / `ai.streamText`) named by `functionId`, conversation id "
               "`metadata.sessionId`; a `generateText` inside a tool's `execute` is a child at that step"),
    False: Stack(
        _VERCEL, f"{_VERCEL_TELEMETRY}, `recordInputs`/`recordOutputs: false`",
        call_ids="on tool spans",
        arguments="not recorded, nor the task, texts, results, tool definitions or the order of parallel calls",
        tool_errors="ERROR status kept",
        agents="as with content; a tool goes to the model call that started strictly before it "
               "(`content_captured: false`)"),
}

STACKS: tuple[Stack, ...] = (
    OPENAI_AGENTS, OPENAI_AGENTS_OPENLLMETRY, OPENAI_V2, LANGGRAPH, LANGGRAPH_OPENLLMETRY, LANGGRAPH_LANGSMITH,
    STRANDS, PYDANTIC_AI,
    SMOLAGENTS_TOOL_CALLING, SMOLAGENTS_CODE, LLAMAINDEX_FUNCTION, LLAMAINDEX_REACT, SEMANTIC_KERNEL,
    SEMANTIC_KERNEL_SPANS, *AUTOGEN.values(), *CREWAI.values(), AGNO, *ADK.values(), *VERCEL.values(),
)
FIDELITY: dict[tuple[str, str], Stack] = {s.key: s for s in STACKS}

NOT_COVERED: tuple[tuple[str, str, str], ...] = (
    ("Vercel AI SDK `ai` 7", "built-in telemetry",
     "not covered: `ai` 7 needs node >= 22 (the tests pin node 20-compatible packages)"),
)
"""(framework, instrumentation, why) rows with no test."""


# --- collection (as a pytest plugin) -------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One collected test item's claim: under ``stack``, ``scenario``'s steps are exact unless ``xfail``."""

    framework: str
    instrumentation: str
    scenario: str
    file: str
    test: str
    xfail: str | None


def _resolve(spec: Any, params: Params) -> Any:
    return spec(params) if callable(spec) else spec


def entries_of(item: pytest.Item) -> list[Entry]:
    """The claims of one test item (none without the marker); a non-strict xfail is refused."""
    mark = item.get_closest_marker("fidelity")
    if mark is None:
        return []
    params = getattr(item, "callspec", None)
    params = params.params if params is not None else {}
    stack = _resolve(mark.args[0], params)
    reasons = []
    for xfail in item.iter_markers("xfail"):
        if xfail.args and not xfail.args[0]:
            continue  # a condition that does not hold
        if not xfail.kwargs.get("strict", item.config.getini("xfail_strict")):
            raise pytest.UsageError(f"{item.nodeid}: a fidelity test's xfail must be strict=True")
        reasons.append(" ".join(str(xfail.kwargs.get("reason", "")).split()))
    return [Entry(stack.framework, stack.instrumentation, _resolve(spec, params), Path(str(item.path)).name,
                  getattr(item, "originalname", item.name), "; ".join(reasons) or None)
            for spec in mark.args[1:]]


_NOT_COLLECTED: list[str] = []


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """A test module that cannot be collected (a framework not installed) would drop its rows."""
    if report.failed or report.skipped:
        _NOT_COLLECTED.append(f"{report.nodeid}: {report.longrepr}")


def pytest_collection_finish(session: pytest.Session) -> None:
    out = os.environ.get(OUT_ENV)
    if out:
        found = [e.__dict__ for item in session.items for e in entries_of(item)]
        Path(out).write_text(json.dumps({"entries": found, "not_collected": _NOT_COLLECTED}))


class NotCollected(RuntimeError):
    """A test module was skipped at collection (its framework is not installed): its rows would be missing."""


def collect(files: Sequence[str] | None = None, python: str = sys.executable) -> list[Entry]:
    """Every fidelity claim of the acceptance tests (or of ``files``), from a collection-only pytest
    run in a subprocess: no test runs, no framework starts."""
    if files is None:
        files = sorted(str(p.relative_to(ROOT)) for pattern in TEST_FILES for p in ROOT.glob(pattern))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "entries.json"
        done = subprocess.run(
            [python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", __name__, *files],
            cwd=ROOT, env={**os.environ, OUT_ENV: str(out)}, capture_output=True, text=True, check=False)
        found = json.loads(out.read_text()) if out.exists() else None
        if done.returncode != 0 or found is None:
            raise RuntimeError(f"collecting the fidelity markers failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
        if found["not_collected"]:
            raise NotCollected("\n".join(found["not_collected"]))
        return [Entry(**e) for e in found["entries"]]


# --- the document -------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _row(*cells: str) -> str:
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _unique(values: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(values))


def summary_table(entries: Sequence[Entry]) -> list[str]:
    """Framework × instrumentation × scenario: steps exact unless a test of the scenario is a strict xfail."""
    rows: dict[tuple[str, str, str], list[Entry]] = {}
    for stack in STACKS:
        for e in entries:
            if (e.framework, e.instrumentation) == stack.key:
                rows.setdefault((e.framework, e.instrumentation, e.scenario), []).append(e)
    lines = [_row("Framework", "Instrumentation", "Scenario", "Steps exact", "Tests"), "|---|---|---|---|---|"]
    for (framework, instrumentation, scenario), found in rows.items():
        reasons = _unique([e.xfail for e in found if e.xfail])
        exact = "no (" + "; ".join(f"xfail: {r}" for r in reasons) + ")" if reasons else "yes"
        files = _unique([e.file for e in found])
        tests = "; ".join(f"`{f}`: " + ", ".join(f"`{t}`" for t in _unique([e.test for e in found if e.file == f]))
                          for f in files)
        lines.append(_row(framework, instrumentation, scenario, exact, tests))
    for framework, instrumentation, why in NOT_COVERED:
        lines.append(_row(framework, instrumentation, "—", why, "—"))
    return lines


def losses_table(entries: Sequence[Entry]) -> list[str]:
    """Per framework × instrumentation: what its telemetry loses, and how assembly recovers it."""
    lines = [_row("Framework", "Instrumentation", "Call ids", "Arguments", "Tool errors", "Agents", "Test"),
             "|---|---|---|---|---|---|---|"]
    for stack in STACKS:
        files = _unique([e.file for e in entries if (e.framework, e.instrumentation) == stack.key])
        lines.append(_row(stack.framework, stack.instrumentation, stack.call_ids, stack.arguments, stack.tool_errors,
                          stack.agents, ", ".join(f"`{f}`" for f in files)))
    return lines


def check(entries: Sequence[Entry]) -> None:
    """Every claim names a registered stack, and every registered stack has a test."""
    claimed = {(e.framework, e.instrumentation) for e in entries}
    unknown = claimed - FIDELITY.keys()
    untested = FIDELITY.keys() - claimed
    if unknown or untested:
        raise ValueError(f"fidelity: stacks not in STACKS: {sorted(unknown)}; stacks without a test: {sorted(untested)}")


def render(entries: Sequence[Entry]) -> str:
    """``docs/fidelity.md``: the prose of ``fidelity.md`` with the two tables in its ``<!-- tables -->``."""
    check(entries)
    prose = PROSE.read_text()
    if prose.startswith(SOURCE_NOTE):
        prose = prose.split("\n", 1)[1]
    head, tail = prose.split(TABLES + "\n")
    tables = ["## Steps, per scenario", "", *summary_table(entries), "",
              "## What each framework's telemetry loses, and how assembly recovers it", "", *losses_table(entries)]
    return head + "\n".join(tables) + "\n" + tail
