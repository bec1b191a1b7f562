"""A model call's input messages are parsed when assembly reads them.

``gen_ai.input.messages`` (system prompt + history, repeated on every chat span) is read
for the task text, to back-fill a call id or result, or when another dialect fills the
field; its issues then appear on the step of the call they belong to, in the order an
eager parse gave. An input nobody reads is never parsed, so a malformed one there reports
no issue. OpenInference's flattened and the indexed ``gen_ai.prompt.*`` inputs likewise.
"""

from __future__ import annotations

import json
from typing import Any

from otel_agent_eval import assemble
from otel_agent_eval.assembly.dialects import read_operation
from otel_agent_eval.records import SpanRecord

MS = 1_000_000
BROKEN = '[{"role": "user", "parts": [{"type": "text", "content": "hi"}}]'  # brackets crossed: malformed JSON
BROKEN_ISSUES = ["gen_ai.input.messages: malformed JSON", "gen_ai.input.messages: expected a list of messages, got str"]


def starts(issues: list[str]) -> list[str]:
    """Issues without the parser's detail (the text after the first parenthesis)."""
    return [issue.split(" (")[0] for issue in issues]


def span(span_id: int, name: str, start: int, end: int, parent: int | None = 1, **attributes: Any) -> SpanRecord:
    """A span; times in milliseconds."""
    return SpanRecord(trace_id=9, span_id=span_id, parent_span_id=parent, name=name,
                      start_time_unix_nano=start * MS, end_time_unix_nano=end * MS, attributes=attributes)


def text(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


def requests(*calls: tuple[str | None, str, dict[str, Any]]) -> dict[str, Any]:
    parts = [{"type": "tool_call", "name": name, "arguments": args} | ({"id": call_id} if call_id else {})
             for call_id, name, args in calls]
    return {"role": "assistant", "parts": parts}


def agent(**attributes: Any) -> SpanRecord:
    return span(1, "invoke_agent helper", 0, 1000, None, **{"gen_ai.operation.name": "invoke_agent",
                                                            "gen_ai.agent.name": "helper", **attributes})


def chat(span_id: int, start: int, inputs: Any, outputs: list[dict[str, Any]]) -> SpanRecord:
    return span(span_id, "chat m", start, start + 5, **{
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
        "gen_ai.input.messages": inputs if isinstance(inputs, str) else json.dumps(inputs),
        "gen_ai.output.messages": json.dumps(outputs)})


def tool(span_id: int, start: int, name: str, args: dict[str, Any], result: Any, call_id: str | None = None) -> SpanRecord:
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                  "gen_ai.tool.call.arguments": json.dumps(args), "gen_ai.tool.call.result": json.dumps(result)}
    if call_id is not None:
        attributes["gen_ai.tool.call.id"] = call_id
    return span(span_id, f"execute_tool {name}", start, start + 2, **attributes)


def two_turns(second_input: Any) -> list[SpanRecord]:
    """Ask, one tool call with an id and a result, answer."""
    ask = text("user", "weather in Paris?")
    call = requests(("c1", "weather", {"city": "Paris"}))
    return [
        agent(**{"gen_ai.input.messages": json.dumps([ask])}),
        chat(2, 10, [ask], [call]),
        tool(3, 20, "weather", {"city": "Paris"}, {"sky": "rain"}, "c1"),
        chat(4, 30, second_input, [text("assistant", "Rain.")]),
    ]


def test_an_input_no_one_needs_is_not_parsed_so_its_malformed_json_reports_nothing() -> None:
    (broken,) = assemble(two_turns(BROKEN))
    (valid,) = assemble(two_turns([text("user", "weather in Paris?")]))
    assert broken.steps == valid.steps
    assert not any(issue for step in broken.steps for issue in step.issues)
    assert (broken.input, broken.final_output) == ("weather in Paris?", "Rain.")


def test_the_first_input_read_for_the_task_reports_its_issue_before_the_output_issue() -> None:
    # No input on the agent span: the task text comes from the first model call's input.
    nameless = {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "arguments": {}}]}
    (trace,) = assemble([agent(), chat(2, 10, BROKEN, [nameless]), chat(4, 30, [], [text("assistant", "Done.")])])
    assert trace.input is None
    assert starts(trace.steps[0].issues) == BROKEN_ISSUES + ["gen_ai.output.messages: tool_call part without a name"]


def test_a_later_input_read_to_back_fill_a_call_id_reports_its_issue_on_its_step() -> None:
    ask = text("user", "weather in Paris?")
    call = requests((None, "weather", {"city": "Paris"}))  # the model output has no call id
    echoed = [ask, "not a message", requests(("c7", "weather", {"city": "Paris"})),
              {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c7", "response": {"sky": "rain"}}]}]
    (trace,) = assemble([
        agent(**{"gen_ai.input.messages": json.dumps([ask])}),
        chat(2, 10, [ask], [call]),
        tool(3, 20, "weather", {"city": "Paris"}, {"sky": "rain"}),
        chat(4, 30, echoed, [text("assistant", "Rain.")]),
    ])
    assert trace.steps[0].tool_calls[0].call_id == "c7"
    assert trace.steps[0].issues == []
    assert trace.steps[1].issues == ["gen_ai.input.messages: skipped a message that is not an object"]


def test_read_operation_parses_the_input_on_first_read_and_puts_its_issue_first() -> None:
    op = read_operation(span(2, "chat m", 0, 1, None, **{
        "gen_ai.operation.name": "chat", "gen_ai.input.messages": "[1 2",
        "gen_ai.output.messages": '[{"role": "assistant"]'}))
    assert op is not None
    output_issues = ["gen_ai.output.messages: malformed JSON", "gen_ai.output.messages: expected a list of messages, got str"]
    assert starts(op.issues) == output_issues
    assert op.input_messages is None
    assert starts(op.issues) == [
        "gen_ai.input.messages: malformed JSON", "gen_ai.input.messages: expected a list of messages, got str", *output_issues]
    assert op.input_messages is None and len(op.issues) == 4  # parsed once


def test_a_later_dialect_still_fills_the_input_semconv_could_not_parse() -> None:
    op = read_operation(span(2, "chat m", 0, 1, None, **{
        "gen_ai.operation.name": "chat", "gen_ai.input.messages": BROKEN, "gen_ai.prompt": "hello there"}))
    assert op is not None
    assert [(m.role, m.text) for m in op.input_messages] == [("user", "hello there")]
    assert starts(op.issues) == BROKEN_ISSUES


def test_a_tool_input_is_read_eagerly_for_its_arguments() -> None:
    # Strands latest mode: a tool span records its call as messages.
    op = read_operation(span(3, "execute_tool weather", 0, 1, None, **{
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.input.messages": json.dumps([requests(("c1", "weather", {"city": "Paris"}))])}))
    assert op is not None
    assert (op.tool_name, op.tool_arguments, op.tool_call_ids) == ("weather", {"city": "Paris"}, ["c1"])


def test_flattened_and_indexed_inputs_are_parsed_when_read() -> None:
    """OpenInference ``llm.input_messages.*`` and the indexed ``gen_ai.prompt.*`` (the history on every
    model call) are parsed on first read, to the messages an eager parse gave; outputs are read at once."""
    openinference = span(2, "ChatCompletion", 0, 5, **{
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "weather in Paris?",
        "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": "Sunny."})
    indexed = span(3, "ChatOpenAI.chat", 0, 5, **{
        "llm.request.type": "chat",
        "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "weather in Paris?",
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "Sunny."})
    for record in (openinference, indexed):
        op = read_operation(record)
        assert op is not None and op._pending_input is not None and op.output_text() == "Sunny."
        assert [(m.role, m.text) for m in op.input_messages or []] == [("user", "weather in Paris?")]
        assert op._pending_input is None
