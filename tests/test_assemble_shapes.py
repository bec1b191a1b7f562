"""Span-tree shapes (reference §6.4): where tool spans sit relative to their LLM span."""

from __future__ import annotations

import json

from otel_agent_eval import assemble
from otel_agent_eval.records import SpanRecord

MS = 1_000_000


def span(span_id: int, name: str, start: int, end: int, parent: int | None = 1, **attrs) -> SpanRecord:
    """A span with semconv attributes; times in milliseconds."""
    return SpanRecord(trace_id=9, span_id=span_id, parent_span_id=parent, name=name,
                      start_time_unix_nano=start * MS, end_time_unix_nano=end * MS, attributes=attrs)


def agent(span_id: int = 1, name: str = "a", start: int = 0, end: int = 1000, parent: int | None = None) -> SpanRecord:
    return span(span_id, f"invoke_agent {name}", start, end, parent, **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name})


def chat(span_id: int, start: int, end: int, parent: int | None = 1, calls=(), text: str | None = None, inputs=None) -> SpanRecord:
    parts = [{"type": "tool_call", "id": i, "name": n, "arguments": a} for i, n, a in calls]
    if text:
        parts.append({"type": "text", "content": text})
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts}])}
    if inputs is not None:
        attrs["gen_ai.input.messages"] = json.dumps(inputs)
    return span(span_id, "chat m", start, end, parent, **attrs)


def tool(span_id: int, name: str, start: int, end: int, parent: int | None = 1, call_id=None, args=None, result=None) -> SpanRecord:
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    if call_id is not None:
        attrs["gen_ai.tool.call.id"] = call_id
    if args is not None:
        attrs["gen_ai.tool.call.arguments"] = json.dumps(args)
    if result is not None:
        attrs["gen_ai.tool.call.result"] = result
    return span(span_id, f"execute_tool {name}", start, end, parent, **attrs)


def steps(spans) -> list[list[tuple]]:
    (trace,) = assemble(spans)
    return [[(c.name, c.call_id, c.result, c.requested, c.executed) for c in s.tool_calls] for s in trace.steps]


def test_siblings() -> None:
    spans = [agent(), chat(2, 0, 10, calls=[("c1", "t", {})]), tool(3, "t", 20, 30, call_id="c1", result="r"), chat(4, 40, 50, text="done")]
    assert steps(spans) == [[("t", "c1", "r", True, True)], []]


def test_cousins_under_node_spans_matched_by_id() -> None:
    # LangGraph / Koog: agent -> node(llm) ; node(tools) -> tools ; the second tool starts first
    spans = [agent(), span(10, "node.callLLM", 0, 10), chat(2, 1, 9, 10, calls=[("c1", "a", {}), ("c2", "b", {})]),
             span(11, "node.tools", 11, 30), tool(3, "b", 12, 20, 11, call_id="c2", result="rb"),
             tool(4, "a", 13, 20, 11, call_id="c1", result="ra"), span(12, "node.callLLM", 31, 40), chat(5, 32, 39, 12, text="ok")]
    assert steps(spans) == [[("a", "c1", "ra", True, True), ("b", "c2", "rb", True, True)], []]


def test_children_of_the_llm_span_by_ancestry() -> None:
    # ADK: execute_tool nested in call_llm, no id in the model output, a synthetic id on the tool
    spans = [agent(), chat(2, 0, 30, calls=[(None, "t", {})]), tool(3, "t", 20, 25, 2, call_id="adk-1", result="r"), chat(4, 40, 50, text="x")]
    assert steps(spans) == [[("t", "adk-1", "r", True, True)], []]


def test_explicit_step_spans_group_llm_and_tools() -> None:
    # Vercel @ai-sdk/otel: invoke_agent -> step N (agent_step) -> chat, execute_tool
    step = {"gen_ai.operation.name": "agent_step"}
    spans = [agent(), span(10, "step 1", 0, 30, **step), chat(2, 1, 10, 10, calls=[("c1", "t", {})]),
             tool(3, "t", 11, 20, 10, call_id="c1", result="r"), span(11, "step 2", 31, 60, **step), chat(4, 32, 40, 11, text="done")]
    (trace,) = assemble(spans)
    assert [[c.name for c in s.tool_calls] for s in trace.steps] == [["t"], []]
    assert trace.steps[0].span_ids[:2] == [f"{10:016x}", f"{2:016x}"]
    assert trace.final_output == "done"


def test_missing_ids_back_filled_from_the_next_llm_input() -> None:
    # OpenInference-like: neither the model output nor the tool span has an id; the next input does
    history = [{"role": "assistant", "parts": [{"type": "tool_call", "id": "call_9", "name": "t", "arguments": {"x": 1}}]},
               {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_9", "response": "r"}]}]
    spans = [agent(), chat(2, 0, 10, calls=[(None, "t", {"x": 1})]), tool(3, "t", 20, 30, args={"x": 1}, result="r"),
             chat(4, 40, 50, text="done", inputs=history)]
    assert steps(spans) == [[("t", "call_9", "r", True, True)], []]


def test_missing_ids_back_filled_by_result_when_the_request_was_not_captured() -> None:
    history = [{"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_7", "response": "r"}]}]
    spans = [agent(), chat(2, 0, 10), tool(3, "t", 20, 30, result="r"), chat(4, 40, 50, text="done", inputs=history)]
    assert steps(spans)[0] == [("t", "call_7", "r", False, True)]


def test_list_call_ids() -> None:
    # Microsoft Agent Framework: [run id, call id] on both sides
    spans = [agent(), span(2, "chat m", 0, 10, **{"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps(
        [{"role": "assistant", "parts": [{"type": "tool_call", "id": ["run_1", "call_1"], "name": "t", "arguments": {}}]}])}),
        tool(3, "t", 20, 30, call_id=("run_1", "call_1"), result="r"), chat(4, 40, 50, text="x")]
    assert steps(spans) == [[("t", "call_1", "r", True, True)], []]


def test_requested_not_executed_is_kept_without_result() -> None:
    spans = [agent(), chat(2, 0, 10, calls=[("c1", "t", {}), ("c2", "u", {})]), tool(3, "t", 20, 30, call_id="c1", result="r")]
    assert steps(spans) == [[("t", "c1", "r", True, True), ("u", "c2", None, True, False)]]


def test_executed_not_requested_is_flagged() -> None:
    spans = [agent(), chat(2, 0, 10, calls=[("c1", "t", {})]), tool(3, "t", 20, 30, call_id="c1"), tool(4, "other", 20, 30, call_id="zz")]
    (trace,) = assemble(spans)
    (call_t, call_other) = trace.steps[0].tool_calls
    assert (call_other.name, call_other.requested, call_other.executed) == ("other", False, True)
    assert any("not requested" in issue for issue in trace.steps[0].issues)


def test_nested_agent_as_tool_is_its_own_trace_linked_to_the_step() -> None:
    spans = [agent(1, "boss"), chat(2, 0, 10, calls=[("c1", "ask_helper", {})]),
             tool(3, "ask_helper", 20, 80, call_id="c1", result="42"),
             agent(4, "helper", 21, 79, parent=3), chat(5, 22, 30, 4, calls=[("h1", "lookup", {})]),
             tool(6, "lookup", 31, 40, 4, call_id="h1", result="42"), chat(7, 41, 50, 4, text="42"),
             chat(8, 90, 100, text="The answer is 42")]
    (trace,) = assemble(spans)
    assert trace.agent_name == "boss"
    assert [[c.name for c in s.tool_calls] for s in trace.steps] == [["ask_helper"], []]
    (child,) = trace.children
    assert (child.agent_name, child.parent_step_index) == ("helper", 0)
    assert [[c.name for c in s.tool_calls] for s in child.steps] == [["lookup"], []]


def test_stacked_duplicate_llm_spans_are_merged() -> None:
    # OpenInference LLM span (no content) wrapping an OpenAI-instrumentor chat span
    outer = SpanRecord(trace_id=9, span_id=2, parent_span_id=1, name="OpenAIChat.invoke", start_time_unix_nano=0,
                       end_time_unix_nano=20 * MS, attributes={"openinference.span.kind": "LLM", "llm.model_name": "gpt"})
    spans = [agent(), outer, chat(3, 1, 19, 2, calls=[("c1", "t", {})]), tool(4, "t", 21, 30, call_id="c1", result="r"),
             chat(5, 40, 50, text="done")]
    (trace,) = assemble(spans)
    assert len(trace.steps) == 2
    assert trace.steps[0].model == "gpt"
    assert [c.call_id for c in trace.steps[0].tool_calls] == ["c1"]


def test_stacked_tool_spans_are_merged() -> None:
    spans = [agent(), chat(2, 0, 10, calls=[("c1", "t", {})]),
             SpanRecord(trace_id=9, span_id=3, parent_span_id=1, name="t", start_time_unix_nano=20 * MS, end_time_unix_nano=30 * MS,
                        attributes={"openinference.span.kind": "TOOL", "tool.name": "t"}),
             tool(4, "t", 21, 29, 3, call_id="c1", result="r")]
    assert steps(spans) == [[("t", "c1", "r", True, True)]]


def test_parent_cycles_and_duplicate_span_ids_do_not_crash() -> None:
    spans = [span(1, "x", 0, 10, 2, **{"gen_ai.operation.name": "invoke_agent"}), span(2, "y", 0, 10, 1),
             chat(3, 1, 5, 1, text="a"), chat(3, 1, 5, 2, text="duplicate"), tool(4, "t", 6, 7, 4)]
    traces = assemble(spans)
    assert isinstance(traces, list)


def test_content_not_captured() -> None:
    spans = [agent(), span(2, "chat m", 0, 10, **{"gen_ai.operation.name": "chat"}), tool(3, "t", 20, 30)]
    (trace,) = assemble(spans)
    assert trace.content_captured is False
    assert [(c.name, c.requested) for c in trace.steps[0].tool_calls] == [("t", True)]
