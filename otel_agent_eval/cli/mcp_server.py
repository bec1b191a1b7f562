"""``otel-agent-eval mcp``: evaluation as MCP tools, for agents and IDEs (the ``mcp`` extra).

Tools (multivon-mcp's contract where it has one):

- ``eval_tool_call_accuracy``: single-call mode (``expected_tool``/``actual_tool`` and their
  arguments, exact comparison) or trace mode (``expected_tool_calls`` + ``agent_trace``);
- ``eval_ingest_trace``: OTLP/JSON in, assembled ``AgentTrace`` JSON out;
- ``eval_trace``: named evaluators (judge ones when a judge is configured) on an AgentTrace;
- ``list_evaluators``: what can be named, and which need a judge.

Only built-in and installed (entry-point) evaluators can be named over MCP: a
``module:Class`` spec would be an arbitrary import on behalf of whoever can reach
the server. Over HTTP the server binds loopback by default, with the SDK's DNS
rebinding protection on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field, ValidationError

from ..assembly import assemble
from ..config import Settings
from ..evaluators import (
    ExpectedCall,
    ToolCallAccuracy,
    ToolExpectation,
    build_evaluators,
)
from ..evaluators.base import Evaluator, evaluate_run
from ..evaluators.registry import UnknownEvaluator, catalogue, resolve
from ..model import AgentStep, AgentTrace, EvalResult, ToolCall

NO_TRACE_ID = "0" * 32
AgentTraceInput = Annotated[
    dict[str, Any] | list[dict[str, Any]],
    Field(description="An AgentTrace JSON object (as eval_ingest_trace returns it), or a list of its steps "
                      "(AgentStep JSON: {thought, output, tool_calls: [{name, arguments, result, error}]}; "
                      "'index' may be left out and is then the position)."),
]


class ToolInputError(ValueError):
    """Arguments that form no valid request: returned to the caller as ``{"error": ...}``."""


def agent_trace_from(value: Any) -> AgentTrace:
    """An AgentTrace from its JSON object, or from a list of step objects."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ToolInputError(f"agent_trace is not valid JSON: {exc}") from None
    try:
        if isinstance(value, list):
            steps = [AgentStep.model_validate({"index": i, **step}) if isinstance(step, dict) else step for i, step in enumerate(value)]
            return AgentTrace(trace_id=NO_TRACE_ID, steps=steps)
        if isinstance(value, dict):
            return AgentTrace.model_validate({"trace_id": NO_TRACE_ID, **value})
    except ValidationError as exc:
        raise ToolInputError(f"agent_trace is not a valid AgentTrace or list of steps: {exc}") from None
    raise ToolInputError("agent_trace must be an AgentTrace object or a list of steps")


def verdict(result: EvalResult) -> dict[str, Any]:
    """multivon-mcp's result shape; ``passed`` is this project's label (None when it did not apply)."""
    passed = {"pass": True, "fail": False}.get(result.label)
    return {"score": result.score, "passed": passed, "label": result.label, "reason": result.explanation,
            "evaluator": result.evaluator}


def tool_call_accuracy(
    *,
    expected_tool: str | None = None,
    actual_tool: str | None = None,
    expected_arguments: dict[str, Any] | None = None,
    actual_arguments: dict[str, Any] | None = None,
    expected_tool_calls: list[str | dict[str, Any]] | None = None,
    agent_trace: Any = None,
    require_order: bool = False,
    penalize_unexpected: bool = False,
) -> dict[str, Any]:
    """Pure core of the ``eval_tool_call_accuracy`` tool."""
    try:
        if expected_tool is not None:
            if expected_tool_calls is not None or agent_trace is not None:
                raise ToolInputError("give either expected_tool/actual_tool (single call) or expected_tool_calls/agent_trace (trace)")
            expected = [ExpectedCall(name=expected_tool, arguments=expected_arguments)]
            calls = [ToolCall(name=actual_tool, arguments=actual_arguments)] if actual_tool else []
            trace = AgentTrace(trace_id=NO_TRACE_ID, steps=[AgentStep(index=0, tool_calls=calls)])
            rule = ToolExpectation(expected_tools=expected, penalize_unexpected=True)
        elif expected_tool_calls is not None and agent_trace is not None:
            trace = agent_trace_from(agent_trace)
            rule = ToolExpectation(expected_tools=expected_tool_calls, require_order=require_order,
                                   penalize_unexpected=penalize_unexpected)
        else:
            raise ToolInputError("give expected_tool and actual_tool (single-call mode), "
                                 "or expected_tool_calls and agent_trace (trace mode)")
    except (ToolInputError, ValidationError) as exc:
        return {"error": str(exc)}
    (result,) = ToolCallAccuracy(rules=[rule]).evaluate(trace)
    return verdict(result)


def ingest(otlp_json: str | dict[str, Any]) -> dict[str, Any]:
    """Pure core of ``eval_ingest_trace``: OTLP/JSON -> AgentTraces (nested ones inside their parent)."""
    from ..formats.otlp import OTLPDecodeError, decode_traces_json

    try:
        text = otlp_json if isinstance(otlp_json, str) else json.dumps(otlp_json)
        records = decode_traces_json(text)
    except (OTLPDecodeError, ValueError, TypeError) as exc:
        return {"error": f"not OTLP/JSON trace data: {exc}"[:500]}
    traces = assemble(records)
    issues = [issue for t in traces for issue in t.issues]
    return {"agent_traces": [t.model_dump(mode="json") for t in traces], "issues": issues}


class EvaluatorCatalogue:
    """Builds the evaluators MCP callers name: built-ins with default settings, the judge's when configured."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        from ..evaluators.judge import JudgeSettings

        self.env = env
        self.judge: Any = None
        judge_settings = JudgeSettings.load(env)
        if judge_settings.enabled:
            from ..evaluators.judge import JudgeClient

            self.judge = JudgeClient(judge_settings)

    def build(self, name: str) -> list[Evaluator]:
        from ..evaluators import BUILTIN_EVALUATORS

        if name in BUILTIN_EVALUATORS:
            return build_evaluators(Settings.load(self.env, evaluators=(name,)))
        if self.judge is None:
            raise UnknownEvaluator(f"{name!r} is a judge evaluator and no judge is configured (OTEL_AGENT_EVAL_JUDGE_MODEL)")
        from ..evaluators.judge import build_judge_evaluators

        return list(build_judge_evaluators(self.judge, [name]))

    def evaluate(self, agent_trace: Any, names: list[str]) -> dict[str, Any]:
        try:
            trace = agent_trace_from(agent_trace)
            evaluators = [e for name in names for e in resolve(name, allow_import=False, build_builtin=self.build)]
        except (ToolInputError, UnknownEvaluator) as exc:
            return {"error": str(exc)}
        results = evaluate_run(evaluators, trace)
        return {"results": [r.model_dump(mode="json") for r in results]}

    def close(self) -> None:
        if self.judge is not None:
            self.judge.close()


def build_server(env: Mapping[str, str] | None = None) -> Any:
    """The MCP server with its four tools (``mcp.server.mcpserver.MCPServer``)."""
    from mcp.server.mcpserver import MCPServer

    from .. import __version__

    named = EvaluatorCatalogue(env)
    server = MCPServer(
        "otel-agent-eval", version=__version__,
        instructions="Evaluate LLM agent runs: ingest OpenTelemetry traces into per-turn agent steps, "
                     "check tool calls against expectations, and run named evaluators on a run.",
    )

    @server.tool()
    def eval_tool_call_accuracy(
        expected_tool: Annotated[str | None, Field(description="Single-call mode: the tool that should have been called.")] = None,
        actual_tool: Annotated[str | None, Field(description="Single-call mode: the tool that was called (empty: none).")] = None,
        expected_arguments: Annotated[dict[str, Any] | None, Field(description="Single-call mode: the exact arguments expected (omit to compare names only).")] = None,
        actual_arguments: Annotated[dict[str, Any] | None, Field(description="Single-call mode: the arguments the call was made with.")] = None,
        expected_tool_calls: Annotated[list[str | dict[str, Any]] | None, Field(description="Trace mode: expected calls, as tool names or {name, arguments} objects; [] asserts that no tool is called.")] = None,
        agent_trace: Annotated[dict[str, Any] | list[dict[str, Any]] | None, Field(description="Trace mode: an AgentTrace object (from eval_ingest_trace) or a list of its steps.")] = None,
        require_order: Annotated[bool, Field(description="Trace mode: expected calls must happen in this order.")] = False,
        penalize_unexpected: Annotated[bool, Field(description="Trace mode: calls nobody expected lower the score and fail the check.")] = False,
    ) -> dict[str, Any]:
        """Check that an agent called the expected tools. Returns {score, passed, label, reason, evaluator}
        (passed: the expectation was met; null when the check did not apply), or {error}."""
        return tool_call_accuracy(
            expected_tool=expected_tool, actual_tool=actual_tool, expected_arguments=expected_arguments,
            actual_arguments=actual_arguments, expected_tool_calls=expected_tool_calls, agent_trace=agent_trace,
            require_order=require_order, penalize_unexpected=penalize_unexpected,
        )

    @server.tool()
    def eval_ingest_trace(
        otlp_json: Annotated[str | dict[str, Any], Field(description="An OTLP/JSON ExportTraceServiceRequest ({resourceSpans: [...]}), as a string or an object.")],
    ) -> dict[str, Any]:
        """Turn OpenTelemetry GenAI spans (any supported dialect) into agent runs: per-turn steps with
        their tool calls, arguments, results and errors. Returns {agent_traces: [AgentTrace], issues}."""
        return ingest(otlp_json)

    @server.tool()
    def eval_trace(
        agent_trace: AgentTraceInput,
        evaluators: Annotated[list[str], Field(description="Evaluator names, see list_evaluators.")],
    ) -> dict[str, Any]:
        """Run named evaluators on one agent run. Returns {results: [EvalResult]} (label pass | fail |
        skipped | error, score in [0, 1], explanation), or {error}."""
        return named.evaluate(agent_trace, evaluators)

    @server.tool()
    def list_evaluators() -> dict[str, Any]:
        """The evaluators eval_trace accepts: name, description, and whether it needs a judge model
        (available only when the server has one configured)."""
        return {"evaluators": [
            {"name": i.name, "description": i.description, "needs_judge": i.needs_judge,
             "available": not i.needs_judge or named.judge is not None}
            for i in catalogue()
        ]}

    return server


def run(*, port: int | None = None, host: str = "127.0.0.1", env: Mapping[str, str] | None = None) -> None:
    """Serve over stdio, or over streamable HTTP at ``http://host:port/mcp`` when ``port`` is given."""
    server = build_server(env)
    if port is None:
        server.run("stdio")
        return
    from mcp.server.transport_security import TransportSecuritySettings

    loopback = host in ("127.0.0.1", "localhost", "::1")
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{h}:{port}" for h in ("127.0.0.1", "localhost", "[::1]")] + ([] if loopback else [f"{host}:{port}"]),
        allowed_origins=[f"http://{h}:{port}" for h in ("127.0.0.1", "localhost", "[::1]")],
    )
    server.run("streamable-http", host=host, port=port, transport_security=security)
