"""Span-tree shapes (reference §6.4): where tool spans sit relative to their LLM span."""

from __future__ import annotations

import dataclasses
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


def test_span_ids_are_written_as_16_hex_digits_and_any_other_id_as_percent_x_writes_it() -> None:
    # ids are formatted from their 8 bytes, and by ``%016x`` when they have no 8 bytes (wider, negative)
    ids = {"agent": 1, "chat": 0xAB, "tool": 2**64 - 1, "wide chat": 2**64 + 7, "wide tool": -3}
    spans = [agent(ids["agent"]), chat(ids["chat"], 10, 20, calls=[("c1", "f", {})]),
             tool(ids["tool"], "f", 21, 30, call_id="c1"), chat(ids["wide chat"], 31, 40, calls=[("c2", "g", {})]),
             tool(ids["wide tool"], "g", 41, 50, call_id="c2"), chat(3, 51, 60, text="done")]
    (trace,) = assemble(spans)
    assert trace.agent_span_id == "0000000000000001" and trace.trace_id == f"{9:032x}"
    assert [s.span_ids for s in trace.steps] == [
        ["00000000000000ab", "ffffffffffffffff"], [f"{2**64 + 7:016x}", "-000000000000003"], ["0000000000000003"]]
    assert [[c.span_id for c in s.tool_calls] for s in trace.steps] == [["ffffffffffffffff"], ["-000000000000003"], []]


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


def test_fast_turns_repeating_an_id_less_call_keep_their_own_tool_span() -> None:
    # No call ids (OpenLLMetry/OpenInference LangChain tools): each search(x) belongs to the turn
    # that asked for it, though the next turn, asking for the same call, starts under
    # CLOCK_SKEW_NS (5 ms) after the tool; a later turn only claims it within the skew
    # allowance when no turn that started before the tool asked for it.
    x = {"q": "x"}
    spans = [agent(), chat(2, 0, 1, calls=[(None, "search", x)]), tool(3, "search", 1, 2, args=x, result="r1"),
             chat(4, 2, 3, calls=[(None, "search", x)]), tool(5, "search", 3, 4, args=x, result="r2"),
             chat(6, 4, 5, calls=[(None, "search", x)]), tool(7, "search", 5, 6, args=x, result="r3"),
             chat(8, 6, 7, text="done")]
    assert [[c.result for c in s.tool_calls] for s in assemble(spans)[0].steps] == [["r1"], ["r2"], ["r3"], []]
    skewed = [agent(), chat(2, 3, 4, calls=[(None, "search", x)]), tool(3, "search", 1, 2, args=x, result="r1"),
              chat(4, 10, 11, text="done")]  # the tool's clock is 2 ms behind: still the turn's call
    assert [[c.result for c in s.tool_calls] for s in assemble(skewed)[0].steps] == [["r1"], []]


def test_a_call_no_turn_requested_goes_to_the_turn_before_it_not_a_fast_next_turn() -> None:
    # OpenLLMetry's openai-agents spans (Chat Completions model) record no model output: no turn
    # asks for any call. A quick (failing) tool ends and the next turn starts under CLOCK_SKEW_NS
    # after the tool started; the tool is still the earlier turn's, the one that started before it.
    history = [{"role": "user", "parts": [{"type": "text", "content": "q"}]}]
    spans = [agent(), chat(2, 0, 10, inputs=history), tool(3, "book", 11, 12, args={"n": 2}, result="failed"),
             chat(4, 13, 20, inputs=history)]
    (trace,) = assemble(spans)
    assert [[(c.name, c.result) for c in s.tool_calls] for s in trace.steps] == [[("book", "failed")], []]
    skewed = [agent(), tool(3, "book", 1, 2, result="r"), chat(2, 3, 4, inputs=history)]  # no turn before it
    assert [[c.name for c in s.tool_calls] for s in assemble(skewed)[0].steps] == [["book"]]


def test_a_call_no_turn_requested_is_not_given_to_a_turn_that_started_in_the_same_clock_tick() -> None:
    # JS SDKs (Vercel AI SDK) round start times to the millisecond: without recorded content, the
    # next turn often starts in the tool's millisecond; only turns that started strictly before it
    # can have asked for it.
    spans = [agent(), chat(2, 0, 10), tool(3, "t", 11, 12), chat(4, 11, 20)]
    assert [[c.name for c in s.tool_calls] for s in assemble(spans)[0].steps] == [["t"], []]


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
    (_call_t, call_other) = trace.steps[0].tool_calls
    assert (call_other.name, call_other.requested, call_other.executed) == ("other", False, True)
    assert trace.steps[0].issues == ["tool span 0000000000000004 (other) was not requested by this turn"]


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


def test_a_repeated_call_id_goes_to_the_first_turn_with_that_call_still_open() -> None:
    spans = [agent()]
    for turn in range(2):
        start = 100 * turn
        spans.append(chat(10 + turn, start, start + 5, calls=[("c1", "ping", {"n": turn})]))
        spans.append(tool(20 + turn, "ping", start + 10, start + 12, call_id="c1", args={"n": turn}, result=json.dumps({"turn": turn})))
    spans.append(chat(30, 500, 505, text="pong"))
    (trace,) = assemble(reversed(spans))
    assert [[(c.arguments, c.result, c.span_id) for c in s.tool_calls] for s in trace.steps] == [
        [({"n": 0}, {"turn": 0}, format(20, "016x"))], [({"n": 1}, {"turn": 1}, format(21, "016x"))], []]


def long_run(turns: int, with_ids: bool) -> list[SpanRecord]:
    """``turns`` turns of two parallel calls; the second call's tool span starts first."""
    spans = [agent(end=10_000 * (turns + 1))]
    for turn in range(turns):
        calls = [(f"t{turn}c{i}" if with_ids else None, "lookup", {"turn": turn, "i": i}) for i in range(2)]
        start = 10_000 * turn
        spans.append(chat(100 + turn, start, start + 5, calls=calls))
        for i, (call_id, name, args) in enumerate(calls):
            spans.append(tool(10_000 + 2 * turn + i, name, start + 20 - i, start + 22 - i, call_id=call_id, args=args,
                              result=json.dumps({"turn": turn, "i": i})))
    spans.append(chat(99, 10_000 * turns, 10_000 * turns + 5, text="done"))
    return spans


def test_long_runs_attach_every_tool_span_to_the_call_of_its_own_turn() -> None:
    for with_ids in (True, False):
        (trace,) = assemble(long_run(300, with_ids))
        assert len(trace.steps) == 301
        for turn, step in enumerate(trace.steps[:-1]):
            assert [(c.arguments, c.result, c.executed, c.requested) for c in step.tool_calls] == [
                ({"turn": turn, "i": i}, {"turn": turn, "i": i}, True, True) for i in range(2)]
            assert step.issues == []
        assert trace.steps[-1].output == "done"


def test_parent_cycles_and_duplicate_span_ids_do_not_crash() -> None:
    """A parent cycle ends the ancestry walk, a span that is its own parent is a root, and a second span
    reusing a known id is ignored (the first kept) and counted in the run's issues."""
    spans = [span(1, "x", 0, 10, 2, **{"gen_ai.operation.name": "invoke_agent"}), span(2, "y", 0, 10, 1),  # 1 <-> 2
             chat(3, 1, 5, 1, text="a"), chat(3, 1, 5, 2, text="duplicate"), chat(3, 1, 5, 1, text="a"),  # only the first span 3 is kept
             tool(4, "t", 6, 7, 4)]  # its own parent: a root of its own, no agent above it
    ignored = "1 span(s) reusing a span id already in the trace ignored; the first kept"
    agent_run, tool_run = assemble(spans)
    assert (agent_run.agent_name, agent_run.agent_span_id, agent_run.final_output) == ("x", f"{1:016x}", "a")
    assert [(s.output, s.span_ids, s.tool_calls) for s in agent_run.steps] == [("a", [f"{3:016x}"], [])]
    assert agent_run.issues == [ignored]
    assert (tool_run.agent_name, tool_run.agent_span_id) == ("execute_tool t", f"{4:016x}")  # the local root names an implicit run
    (step,) = tool_run.steps
    assert [(c.name, c.span_id, c.executed) for c in step.tool_calls] == [("t", f"{4:016x}", True)]
    assert step.issues == ["tool spans without any LLM span in this agent; grouped into one step"]
    assert tool_run.issues == [ignored]
    assert "duplicate" not in agent_run.model_dump_json() + tool_run.model_dump_json()


def test_content_not_captured() -> None:
    spans = [agent(), span(2, "chat m", 0, 10, **{"gen_ai.operation.name": "chat"}), tool(3, "t", 20, 30)]
    (trace,) = assemble(spans)
    assert trace.content_captured is False
    assert [(c.name, c.requested) for c in trace.steps[0].tool_calls] == [("t", True)]


# --- results echoed to the model, event-only content -------------------------------------------

ECHO = [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "t", "arguments": {"x": 1}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "Error: boom"}]}]


def test_result_echoed_to_the_model_when_the_tool_span_has_none() -> None:
    # a failed tool: ERROR span, no result attribute; the app told the model "Error: boom"
    failed = tool(3, "t", 20, 30, call_id="c1", args={"x": 1})
    failed = dataclasses.replace(failed, status_code="ERROR", status_message="boom")
    spans = [agent(), chat(2, 0, 10, calls=[("c1", "t", {"x": 1})]), failed, chat(4, 40, 50, text="sorry", inputs=ECHO)]
    (trace,) = assemble(spans)
    (call_t,) = trace.steps[0].tool_calls
    assert (call_t.result, call_t.arguments) == ("Error: boom", {"x": 1})


def test_echoed_result_needs_the_same_tool_name_in_another_scope() -> None:
    # the later model call belongs to an unrelated agent that reuses the id "c1" for another tool
    other = [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "other", "arguments": {}}]},
             {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "not mine"}]}]
    spans = [agent(1, "a", 0, 35), chat(2, 0, 10, calls=[("c1", "t", {})]), tool(3, "t", 20, 30, call_id="c1"),
             agent(10, "b", 40, 100), chat(11, 41, 50, 10, text="x", inputs=other)]
    first = next(t for t in assemble(spans) if t.agent_name == "a")
    assert first.steps[0].tool_calls[0].result is None


def test_event_only_content_with_tuples_gives_the_same_steps_as_span_attributes() -> None:
    from types import MappingProxyType

    from otel_agent_eval.pipeline.completion import join_log_records
    from otel_agent_eval.records import LogRecordData

    def frozen(value):  # what the SDK / OTLP decoding hands over: tuples and read-only mappings
        if isinstance(value, dict):
            return MappingProxyType({k: frozen(v) for k, v in value.items()})
        if isinstance(value, list):
            return tuple(frozen(v) for v in value)
        return value

    out1 = [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "t", "arguments": {"x": 1}}]}]
    out2 = [{"role": "assistant", "parts": [{"type": "text", "content": "done"}]}]
    user = [{"role": "user", "parts": [{"type": "text", "content": "go"}]}]
    span_only = [agent(), span(2, "chat m", 0, 10, **{"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(user),
                                                       "gen_ai.output.messages": json.dumps(out1)}),
                 tool(3, "t", 20, 30, call_id="c1", args={"x": 1}, result="Error: boom"),
                 span(4, "chat m", 40, 50, **{"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(user + ECHO),
                                              "gen_ai.output.messages": json.dumps(out2)})]
    bare = [agent(), span(2, "chat m", 0, 10, **{"gen_ai.operation.name": "chat"}), tool(3, "t", 20, 30, call_id="c1"),
            span(4, "chat m", 40, 50, **{"gen_ai.operation.name": "chat"})]
    logs = [LogRecordData(trace_id=9, span_id=sid, time_unix_nano=t, event_name="gen_ai.client.inference.operation.details",
                          attributes=frozen({"gen_ai.input.messages": i, "gen_ai.output.messages": o}), body=None)
            for sid, t, i, o in ((2, 10, user, out1), (4, 50, user + ECHO, out2))]
    event_only = join_log_records(bare, logs)

    def shape(spans):
        (trace,) = assemble(spans)
        return trace.input, trace.final_output, trace.content_captured, [
            (s.output, [(c.name, c.arguments, c.result, c.call_id, c.executed) for c in s.tool_calls]) for s in trace.steps]

    assert shape(event_only) == shape(span_only) == (
        "go", "done", True, [(None, [("t", {"x": 1}, "Error: boom", "c1", True)]), ("done", [])])


# --- OpenInference agent graphs: turn nodes, handoffs ----------------------------------------------


def oi(span_id: int, name: str, kind: str, start: int, end: int, parent: int | None, **attrs) -> SpanRecord:
    return span(span_id, name, start, end, parent, **{"openinference.span.kind": kind, **attrs})


def oi_llm(span_id: int, start: int, end: int, parent: int, calls=(), text: str | None = None) -> SpanRecord:
    attrs = {"llm.model_name": "m", "llm.output_messages.0.message.role": "assistant"}
    if text:
        attrs["llm.output_messages.0.message.content"] = text
    for j, (call_id, name, args) in enumerate(calls):
        prefix = f"llm.output_messages.0.message.tool_calls.{j}.tool_call."
        attrs.update({prefix + "id": call_id, prefix + "function.name": name, prefix + "function.arguments": json.dumps(args)})
    return oi(span_id, "ChatModel", "LLM", start, end, parent, **attrs)


def oi_tool(span_id: int, name: str, start: int, end: int, parent: int, arg, result) -> SpanRecord:
    return oi(span_id, name, "TOOL", start, end, parent, **{"tool.name": name, "input.value": arg, "output.value": result})


def tool_message(content: str, call_id: str) -> str:
    return json.dumps({"type": "tool", "data": {"content": content, "tool_call_id": call_id, "status": "success"}})


def test_agent_kind_graph_nodes_are_turns_of_the_graph_run() -> None:
    # LangGraph + OpenInference without node metadata: root graph (CHAIN) -> "agent" (AGENT, one per turn)
    # -> LLM; "tools" (CHAIN) -> TOOL. The agent nodes' requested calls run outside them.
    state_in = json.dumps({"messages": [["user", "Find x."]]})
    state_out = json.dumps({"messages": [{"type": "human", "data": {"content": "Find x."}},
                                         {"type": "ai", "data": {"content": "Nothing."}}]})
    spans = [oi(1, "researcher", "CHAIN", 0, 100, None, **{"input.value": state_in, "output.value": state_out}),
             oi(2, "agent", "AGENT", 0, 10, 1), oi_llm(3, 1, 9, 2, calls=[("c1", "search", {"query": "x"})]),
             oi(4, "tools", "CHAIN", 11, 20, 1), oi_tool(5, "search", 12, 19, 4, "x", tool_message("no results", "c1")),
             oi(6, "agent", "AGENT", 21, 30, 1), oi_llm(7, 22, 29, 6, text="Nothing.")]
    (trace,) = assemble(spans)
    assert (trace.agent_name, trace.agent_span_id, trace.input, trace.final_output) == ("researcher", f"{1:016x}", "Find x.", "Nothing.")
    assert [[(c.name, c.arguments, c.result, c.call_id) for c in s.tool_calls] for s in trace.steps] == [
        [("search", {"query": "x"}, "no results", "c1")], []]
    assert trace.children == []


def test_langgraph_node_metadata_marks_a_single_turn_node() -> None:
    meta = json.dumps({"langgraph_node": "agent", "langgraph_step": 1})
    spans = [oi(1, "LangGraph", "CHAIN", 0, 100, None), oi(2, "agent", "AGENT", 0, 10, 1, metadata=meta),
             oi_llm(3, 1, 9, 2, text="hi")]
    (trace,) = assemble(spans)
    assert (trace.agent_name, [s.output for s in trace.steps]) == ("LangGraph", ["hi"])


def test_a_turn_node_is_found_when_another_agent_runs_a_tool_of_its_own() -> None:
    # ``TurnNodes`` answers its common case (every agent the parent of a tool span) before walking the trace:
    # here one agent has a tool span of its own and the other, a LangGraph turn node, has none
    meta = json.dumps({"langgraph_node": "agent", "langgraph_step": 1})
    spans = [oi(1, "boss", "AGENT", 0, 100, None, **{"agent.name": "boss"}), oi_tool(2, "lookup", 1, 5, 1, "x", "y"),
             oi(3, "agent", "AGENT", 10, 20, 1, metadata=meta), oi_llm(4, 11, 19, 3, text="hi")]
    (trace,) = assemble(spans)
    assert (trace.agent_name, [s.thought for s in trace.steps], trace.children) == ("boss", ["hi"], [])


def test_an_agent_that_answers_by_itself_stays_an_agent() -> None:
    # agent-as-tool with a single model call and no tool: a real nested agent, not a turn node
    spans = [oi(1, "boss", "AGENT", 0, 100, None, **{"agent.name": "boss"}), oi_llm(2, 0, 10, 1, calls=[("c1", "helper", {"q": 1})]),
             oi_tool(3, "helper", 11, 50, 1, json.dumps({"q": 1}), "42"), oi(4, "helper", "AGENT", 12, 49, 3, **{"agent.name": "helper"}),
             oi_llm(5, 13, 48, 4, text="42"), oi_llm(6, 60, 70, 1, text="It is 42.")]
    (trace,) = assemble(spans)
    (child,) = trace.children
    assert (trace.agent_name, child.agent_name, child.parent_step_index, child.final_output) == ("boss", "helper", 0, "42")


def test_handoff_target_sibling_is_linked_to_the_step_that_handed_off() -> None:
    # OpenAI Agents + OpenInference: workflow -> source, target (siblings); target names its parent node;
    # the handoff TOOL span fulfils the requested transfer call; its result is what the target model was sent
    echo = {"llm.input_messages.0.message.role": "assistant",
            "llm.input_messages.0.message.tool_calls.0.tool_call.id": "c9",
            "llm.input_messages.0.message.tool_calls.0.tool_call.function.name": "transfer_to_booker",
            "llm.input_messages.1.message.role": "tool", "llm.input_messages.1.message.tool_call_id": "c9",
            "llm.input_messages.1.message.content": json.dumps({"assistant": "booker"})}
    target_llm = oi_llm(7, 61, 70, 6, text="Booked.")
    target_llm = dataclasses.replace(target_llm, attributes={**target_llm.attributes, **echo})
    spans = [oi(1, "Agent workflow", "AGENT", 0, 100, None),
             oi(2, "concierge", "AGENT", 0, 50, 1, **{"agent.name": "concierge", "graph.node.id": "concierge"}),
             oi_llm(3, 1, 10, 2, calls=[("c9", "transfer_to_booker", {})]),
             oi(4, "handoff to booker", "TOOL", 11, 12, 2, **{"input.value": "concierge", "output.value": "booker"}),
             oi(6, "booker", "AGENT", 60, 90, 1, **{"agent.name": "booker", "graph.node.id": "booker", "graph.node.parent_id": "concierge"}),
             target_llm]
    (trace,) = assemble(spans)
    (call_t,) = trace.steps[0].tool_calls
    assert (call_t.name, call_t.arguments, call_t.result, call_t.span_id, call_t.requested) == (
        "transfer_to_booker", {}, {"assistant": "booker"}, f"{4:016x}", True)
    (child,) = trace.children
    assert (child.agent_name, child.parent_step_index, child.final_output) == ("booker", 0, "Booked.")


def test_a_transfer_tool_links_the_sibling_agent_it_names_to_its_step() -> None:
    # Strands swarm / ADK transfer_to_agent: swarm -> triage, weather (siblings); triage's tool names weather.
    # Event-only content: the name comes from the model's request when the tool span has no arguments.
    strands = {"gen_ai.provider.name": "strands-agents"}
    swarm = span(1, "invoke_swarm", 0, 200, None)
    for with_arguments in (True, False):
        spans = [swarm, agent(2, "triage", 0, 50, 1), agent(5, "other", 0, 40, 1),
                 chat(3, 1, 10, 2, calls=[("h1", "handoff_to_agent", {"agent_name": "weather"})]),
                 tool(4, "handoff_to_agent", 11, 12, 2, call_id="h1", args={"agent_name": "weather"} if with_arguments else None),
                 chat(6, 20, 30, 2, text="handed off"), agent(7, "weather", 60, 100, 1), chat(8, 61, 70, 7, text="rainy")]
        spans = [dataclasses.replace(s, attributes={**s.attributes, **strands}) for s in spans]
        traces = {t.agent_name: t for t in assemble(spans)}
        assert set(traces) == {"triage", "other"}
        (child,) = traces["triage"].children
        assert (child.agent_name, child.parent_step_index, child.final_output) == ("weather", 0, "rainy")


def test_openllmetry_sibling_agents_are_linked_by_tool_time_and_handoff_span() -> None:
    # OpenLLMetry openai-agents: every agent span under the workflow; one ran inside a tool span of its
    # name, the next started after a handoff span that does not name it
    def tl(s: SpanRecord, kind: str) -> SpanRecord:
        return dataclasses.replace(s, attributes={**s.attributes, "traceloop.span.kind": kind})

    spans = [tl(span(1, "Agent Workflow", 0, 200, None), "workflow"), tl(agent(2, "boss", 0, 100, 1), "agent"),
             chat(3, 1, 10, 2), tl(tool(4, "expert", 11, 40, 2, args={"input": "q"}, result="a"), "tool"),
             tl(agent(5, "expert", 12, 39, 1), "agent"), chat(6, 13, 38, 5, text="a"), chat(7, 41, 50, 2),
             tl(span(8, "boss → unknown.handoff", 51, 52, 2, **{"gen_ai.handoff.from_agent": "boss"}), "handoff"),
             tl(agent(9, "booker", 60, 90, 1), "agent"), chat(10, 61, 89, 9, text="booked")]
    (trace,) = assemble(spans)
    assert [(c.agent_name, c.parent_step_index) for c in trace.children] == [("expert", 0), ("booker", 1)]


def turn(span_id: int, agent_name: str, start: int, end: int, parent: int = 1) -> SpanRecord:
    """A LlamaIndex ``run_agent_step`` CHAIN span: its input event names the agent."""
    event = json.dumps({"ctx": "<Context>", "ev": f"AgentSetup(input=[2 items], current_agent_name='{agent_name}')"})
    return oi(span_id, "AgentWorkflow.run_agent_step", "CHAIN", start, end, parent, **{"input.value": event})


def test_llamaindex_agent_turns_are_one_run_per_agent_and_a_handoff_links_them() -> None:
    # LlamaIndex AgentWorkflow + OpenInference: no AGENT span; per response a run_agent_step CHAIN span whose
    # input event names the agent, the tools beside it under call_tool
    spans = [oi(1, "AgentWorkflow.run", "CHAIN", 0, 100, None, **{"output.value": "StopEvent(result=...)"}),
             turn(2, "planner", 0, 10), oi_llm(3, 1, 9, 2, calls=[("c1", "search", {"q": "x"})]),
             oi(4, "AgentWorkflow.call_tool", "CHAIN", 11, 20, 1), oi_tool(5, "search", 12, 19, 4, json.dumps({"q": "x"}), "r"),
             turn(6, "planner", 21, 30), oi_llm(7, 22, 29, 6, calls=[("c2", "handoff", {"to_agent": "helper"})]),
             oi(8, "AgentWorkflow.call_tool", "CHAIN", 31, 40, 1),
             oi_tool(9, "handoff", 32, 39, 8, json.dumps({"to_agent": "helper"}), "handed off"),
             turn(10, "helper", 41, 50), oi_llm(11, 42, 49, 10, text="42")]
    (planner,) = assemble(spans)
    assert (planner.agent_name, planner.agent_span_id, [[c.name for c in s.tool_calls] for s in planner.steps]) == (
        "planner", f"{1:016x}", [["search"], ["handoff"]])
    (helper,) = planner.children
    assert (helper.agent_name, helper.agent_span_id, helper.parent_step_index, helper.final_output) == (
        "helper", f"{10:016x}", 1, "42")


def test_an_exception_event_makes_a_tool_call_an_error_even_with_an_ok_status_and_a_result() -> None:
    from otel_agent_eval.records import SpanEvent

    raised = SpanEvent(name="exception", time_unix_nano=15 * MS,
                       attributes={"exception.type": "ValueError", "exception.message": "bad city"})
    handoff = SpanEvent(name="exception", time_unix_nano=15 * MS, attributes={"exception.type": "ParentCommand"})
    for events, error in (((raised,), "ValueError: bad city"), ((handoff,), None), ((), None)):
        failed = dataclasses.replace(tool(3, "t", 11, 20, call_id="c1", result="Error: bad city"), events=events)
        spans = [agent(), chat(2, 0, 10, calls=[("c1", "t", {})]), failed, chat(4, 30, 40, text="ok")]
        (trace,) = assemble(spans)
        (call_t,) = trace.steps[0].tool_calls
        assert (call_t.error, call_t.result) == (error, "Error: bad city")


def test_the_last_response_without_output_takes_the_answer_recorded_on_the_agent_span() -> None:
    # Semantic Kernel without its log records: chat spans record no content, the agent span the answer
    answer = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Sunny."}]}])
    root = dataclasses.replace(agent(), attributes={**agent().attributes, "gen_ai.output.messages": answer})
    bare = {"gen_ai.operation.name": "chat"}
    spans = [root, span(2, "chat m", 0, 10, **bare), tool(3, "t", 11, 20, call_id="c1", result="r"), span(4, "chat m", 30, 40, **bare)]
    (trace,) = assemble(spans)
    assert [s.output for s in trace.steps] == [None, "Sunny."]
    assert trace.final_output == "Sunny."


def test_a_call_the_framework_refused_to_run_is_an_error_with_the_text_sent_instead() -> None:
    # Vercel AI SDK: arguments the tool's schema rejects run no tool; the next call's input has an error-text result
    def ai(span_id: int, operation: str, start: int, end: int, parent: int | None, **attrs) -> SpanRecord:
        return span(span_id, operation, start, end, parent, **{"ai.operationId": operation, **attrs})

    calls = json.dumps([{"toolCallId": "c1", "toolName": "book", "input": json.dumps({"restaurant": "X"})}])
    sent = "Invalid input for tool book: people is required"
    history = json.dumps([
        {"role": "user", "content": [{"type": "text", "text": "Book X."}]},
        {"role": "assistant", "content": [{"type": "tool-call", "toolCallId": "c1", "toolName": "book", "input": {"restaurant": "X"}}]},
        {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "c1", "toolName": "book",
                                      "output": {"type": "error-text", "value": sent}}]}])
    spans = [ai(1, "ai.generateText", 0, 100, None), ai(2, "ai.generateText.doGenerate", 1, 10, 1, **{"ai.response.toolCalls": calls}),
             ai(3, "ai.generateText.doGenerate", 11, 20, 1, **{"ai.prompt.messages": history, "ai.response.text": "How many?"})]
    (trace,) = assemble(spans)
    (refused,) = trace.steps[0].tool_calls
    assert (refused.requested, refused.executed, refused.result, refused.error) == (True, False, sent, sent)


def test_an_agent_span_around_one_of_the_same_agent_is_that_agent_when_a_handoff_moves_it() -> None:
    # AutoGen + OpenInference Swarm: native invoke_agent -> OpenInference AGENT span of the same agent; the
    # target names its source (graph.node.parent_id); AutoGen relays the handoff to its model as a user message
    question = {"role": "user", "content": "Weather in Oslo?"}
    relay = {"role": "user", "content": "Transferred to helper, adopting the role of helper immediately."}
    spans = [span(1, "run", 0, 100, None),
             agent(2, "boss", 0, 40, 1), oi(3, "boss.on_messages_stream", "AGENT", 1, 39, 2, **{"graph.node.id": "boss"}),
             chat(4, 2, 10, 3, calls=[("c1", "transfer_to_helper", {})], inputs=[question]),
             agent(5, "helper", 50, 90, 1),
             oi(6, "helper.on_messages_stream", "AGENT", 51, 89, 5, **{"graph.node.id": "helper", "graph.node.parent_id": "boss"}),
             chat(7, 52, 60, 6, text="Rainy.", inputs=[question, relay])]
    (boss,) = assemble(spans)
    (helper,) = boss.children
    assert (boss.agent_span_id, helper.agent_span_id) == (f"{3:016x}", f"{6:016x}")
    assert (helper.agent_name, helper.input, helper.final_output) == ("helper", "Weather in Oslo?", "Rainy.")


def test_an_agent_that_ran_inside_a_transfer_tool_span_is_a_child_run() -> None:
    # CrewAI + OpenInference delegation: no AGENT span for the coworker, its spans under the delegation tool
    args = {"task": "Find x.", "coworker": "helper"}
    delegate = oi_tool(3, "Delegate work to coworker", 11, 50, 1, json.dumps(args), "x is 42")
    delegate = dataclasses.replace(delegate, attributes={
        **delegate.attributes, "tool.description": "Tool Name: delegate_work_to_coworker\nTool Arguments: {}"})
    spans = [oi(1, "boss", "AGENT", 0, 100, None), oi_llm(2, 0, 10, 1, calls=[("c1", "delegate_work_to_coworker", args)]),
             delegate, oi_llm(4, 12, 20, 3, calls=[("c2", "search", {"q": "x"})]),
             oi_tool(5, "search", 21, 25, 3, json.dumps({"q": "x"}), "42"), oi_llm(6, 26, 40, 3, text="x is 42"),
             oi_llm(7, 60, 70, 1, text="Done: 42")]
    (boss,) = assemble(spans)
    assert [[(c.name, c.result) for c in s.tool_calls] for s in boss.steps] == [[("delegate_work_to_coworker", "x is 42")], []]
    (helper,) = boss.children
    assert (helper.agent_name, helper.agent_span_id, helper.parent_step_index, helper.final_output) == (
        "helper", f"{3:016x}", 0, "x is 42")
    assert [[(c.name, c.result) for c in s.tool_calls] for s in helper.steps] == [[("search", "42")], []]


def test_llamaindex_agent_run_inside_another_agents_tool_is_its_child() -> None:
    # a LlamaIndex agent run by another agent's tool: boss (AGENT) -> tool -> FunctionAgent.run -> turns, call_tool
    spans = [oi(1, "boss", "AGENT", 0, 100, None), oi_llm(2, 0, 5, 1, calls=[("c1", "ask", {"q": "x"})]),
             oi_tool(3, "ask", 6, 60, 1, json.dumps({"q": "x"}), "42"), oi(4, "FunctionAgent.run", "CHAIN", 7, 59, 3),
             turn(5, "helper", 8, 20, 4), oi_llm(6, 9, 19, 5, calls=[("c2", "search", {"q": "x"})]),
             oi(7, "FunctionAgent.call_tool", "CHAIN", 21, 30, 4), oi_tool(8, "search", 22, 29, 7, json.dumps({"q": "x"}), "42"),
             turn(9, "helper", 31, 50, 4), oi_llm(10, 32, 49, 9, text="42"), oi_llm(11, 70, 80, 1, text="It is 42.")]
    (boss,) = assemble(spans)
    assert [[c.name for c in s.tool_calls] for s in boss.steps] == [["ask"], []]
    (helper,) = boss.children
    assert (helper.agent_name, helper.agent_span_id, helper.parent_step_index, helper.final_output) == (
        "helper", f"{5:016x}", 0, "42")
    assert [[(c.name, c.result) for c in s.tool_calls] for s in helper.steps] == [[("search", "42")], []]


def test_openinference_tool_error_from_span_status() -> None:
    failed = oi_tool(3, "t", 11, 20, 1, json.dumps({"a": 1}), "An error occurred.")
    failed = dataclasses.replace(failed, status_code="ERROR", status_message="Error running tool")
    spans = [oi(1, "a", "AGENT", 0, 100, None), oi_llm(2, 0, 10, 1, calls=[("c1", "t", {"a": 1})]), failed, oi_llm(4, 30, 40, 1, text="ok")]
    (trace,) = assemble(spans)
    (call_t,) = trace.steps[0].tool_calls
    assert (call_t.error, call_t.result) == ("Error running tool", "An error occurred.")


def test_architecture_doc_states_the_assembly_rules_as_built() -> None:
    """docs/architecture.md repeats the numbered rules of assembly/core.py's docstring: keep them one text."""
    import importlib
    from pathlib import Path

    doc = importlib.import_module("otel_agent_eval.assembly.core").__doc__ or ""
    rules = doc[doc.index("1. Read every span"):].strip()
    architecture = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    assert rules in architecture, "docs/architecture.md 'Assembly' is stale: paste the rules from assembly/core.py's docstring"


def test_a_run_whose_agent_span_is_missing_is_partial_and_gets_result_ids_of_its_own() -> None:
    """The half of a run cut off from its agent span (a ring change sent the agent span to
    another replica) is keyed by that span's id like the other half, but flagged partial, so
    the two halves' result ids differ."""
    from otel_agent_eval.evaluators import StepBudget

    whole = [agent(1), chat(2, 10, 20, calls=[("c1", "add", {"a": 1})]), tool(3, "add", 30, 40, call_id="c1", result="2")]
    (full,) = assemble(whole)
    (orphan,) = assemble(whole[1:])  # the agent span went elsewhere
    assert (full.partial, orphan.partial) == (False, True)
    assert full.agent_span_id == orphan.agent_span_id
    evaluator = StepBudget(max_steps=5)
    assert evaluator.evaluate(full)[0].result_id != evaluator.evaluate(orphan)[0].result_id


def test_tools_run_for_a_turn_that_wrote_its_tool_use_as_text_are_its_requested_calls() -> None:
    """ReAct and code agents: the model answers with text (an ``Action:`` or code), no structured
    call; the tool spans run under that turn are its calls, requested, without call ids or issues.
    A turn whose output holds neither text nor calls (not captured) still flags them."""
    spans = [agent(), chat(2, 0, 10, text="Action: t\nAction Input: {}"), tool(3, "t", 20, 30, args={}, result="r"),
             chat(4, 40, 50, text="done")]
    (trace,) = assemble(spans)
    assert steps(spans)[0] == [("t", None, "r", True, True)]
    assert trace.steps[0].issues == []
