"""Shortcuts taken for throughput (round 3) give the results of the general code they skip.

* Assembly of a trace with one agent span whose model and tool calls are all its
  children (``_TraceAssembly._lone_agent``) skips turn-node detection, scopes,
  handoffs, merging and step-span look-ups: the traces are the general path's.
* ``LoopDetection`` counts calls whose arguments are dicts of scalars by a
  (key, type, value) identity instead of canonical JSON: the same counts and texts.
"""

from __future__ import annotations

import itertools
import json
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from otel_agent_eval import assemble
from otel_agent_eval.assembly.dialects.base import canonical_json
from otel_agent_eval.evaluators.trajectory import LoopDetection
from otel_agent_eval.model import AgentStep, AgentTrace, ToolCall
from otel_agent_eval.records import STATUS_ERROR, SpanRecord

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import pipeline as bench  # noqa: E402

ASSEMBLE = sys.modules["otel_agent_eval.assembly.core"]
MS = 1_000_000


def span(span_id: int, name: str, start: int, parent: int | None = 1, error: bool = False, **attributes: Any) -> SpanRecord:
    """A span of trace 9; times in milliseconds, 10 ms long."""
    return SpanRecord(trace_id=9, span_id=span_id, parent_span_id=parent, name=name,
                      start_time_unix_nano=start * MS, end_time_unix_nano=(start + 10) * MS, attributes=attributes,
                      status_code=STATUS_ERROR if error else "UNSET")


def agent(span_id: int = 1, parent: int | None = None, **extra: Any) -> SpanRecord:
    return span(span_id, "invoke_agent support", 0, parent, **{
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support",
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]), **extra})


def chat(span_id: int, start: int, calls: list[tuple[str | None, str, Any]], parent: int = 1, **extra: Any) -> SpanRecord:
    parts: list[dict[str, Any]] = [{"type": "tool_call", "id": i, "name": n, "arguments": a} for i, n, a in calls]
    if not calls:
        parts = [{"type": "text", "content": "done"}]
    return span(span_id, "chat m", start, parent, **{
        "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 5, "gen_ai.usage.output_tokens": 2,
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts}]), **extra})


def tool(span_id: int, start: int, name: str, call_id: str | None = None, arguments: Any = None,
         parent: int = 1, error: bool = False, **extra: Any) -> SpanRecord:
    attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, **extra}
    if call_id is not None:
        attributes["gen_ai.tool.call.id"] = call_id
    if arguments is not None:
        attributes["gen_ai.tool.call.arguments"] = json.dumps(arguments)
    return span(span_id, f"execute_tool {name}", start, parent, error=error, **attributes)


def lone_shapes() -> list[list[SpanRecord]]:
    """Traces of the shortcut's shape, with what makes tool matching differ."""
    return [
        [agent(), chat(2, 10, [("c1", "a", {"x": 1})]), tool(3, 30, "a", "c1", {"x": 1}), chat(4, 50, [])],
        # no call ids: matched by (name, arguments), then by name, then an unrequested tool
        [agent(), chat(2, 10, [(None, "a", {"x": 1}), (None, "a", {"x": 2})]), tool(3, 30, "a", None, {"x": 2}),
         tool(4, 31, "a", None, {"x": 9}), tool(5, 32, "b"), chat(6, 50, [])],
        # the result echoed to the next model call back-fills id and result
        [agent(), chat(2, 10, [(None, "a", {"x": 1})]), tool(3, 30, "a", None, {"x": 1}, error=True),
         chat(4, 50, [], **{"gen_ai.input.messages": json.dumps([
             {"role": "assistant", "parts": [{"type": "tool_call", "id": "e1", "name": "a", "arguments": {"x": 1}}]},
             {"role": "tool", "parts": [{"type": "tool_call_response", "id": "e1", "response": "boom"}]}])})],
        # a tool span before any model call, a requested call never executed, a failed model call
        [agent(), tool(2, 1, "early"), chat(3, 10, [("c1", "a", {}), ("c2", "b", {})]), tool(4, 30, "a", "c1"),
         chat(5, 50, [], error=True)],
        # tools only: one step; non-GenAI spans around do not matter
        [agent(), tool(2, 10, "a"), tool(3, 20, "b"), span(4, "http", 25, 2)],
        # the agent below a plain span, with a missing parent; content off
        [span(7, "root", 0, None), agent(1, 7), span(2, "chat m", 10, 1, **{"gen_ai.operation.name": "chat"}),
         span(3, "execute_tool a", 30, 1, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "a"})],
        [agent(1, 99), chat(2, 10, [("c1", "a", "raw")]), tool(3, 30, "a", "c1", "raw")],
    ] + [bench.to_records(bench.agent_run_spans(n, seed), 9) for n in (4, 5, 6, 20, 31) for seed in (0, 1)]


def general(records: list[SpanRecord], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    with monkeypatch.context() as patch:
        patch.setattr(ASSEMBLE._TraceAssembly, "_lone_agent", lambda self: None)
        return [t.model_dump_json() for t in assemble(records)]


@pytest.mark.parametrize("records", lone_shapes())
def test_the_lone_agent_shortcut_gives_the_general_result(records: list[SpanRecord], monkeypatch: pytest.MonkeyPatch) -> None:
    taken = []
    original = ASSEMBLE._TraceAssembly._lone_agent
    monkeypatch.setattr(ASSEMBLE, "assemble_semconv_run", lambda records: None)  # round 5 takes some of these first
    monkeypatch.setattr(ASSEMBLE._TraceAssembly, "_lone_agent", lambda self: taken.append(original(self)) or taken[-1])
    fast = [t.model_dump_json() for t in assemble(records)]
    assert taken and taken[0] is not None  # the shortcut was taken
    assert fast == general(records, monkeypatch)


@pytest.mark.parametrize("records", [
    [agent(), agent(5, 1), chat(2, 10, [("c1", "a", {})], parent=5), tool(3, 30, "a", "c1", parent=5)],  # two agents
    [agent(), chat(2, 10, [("c1", "a", {})]), tool(3, 30, "a", "c1"), tool(4, 31, "a", "c1", parent=3)],  # tool in a tool
    [agent(), chat(2, 10, [])],  # no tool: the agent may be one turn of a run around it
    [agent(), span(2, "cycle", 5, 1, **{"gen_ai.operation.name": "execute_event_loop_cycle"}),
     chat(3, 10, [("c1", "a", {})], parent=2), tool(4, 30, "a", "c1", parent=2)],  # a step span
    [chat(7, 0, [], parent=None), agent(1, 7), chat(2, 10, [("c1", "a", {})]), tool(3, 30, "a", "c1")],  # a model call above
])
def test_other_shapes_take_the_general_path(records: list[SpanRecord]) -> None:
    assembly = ASSEMBLE._TraceAssembly({r.span_id: r for r in records})
    assert assembly._lone_agent() is None


def reference_loops(trace: AgentTrace, threshold_calls: int) -> dict[str, int]:
    """Round 2's counting: canonical JSON of every call."""
    counts = Counter((call.name, canonical_json(call.arguments)) for call in trace.tool_calls)
    return {f"{name}({args})": n for (name, args), n in counts.items() if n >= threshold_calls}


def test_loop_detection_counts_like_canonical_json() -> None:
    values: list[Any] = [
        {"a": 1}, {"a": True}, {"a": 1.0}, {"a": "1"}, {"a": None}, {"a": 0}, {"a": False}, {"b": 1, "a": 2},
        {"a": 2, "b": 1}, '{"a": 1}', '{"a":2,"b":1}', "not json", {"a": [1]}, {"a": {"b": 1}}, None, [1], {1: "x"},
        {"1": "x"}, {"a": float("nan")}, {"a": -0.0}, {"a": 0.0}, 1, "1", True,
    ]
    rng = random.Random(3)
    evaluators = [LoopDetection(threshold_calls=2), LoopDetection(threshold_calls=3)]
    cases = [list(pair) * 2 for pair in itertools.combinations_with_replacement(values, 2)]
    cases += [[rng.choice(values) for _ in range(rng.randint(0, 9))] for _ in range(400)]
    for arguments in cases:
        calls = [ToolCall(name=rng.choice("xy") if len(arguments) > 6 else "x", arguments=a) for a in arguments]
        trace = AgentTrace(trace_id="t", steps=[AgentStep(index=0, tool_calls=calls)])
        for evaluator in evaluators:
            (result,) = evaluator.evaluate(trace)
            expected = reference_loops(trace, evaluator.threshold_calls)
            assert result.details.get("repeated_calls", {}) == expected, arguments
            assert list(result.details.get("repeated_calls", {})) == list(expected), arguments
            assert result.label == ("fail" if expected else "pass")
