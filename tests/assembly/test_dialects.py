"""Each dialect reads the same agent behaviour into the same steps.

Scenario everywhere: the model asks for two parallel calls (get_weather Paris, get_time
Paris), both tools run, the model answers. Attribute names mirror what the real
instrumentations emit (sources cited per builder).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from otel_agent_eval import assemble
from otel_agent_eval.assembly.dialects import (
    DIALECTS,
    GENAI_MARKERS,
    adk,
    detected,
    is_genai,
    legacy,
    openinference,
    pydantic_ai,
    read_operation,
    semconv,
    traceloop,
    vercel,
)
from otel_agent_eval.records import STATUS_ERROR, SpanEvent, SpanRecord

QUESTION = "Weather and time in Paris?"
ANSWER = "Rainy, 57°F; it is 10:00."
CALLS = [("call_1", "get_weather", {"city": "Paris"}, "rainy, 57°F"), ("call_2", "get_time", {"city": "Paris"}, "10:00")]


MS = 1_000_000


def span(span_id: int, name: str, start: int, end: int, parent: int | None = 1, **kw) -> SpanRecord:
    """A span; times in milliseconds."""
    return SpanRecord(trace_id=7, span_id=span_id, parent_span_id=parent, name=name,
                      start_time_unix_nano=start * MS, end_time_unix_nano=end * MS, **kw)


def structure(spans: list[SpanRecord]) -> list[tuple]:
    (trace,) = assemble(spans)
    return [
        (step.output, [(c.name, c.arguments, c.result, c.call_id, c.requested, c.executed) for c in step.tool_calls])
        for step in trace.steps
    ]


EXPECTED = [
    (None, [(n, a, r, i, True, True) for i, n, a, r in CALLS]),
    (ANSWER, []),
]


def semconv_spans() -> list[SpanRecord]:
    # OTel GenAI semconv v1.37+ (pydantic-ai v5, Microsoft Agent Framework, openai-v2 SPAN_ONLY)
    requested = [{"role": "assistant", "parts": [
        {"type": "tool_call", "id": i, "name": n, "arguments": a} for i, n, a, _ in CALLS]}]
    results = [{"role": "tool", "parts": [{"type": "tool_call_response", "id": i, "response": r} for i, _, _, r in CALLS]}]
    user = [{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]
    return [
        span(1, "invoke_agent weather", 0, 100, None, attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather"}),
        span(2, "chat gpt-4o", 1, 10, attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
             "gen_ai.input.messages": json.dumps(user), "gen_ai.output.messages": json.dumps(requested)}),
        *[span(3 + k, f"execute_tool {n}", 11, 20, attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": n,
               "gen_ai.tool.call.id": i, "gen_ai.tool.call.arguments": json.dumps(a), "gen_ai.tool.call.result": r})
          for k, (i, n, a, r) in enumerate(CALLS)],
        span(9, "chat gpt-4o", 21, 30, attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
             "gen_ai.input.messages": json.dumps(user + requested + results),
             "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}])}),
    ]


def legacy_indexed_spans() -> list[SpanRecord]:
    # OpenLLMetry <= 0.54 (opentelemetry-instrumentation-openai span_utils) + traceloop-sdk @agent/@tool
    first = {"llm.request.type": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o",
             "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": QUESTION,
             "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.finish_reason": "tool_calls"}
    for j, (i, n, a, _) in enumerate(CALLS):
        first |= {f"gen_ai.completion.0.tool_calls.{j}.id": i, f"gen_ai.completion.0.tool_calls.{j}.name": n,
                  f"gen_ai.completion.0.tool_calls.{j}.arguments": json.dumps(a)}
    second = {"llm.request.type": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o",
              "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": QUESTION,
              "gen_ai.prompt.1.role": "tool", "gen_ai.prompt.1.content": "rainy, 57°F", "gen_ai.prompt.1.tool_call_id": "call_1",
              "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": ANSWER}
    return [
        span(1, "weather.agent", 0, 100, None, attributes={"traceloop.span.kind": "agent", "traceloop.entity.name": "weather"}),
        span(2, "openai.chat", 1, 10, attributes=first),
        *[span(3 + k, f"{n}.tool", 11, 20, attributes={"traceloop.span.kind": "tool", "traceloop.entity.name": n,
               "traceloop.entity.input": json.dumps({"args": [], "kwargs": a}), "traceloop.entity.output": json.dumps(r)})
          for k, (i, n, a, r) in enumerate(CALLS)],
        span(9, "openai.chat", 21, 30, attributes=second),
    ]


def openinference_spans() -> list[SpanRecord]:
    # Arize-ai/openinference spec/semantic_conventions.md; TOOL spans without tool.id
    # (openai-agents / langchain instrumentors), as in the recorded openai-agents trace.
    first = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o",
             "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": QUESTION,
             "llm.output_messages.0.message.role": "assistant"}
    for j, (i, n, a, _) in enumerate(CALLS):
        prefix = f"llm.output_messages.0.message.tool_calls.{j}.tool_call"
        first |= {f"{prefix}.id": i, f"{prefix}.function.name": n, f"{prefix}.function.arguments": json.dumps(a)}
    second = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o",
              "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": QUESTION,
              "llm.output_messages.0.message.role": "assistant",
              "llm.output_messages.0.message.contents.0.message_content.type": "text",
              "llm.output_messages.0.message.contents.0.message_content.text": ANSWER}
    return [
        span(1, "weather", 0, 100, None, attributes={"openinference.span.kind": "AGENT", "agent.name": "weather"}),
        span(2, "response", 1, 10, attributes=first),
        *[span(3 + k, n, 11, 20, attributes={"openinference.span.kind": "TOOL", "tool.name": n,
               "input.value": json.dumps(a), "output.value": r}) for k, (i, n, a, r) in enumerate(CALLS)],
        span(9, "response", 21, 30, attributes=second),
    ]


def vercel_legacy_spans() -> list[SpanRecord]:
    # vercel/ai packages/otel/src/legacy-open-telemetry.ts (+ __snapshots__ "should record successful tool call")
    calls = [{"toolCallType": "function", "toolCallId": i, "toolName": n, "input": json.dumps(a)} for i, n, a, _ in CALLS]
    prompt = [{"role": "user", "content": [{"type": "text", "text": QUESTION}]}]
    return [
        span(1, "ai.generateText", 0, 100, None, attributes={"ai.operationId": "ai.generateText", "ai.telemetry.functionId": "weather",
             "ai.prompt": json.dumps({"prompt": QUESTION}), "ai.response.text": ANSWER}),
        span(2, "ai.generateText.doGenerate", 1, 10, attributes={"ai.operationId": "ai.generateText.doGenerate",
             "ai.model.id": "gpt-4o", "ai.prompt.messages": json.dumps(prompt), "ai.response.toolCalls": json.dumps(calls),
             "ai.usage.promptTokens": 10, "ai.usage.completionTokens": 5}),
        *[span(3 + k, "ai.toolCall", 11, 20, attributes={"ai.operationId": "ai.toolCall", "ai.toolCall.name": n,
               "ai.toolCall.id": i, "ai.toolCall.args": json.dumps(a), "ai.toolCall.result": r})
          for k, (i, n, a, r) in enumerate(CALLS)],
        span(9, "ai.generateText.doGenerate", 21, 30, attributes={"ai.operationId": "ai.generateText.doGenerate",
             "ai.model.id": "gpt-4o", "ai.prompt.messages": json.dumps(prompt), "ai.response.text": ANSWER}),
    ]


def test_vercel_tool_results_errors_and_definitions_as_the_sdk_records_them() -> None:
    # ai 5/6 generate-text.ts: ai.toolCall.result is JSON.stringify(output); a tool that throws
    # ends ERROR with an exception event and no result; ai.prompt.tools is one JSON string per tool.
    spans = vercel_legacy_spans()
    tools = (json.dumps({"type": "function", "name": "get_weather", "inputSchema": {"type": "object"}}),)
    spans[1] = dataclasses.replace(spans[1], attributes={**spans[1].attributes, "ai.prompt.tools": tools})
    spans[2] = dataclasses.replace(spans[2], attributes={**spans[2].attributes, "ai.toolCall.result": json.dumps("rainy")})
    failed = {k: v for k, v in spans[3].attributes.items() if k != "ai.toolCall.result"}
    spans[3] = dataclasses.replace(spans[3], attributes=failed, status_code=STATUS_ERROR, status_message="clock broke",
                                   events=(SpanEvent("exception", 15, {"exception.type": "Error", "exception.message": "clock broke"}),))
    (trace,) = assemble(spans)
    assert [(c.result, c.error) for c in trace.steps[0].tool_calls] == [("rainy", None), (None, "clock broke")]
    assert trace.tool_definitions == [{"type": "function", "name": "get_weather", "inputSchema": {"type": "object"}}]


def strands_spans() -> list[SpanRecord]:
    # strands-agents/sdk-python src/strands/telemetry/tracer.py (default mode): content in span
    # events with Bedrock content blocks; one execute_event_loop_cycle span per turn.
    uses = [{"toolUse": {"toolUseId": i, "name": n, "input": a}} for i, n, a, _ in CALLS]
    cycle = {"gen_ai.operation.name": "execute_event_loop_cycle"}
    chat = {"gen_ai.operation.name": "chat", "gen_ai.system": "strands-agents", "gen_ai.request.model": "claude"}
    user = SpanEvent("gen_ai.user.message", 1, {"content": json.dumps([{"text": QUESTION}])})
    return [
        span(1, "invoke_agent weather", 0, 100, None, attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather"}),
        span(2, "execute_event_loop_cycle", 1, 20, attributes=cycle),
        span(3, "chat", 1, 10, 2, attributes=chat, events=(
            user, SpanEvent("gen_ai.choice", 9, {"finish_reason": "tool_use", "message": json.dumps(uses)}))),
        *[span(4 + k, f"execute_tool {n}", 11, 19, 2, attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": n,
               "gen_ai.tool.call.id": i}, events=(
               SpanEvent("gen_ai.tool.message", 11, {"role": "tool", "content": json.dumps(a), "id": i}),
               SpanEvent("gen_ai.choice", 19, {"message": json.dumps([{"text": r}]), "id": i})))
          for k, (i, n, a, r) in enumerate(CALLS)],
        span(8, "execute_event_loop_cycle", 21, 40, 2, attributes=cycle),  # cycles nest in Strands
        span(9, "chat", 21, 30, 8, attributes=chat, events=(
            user, SpanEvent("gen_ai.choice", 30, {"finish_reason": "end_turn", "message": json.dumps([{"text": ANSWER}])}))),
    ]


def adk_spans() -> list[SpanRecord]:
    # google/adk-python telemetry/tracing.py without OpenInference: Gemini request/response JSON on call_llm,
    # execute_tool spans nested under it with tool_call_args / tool_response.
    user = {"role": "user", "parts": [{"text": QUESTION}]}
    calls = {"role": "model", "parts": [{"function_call": {"id": i, "name": n, "args": a}} for i, n, a, _ in CALLS]}
    results = {"role": "user", "parts": [{"function_response": {"id": i, "name": n, "response": {"result": r}}} for i, n, _, r in CALLS]}
    adk = {"gen_ai.system": "gcp.vertex.agent", "gen_ai.request.model": "gemini-2.0-flash"}

    def call_llm(span_id: int, start: int, end: int, contents: list, content: dict) -> SpanRecord:
        return span(span_id, "call_llm", start, end, scope_name="gcp.vertex.agent", attributes=adk | {
            "gcp.vertex.agent.llm_request": json.dumps({"model": "gemini-2.0-flash", "contents": contents}),
            "gcp.vertex.agent.llm_response": json.dumps({"content": content})})

    return [
        span(1, "agent_run [weather]", 0, 100, None, scope_name="gcp.vertex.agent"),
        call_llm(2, 1, 20, [user], calls),
        *[span(3 + k, f"execute_tool {n}", 11, 19, 2, scope_name="gcp.vertex.agent", attributes=adk | {
               "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": n, "gen_ai.tool.call.id": i,
               "gcp.vertex.agent.tool_call_args": json.dumps(a), "gcp.vertex.agent.tool_response": r})
          for k, (i, n, a, r) in enumerate(CALLS)],
        call_llm(9, 21, 30, [user, calls, results], {"role": "model", "parts": [{"text": ANSWER}]}),
    ]


def pydantic_ai_spans() -> list[SpanRecord]:
    # pydantic/pydantic-ai _instrumentation.py (v2 names): "{agent} run" with agent_name / final_result,
    # semconv model spans, "running tool: {name}" spans with tool_arguments / tool_response.
    requested = [{"role": "assistant", "parts": [{"type": "tool_call", "id": i, "name": n, "arguments": a} for i, n, a, _ in CALLS]}]
    results = [{"role": "user", "parts": [{"type": "tool_call_response", "id": i, "name": n, "result": r} for i, n, _, r in CALLS]}]
    user = [{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}
    scope = "pydantic-ai"
    return [
        span(1, "weather run", 0, 100, None, scope_name=scope, attributes={
             "agent_name": "weather", "gen_ai.agent.name": "weather", "final_result": ANSWER}),
        span(2, "chat gpt-4o", 1, 10, scope_name=scope, attributes=chat | {
             "gen_ai.input.messages": json.dumps(user), "gen_ai.output.messages": json.dumps(requested)}),
        span(3, "running 2 tools", 11, 20, scope_name=scope, attributes={}),
        *[span(4 + k, f"running tool: {n}", 11, 19, 3, scope_name=scope, attributes={
               "gen_ai.tool.name": n, "gen_ai.tool.call.id": i, "tool_arguments": json.dumps(a), "tool_response": r})
          for k, (i, n, a, r) in enumerate(CALLS)],
        span(9, "chat gpt-4o", 21, 30, scope_name=scope, attributes=chat | {
             "gen_ai.input.messages": json.dumps(user + requested + results),
             "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}])}),
    ]


SCENARIO_BY_DIALECT = {
    semconv: semconv_spans, adk: adk_spans, vercel: vercel_legacy_spans, pydantic_ai: pydantic_ai_spans,
    openinference: openinference_spans, legacy: strands_spans, traceloop: legacy_indexed_spans,
}
"""The weather scenario as each registered dialect records it (legacy: Strands' span events; traceloop:
OpenLLMetry's indexed prompts under traceloop-sdk decorators). Every dialect in ``DIALECTS`` needs one."""
BUILDERS = tuple(dict.fromkeys(SCENARIO_BY_DIALECT.values()))


def test_same_behaviour_same_steps_in_every_dialect() -> None:
    for build in BUILDERS:
        assert structure(build()) == EXPECTED, build.__name__


def test_agent_names_and_inputs_per_dialect() -> None:
    for build in BUILDERS:
        (trace,) = assemble(build())
        assert trace.agent_name == "weather", build.__name__
        assert trace.final_output == ANSWER, build.__name__
        assert trace.content_captured, build.__name__


def test_markers_are_few_and_detect_every_dialect() -> None:
    assert len(GENAI_MARKERS) <= 12
    for build in BUILDERS:
        assert any(is_genai(s.attributes) for s in build()), build.__name__
    assert not is_genai({"http.method": "GET"})


def test_adk_native_gemini_json_without_openinference() -> None:
    # google/adk-python telemetry/tracing.py: call_llm -> execute_tool nested; no id in model output
    request = {"model": "gemini-2.0-flash", "contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    response = {"content": {"role": "model", "parts": [{"function_call": {"name": "say_hello", "args": {}}}]}}
    final = {"content": {"role": "model", "parts": [{"text": "Hello!"}]}}
    adk = {"gen_ai.system": "gcp.vertex.agent", "gen_ai.request.model": "gemini-2.0-flash"}
    spans = [
        span(1, "agent_run [hello_agent]", 0, 100, None, scope_name="gcp.vertex.agent"),
        span(2, "call_llm", 1, 20, attributes=adk | {"gcp.vertex.agent.llm_request": json.dumps(request),
             "gcp.vertex.agent.llm_response": json.dumps(response)}),
        span(3, "execute_tool say_hello", 15, 16, 2, attributes=adk | {"gen_ai.operation.name": "execute_tool",
             "gen_ai.tool.name": "say_hello", "gen_ai.tool.call.id": "adk-1", "gcp.vertex.agent.tool_call_args": "{}",
             "gcp.vertex.agent.tool_response": json.dumps({"greeting": "Hello"})}),
        span(4, "call_llm", 21, 30, attributes=adk | {"gcp.vertex.agent.llm_request": json.dumps(request),
             "gcp.vertex.agent.llm_response": json.dumps(final)}),
    ]
    (trace,) = assemble(spans)
    assert trace.agent_name == "hello_agent"
    assert [(c.name, c.arguments, c.result, c.call_id) for c in trace.steps[0].tool_calls] == [
        ("say_hello", {}, {"greeting": "Hello"}, "adk-1")]
    assert trace.final_output == "Hello!"


def test_adk_request_or_response_of_the_wrong_shape_is_an_issue() -> None:
    # Valid JSON that is no object (a list, a number): read as nothing, and the step says why.
    adk = {"gen_ai.system": "gcp.vertex.agent", "gen_ai.request.model": "gemini-2.0-flash"}
    spans = [
        span(1, "agent_run [hello_agent]", 0, 100, None, scope_name="gcp.vertex.agent"),
        span(2, "call_llm", 1, 20, attributes=adk | {"gcp.vertex.agent.llm_request": json.dumps([{"role": "user"}]),
             "gcp.vertex.agent.llm_response": "42"}),
    ]
    (trace,) = assemble(spans)
    assert trace.steps[0].issues == [
        "gcp.vertex.agent.llm_request: expected a JSON object, got list; not read",
        "gcp.vertex.agent.llm_response: expected a JSON object, got int; not read",
    ]


def test_legacy_single_string_and_message_events() -> None:
    # semconv <= 1.27: gen_ai.content.prompt / gen_ai.content.completion span events
    llm = span(2, "chat", 1, 10, None, attributes={"gen_ai.system": "openai", "gen_ai.request.model": "m"}, events=(
        SpanEvent("gen_ai.content.prompt", 1, {"gen_ai.prompt": json.dumps([{"role": "user", "content": "hi"}])}),
        SpanEvent("gen_ai.content.completion", 9, {"gen_ai.completion": "hello there"})))
    op = read_operation(llm)
    assert op.input_messages[0].text == "hi"
    assert op.output_text() == "hello there"
    # semconv 1.28-1.36 deprecated events, OpenAI-shaped body (tool_calls with function)
    llm = span(3, "chat", 1, 10, None, attributes={"gen_ai.operation.name": "chat"}, events=(
        SpanEvent("gen_ai.user.message", 1, {"content": "weather?"}),
        SpanEvent("gen_ai.choice", 9, {"index": 0, "finish_reason": "tool_calls", "message": json.dumps(
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]})})))
    (call,) = read_operation(llm).requested_calls()
    assert (call.name, call.arguments, call.call_id) == ("get_weather", {"city": "Paris"}, "c1")


def test_semantic_kernel_log_bodies_as_json_strings() -> None:
    """Semantic Kernel logs each message as one JSON string body; joined to its span, the body is
    the event's ``content``: ``{"message": ..., "finish_reason": ...}`` for ``gen_ai.choice``."""
    choice = {"message": {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "Travel-get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}, "finish_reason": "tool_calls"}
    llm = span(2, "chat m", 1, 10, None, attributes={"gen_ai.operation.name": "chat"}, events=(
        SpanEvent("gen_ai.user.message", 1, {"content": json.dumps({"role": "user", "content": "weather?"})}),
        SpanEvent("gen_ai.choice", 9, {"content": json.dumps(choice)})))
    op = read_operation(llm)
    assert op.input_messages[0].text == "weather?"
    (call,) = op.requested_calls()
    assert (call.name, call.arguments, call.call_id) == ("Travel-get_weather", {"city": "Paris"}, "c1")
    text = {"message": {"role": "assistant", "content": "Sunny."}, "finish_reason": "stop"}
    llm = dataclasses.replace(llm, events=(SpanEvent("gen_ai.choice", 9, {"content": json.dumps(text)}),))
    assert read_operation(llm).output_text() == "Sunny."


def test_koog_tool_calls_as_content_list_and_role_tool_results() -> None:
    # Koog (ai.koog): each tool call its own completion index, content = JSON list; results role=tool
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.system": "openai",
             "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "greet Bob",
             "gen_ai.prompt.1.role": "tool", "gen_ai.prompt.1.content": json.dumps(
                 [{"function": {"name": "HelloTool", "arguments": {"name": "Bob"}}, "id": "c1", "type": "function"}]),
             "gen_ai.prompt.2.role": "tool", "gen_ai.prompt.2.content": "Hello Bob!",
             "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "Done."}
    op = read_operation(span(1, "llm.chat", 0, 1, None, attributes=attrs))
    assert [(c.name, c.call_id) for m in op.input_messages for c in m.tool_calls] == [("HelloTool", "c1")]
    assert [r for m in op.input_messages for r in m.tool_results] == [("c1", "Hello Bob!")]
    assert op.output_text() == "Done."


def test_traceloop_langchain_wrappers_are_unwrapped() -> None:
    # OpenLLMetry langchain callback_handler: {"input_str", "inputs", ...} / {"output", "kwargs"}
    tool = span(1, "execute_tool search", 0, 1, None, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
        "gen_ai.tool.call.arguments": json.dumps({"input_str": "{'q': 'x'}", "tags": [], "metadata": {}, "inputs": {"q": "x"}, "kwargs": {}}),
        "gen_ai.tool.call.result": json.dumps({"output": {"lc": 1, "type": "constructor", "id": ["ToolMessage"],
                                               "kwargs": {"content": "found", "tool_call_id": "c9"}}, "kwargs": {}})})
    op = read_operation(tool)
    assert (op.tool_arguments, op.tool_result) == ({"q": "x"}, "found")
    decorated = span(2, "search.tool", 0, 1, None, attributes={"traceloop.span.kind": "tool", "traceloop.entity.name": "search",
                     "traceloop.entity.input": json.dumps({"args": ["x"], "kwargs": {}})})
    assert read_operation(decorated).tool_arguments == "x"


def test_openinference_adk_output_wrapper_gives_id_and_result() -> None:
    tool = span(1, "execute_tool say_hello", 0, 1, None, attributes={"openinference.span.kind": "TOOL", "tool.name": "say_hello",
                "output.value": json.dumps({"id": "adk-9", "name": "say_hello", "response": {"ok": True}})})
    op = read_operation(tool)
    assert (op.tool_call_ids, op.tool_result) == (["adk-9"], {"ok": True})


def test_malformed_json_becomes_a_step_issue_not_a_crash() -> None:
    spans = semconv_spans()
    broken = dict(spans[1].attributes, **{"gen_ai.output.messages": '[{"role": "assistant", "parts": [{"type": "tool"]}]'})
    spans[1] = span(2, "chat gpt-4o", 1, 10, attributes=broken)
    (trace,) = assemble(spans)
    malformed, not_a_list, *not_requested = trace.steps[0].issues
    assert malformed.startswith("gen_ai.output.messages: malformed JSON (") and malformed.endswith("kept raw")
    assert not_a_list == "gen_ai.output.messages: expected a list of messages, got str"
    assert not_requested == ["tool span 0000000000000003 (get_weather) was not requested by this turn",
                             "tool span 0000000000000004 (get_time) was not requested by this turn"]
    # the tools still ran and are kept, flagged as not requested by a turn whose output was unreadable
    assert [(c.name, c.call_id, c.arguments, c.requested, c.executed) for c in trace.steps[0].tool_calls] == [
        ("get_weather", "call_1", {"city": "Paris"}, False, True), ("get_time", "call_2", {"city": "Paris"}, False, True)]


MALFORMED = ["{", "[1, 2]]", "[1 2", '{"a": ' * 50]
"""Strings that start like JSON and are not, nor the start of JSON cut short (``cut_json``): kept raw, with a
``malformed JSON`` issue."""
NOT_CONTENT = ["null", "42", "", "<not specified>", 3.5, ("a", "b")]
"""Valid JSON of the wrong shape, empty, placeholder and non-string values."""


def _is_json(value: Any) -> bool:
    if not isinstance(value, str) or value[:1] not in "[{":
        return False
    try:
        json.loads(value)
    except ValueError:
        return False
    return True


def corrupt(spans: list[SpanRecord], garbage: Any) -> tuple[list[SpanRecord], set[str]]:
    """Every JSON content value (span and span-event attributes) replaced by ``garbage``; the names
    of what was replaced (``key``, or ``event.key`` for an event attribute)."""
    out, replaced = [], set()
    for record in spans:
        replaced |= {k for k, v in record.attributes.items() if _is_json(v)}
        replaced |= {f"{e.name}.{k}" for e in record.events for k, v in e.attributes.items() if _is_json(v)}
        out.append(dataclasses.replace(
            record,
            attributes={k: garbage if _is_json(v) else v for k, v in record.attributes.items()},
            events=tuple(dataclasses.replace(e, attributes={k: garbage if _is_json(v) else v for k, v in e.attributes.items()})
                         for e in record.events)))
    return out, replaced


def test_every_dialect_has_a_scenario_it_reads() -> None:
    assert set(SCENARIO_BY_DIALECT) == set(DIALECTS), "add the weather scenario as the new dialect records it"
    for dialect, build in SCENARIO_BY_DIALECT.items():
        assert any(dialect in detected(record) for record in build()), dialect.__name__


def test_malformed_attributes_in_every_dialect_do_not_crash() -> None:
    """Every JSON content attribute of every dialect's scenario replaced by garbage: the run keeps its
    structure (agent, one step per model call, the executed tools with their ids), malformed JSON is
    kept raw with an issue naming where it was, and the other garbage raises no false alarm."""
    assert set(SCENARIO_BY_DIALECT) == set(DIALECTS)
    for dialect, build in SCENARIO_BY_DIALECT.items():
        for garbage in MALFORMED + NOT_CONTENT:
            where = f"{dialect.__name__.rsplit('.', 1)[-1]} with {garbage!r:.20}"
            spans, replaced = corrupt(build(), garbage)
            assert replaced, where
            traces = assemble(spans)
            assert len(traces) == 1, where
            (trace,) = traces
            assert trace.agent_name == "weather", where
            assert [[(c.name, c.call_id, c.executed) for c in step.tool_calls] for step in trace.steps] == [
                [(name, call_id, True) for call_id, name, _, _ in CALLS], []], where
            issues = trace.issues + [issue for step in trace.steps for issue in step.issues]
            malformed = [issue for issue in issues if "malformed JSON" in issue]
            if garbage in MALFORMED:
                assert all(issue.endswith("kept raw") for issue in malformed), where
                named = {issue.split(":", 1)[0].split(" ", 1)[0] for issue in malformed}
                # an indexed key is named by its message (``llm.output_messages.0 tool_call arguments``)
                unreported = {key for key in replaced if not any(key == n or key.startswith(n + ".") for n in named)}
                assert not unreported, f"{where}: {sorted(unreported)}"
                assert [c.arguments for c in trace.steps[0].tool_calls] == [garbage, garbage], where
            else:
                assert malformed == [], where


def test_truncated_attribute_is_kept_with_an_issue_saying_it_was_cut() -> None:
    # exporters cut long attribute values (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT)
    full = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "x" * 500}]}])
    op = read_operation(span(1, "chat m", 0, 1, None, attributes={"gen_ai.operation.name": "chat", "gen_ai.output.messages": full[:100]}))
    assert op.output_messages is None
    assert op.issues[0] == ("gen_ai.output.messages: JSON cut short at 100 characters (an attribute value length "
                            "limit?); kept raw")


def test_unknown_dialect_gives_no_trace() -> None:
    assert assemble([span(1, "GET /", 0, 1, None, attributes={"http.method": "GET"})]) == []


def test_openllmetry_langchain_tool_message_gives_call_id_and_failure() -> None:
    # opentelemetry-instrumentation-langchain 0.62: the call id exists only in the ToolMessage output
    def tool_span(span_id: int, message: dict) -> SpanRecord:
        output = json.dumps({"output": {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "ToolMessage"],
                                        "kwargs": message}, "kwargs": {"name": "search"}})
        return span(span_id, "execute_tool search", 0, 1, None, attributes={
            "traceloop.span.kind": "tool", "traceloop.entity.name": "search", "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search", "traceloop.entity.output": output, "gen_ai.tool.call.result": output})

    ok = read_operation(tool_span(1, {"content": "found", "tool_call_id": "c9", "status": "success"}))
    assert (ok.tool_call_ids, ok.tool_result, ok.error) == (["c9"], "found", None)
    failed = read_operation(tool_span(2, {"content": "Error: boom", "tool_call_id": "c10", "status": "error"}))
    assert (failed.tool_call_ids, failed.error) == (["c10"], "Error: boom")


def test_openllmetry_langgraph_state_and_unknown_model() -> None:
    state_in = {"inputs": {"messages": [["user", "Find x."]]}, "tags": [], "metadata": {}, "kwargs": {"name": "g"}}
    state_out = {"outputs": {"messages": [
        {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "HumanMessage"], "kwargs": {"content": "Find x."}},
        {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"], "kwargs": {"content": "42."}}]},
        "kwargs": {}}
    graph = read_operation(span(1, "g.workflow", 0, 9, None, attributes={
        "traceloop.span.kind": "workflow", "traceloop.entity.name": "g", "gen_ai.operation.name": "invoke_agent",
        "traceloop.entity.input": json.dumps(state_in), "traceloop.entity.output": json.dumps(state_out)}))
    assert (graph.input_messages[0].text, graph.output_text()) == ("Find x.", "42.")
    llm = read_operation(span(2, "Fake.chat", 1, 2, attributes={
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "unknown", "traceloop.workflow.name": "g",
        "traceloop.association.properties.ls_model_name": "fake-1"}))
    assert llm.model == "fake-1"


def test_langgraph_control_flow_exceptions_are_no_errors() -> None:
    # OpenLLMetry ends the spans a handoff's ParentCommand (or an interrupt) passes through ERROR
    def failed(exception_type: str) -> SpanRecord:
        record = span(1, "execute_tool t", 0, 1, None, attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"})
        return dataclasses.replace(record, status_code=STATUS_ERROR, status_message="Command(graph='__parent__', ...)", events=(
            SpanEvent(name="exception", time_unix_nano=1, attributes={"exception.type": exception_type, "exception.message": "m"}),))

    assert read_operation(failed("langgraph.errors.ParentCommand")).error is None
    assert read_operation(failed("langgraph.errors.GraphInterrupt")).error is None
    assert read_operation(failed("ValueError")).error == "Command(graph='__parent__', ...)"


def test_tool_errors_by_event_combination() -> None:
    # An ERROR span is no failure only when every exception event it carries is control flow (else, with
    # none, its ``error.type`` is); an OK span's first exception event is its error; other events say nothing.
    def exception(kind: Any, message: str | None = "m") -> SpanEvent:
        return SpanEvent(name="exception", time_unix_nano=1, attributes={"exception.type": kind, "exception.message": message})

    other = SpanEvent(name="log", time_unix_nano=1, attributes={"exception.type": "ValueError"})
    parent, interrupt = exception("langgraph.errors.ParentCommand"), exception("GraphInterrupt")
    cases = [
        # status, events, error.type (absent: ...), expected error
        (STATUS_ERROR, (parent,), ..., None),
        (STATUS_ERROR, (parent, interrupt), ..., None),
        (STATUS_ERROR, (parent, exception("ValueError")), ..., "boom"),
        (STATUS_ERROR, (exception("ValueError"), parent), ..., "boom"),
        (STATUS_ERROR, (other,), "ParentCommand", None),
        (STATUS_ERROR, (other,), "x.ParentCommand.y", "boom"),
        (STATUS_ERROR, (), None, "boom"),
        (STATUS_ERROR, (parent,), "ValueError", None),
        (STATUS_ERROR, (exception("ValueError"),), "ParentCommand", "boom"),
        ("OK", (other, exception("ValueError", "no answer")), ..., "ValueError: no answer"),
        ("OK", (exception(None, None), exception("KeyError", None)), ..., "KeyError"),
        ("OK", (parent,), ..., None),
        ("OK", (other,), ..., None),
    ]
    for status, events, error_type, expected in cases:
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}
        if error_type is not ...:
            attributes["error.type"] = error_type
        record = dataclasses.replace(
            span(1, "execute_tool t", 0, 1, None, attributes=attributes), status_code=status,
            status_message="boom" if status == STATUS_ERROR else None, events=events,
        )
        assert read_operation(record).error == expected, (status, events, error_type)


def test_a_failed_tool_span_reads_its_content_and_no_stack_trace() -> None:
    # Content in a details event is read beside an exception event; the stack trace is never looked at.
    stack = _Reads()
    stack.update({"exception.type": "TimeoutError", "exception.message": "late", "exception.stacktrace": "Traceback ..."})
    details = SpanEvent(name="gen_ai.client.inference.operation.details", time_unix_nano=1, attributes={
        "gen_ai.output.messages": json.dumps([{"role": "tool", "parts": [
            {"type": "tool_call_response", "id": "c1", "response": "partial"}]}])})
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "gen_ai.tool.call.id": "c1"}
    for events in ((SpanEvent(name="exception", time_unix_nano=1, attributes=stack), details),
                   (SpanEvent(name="exception", time_unix_nano=1, attributes=stack),)):
        record = dataclasses.replace(span(1, "execute_tool t", 0, 1, None, attributes=attributes),
                                     status_code=STATUS_ERROR, events=events)
        op = read_operation(record)
        assert op.error == "TimeoutError: late"
        assert op.tool_result == ("partial" if len(events) == 2 else None)
        assert "exception.stacktrace" not in stack.read


class _Reads(dict):
    """Attributes that remember every key looked up."""

    def __init__(self) -> None:
        super().__init__()
        self.read: set[str] = set()

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)


def test_each_dialect_declares_every_key_its_detect_reads() -> None:
    """Dispatch offers a span only to the dialects whose ``DETECT_KEYS`` it carries: a key ``detect``
    reads but does not declare would make that dialect miss spans (checked on a span with none)."""
    from otel_agent_eval.assembly.dialects import DIALECTS

    for dialect in DIALECTS:
        attributes = _Reads()
        record = SpanRecord(trace_id=1, span_id=1, parent_span_id=None, name="x", start_time_unix_nano=0,
                            end_time_unix_nano=1, attributes=attributes)
        assert not dialect.detect(record)
        assert attributes.read <= set(dialect.DETECT_KEYS), (dialect.__name__, attributes.read - set(dialect.DETECT_KEYS))


def test_dispatch_finds_what_asking_every_dialect_finds() -> None:
    """``detected`` (one set intersection, then only the dialects signalled) == every ``detect`` asked,
    on spans of every dialect, the other signals (scope, span name, events) included."""
    from otel_agent_eval.assembly.dialects import DIALECTS, detected
    from otel_agent_eval.records import SpanEvent

    def record(name: str = "x", scope: str = "", events: tuple[SpanEvent, ...] = (), **attributes: Any) -> SpanRecord:
        return SpanRecord(trace_id=1, span_id=1, parent_span_id=None, name=name, start_time_unix_nano=0,
                          end_time_unix_nano=1, attributes=attributes, scope_name=scope, events=events)

    records = [record(**{key: "v"}) for dialect in DIALECTS for key in dialect.DETECT_KEYS]
    records += [
        record(**{"gen_ai.system": "gcp.vertex.agent"}), record(scope="gcp.vertex.agent"), record(name="ai.generateText"),
        record(scope="pydantic-ai"), record(agent_name="a", final_result="r"),
        record(events=(SpanEvent("gen_ai.choice", 0, {}),)), record(events=(SpanEvent("exception", 0, {}),)),
        record(**{"openinference.span.kind": "LLM", "gen_ai.operation.name": "chat", "llm.request.type": "chat"}),
        record(name="ai.streamText", scope="pydantic-ai", **{"traceloop.span.kind": "tool"}),
        record(**{"gen_ai.system": "gcp.vertex.agent", "gen_ai.operation.name": "chat"}),
        record(**{"gen_ai.system": "openai", "gen_ai.operation.name": "chat"}),
        record(**{"gen_ai.system": "openai", "final_result": "r", "gen_ai.agent.name": "a"}),
    ]
    for r in records:
        assert detected(r) == [d for d in DIALECTS if d.detect(r)], (r.name, r.scope_name, dict(r.attributes))
    for dialect in DIALECTS:  # a key that confirms a dialect without asking it is one its ``detect`` accepts alone
        assert set(getattr(dialect, "CONFIRM_KEYS", ())) <= set(dialect.DETECT_KEYS), dialect.__name__
        for key in getattr(dialect, "CONFIRM_KEYS", ()):
            assert dialect.detect(record(**{key: "v"})), (dialect.__name__, key)


def oi_tool(arguments: object, parameters: object = None, output: object = None) -> SpanRecord:
    attrs = {"openinference.span.kind": "TOOL", "tool.name": "t", "input.value": json.dumps(arguments)}
    if parameters is not None:
        attrs["tool.parameters"] = json.dumps(parameters)
    if output is not None:
        attrs["output.value"] = json.dumps(output)
    return span(1, "SimpleTool", 0, 1, None, attributes=attrs)


def test_openinference_call_envelopes_give_the_requested_arguments() -> None:
    """smolagents ``{"args", "sanitize_inputs_outputs", "kwargs"}`` and LlamaIndex ``{"kwargs"}``;
    positional arguments named after the tool's parameters (smolagents ``inputs`` or a JSON schema),
    injected ones outside the schema dropped; an envelope that cannot be named, or a dict that is no
    envelope, stays as recorded."""
    smol = {"city": {"type": "string"}, "unit": {"type": "string"}}
    schema = {"type": "object", "properties": {"to_agent": {"type": "string"}}}
    cases = [
        ({"args": [], "sanitize_inputs_outputs": True, "kwargs": {"city": "Paris"}}, smol, {"city": "Paris"}),
        ({"args": ["Paris"], "sanitize_inputs_outputs": False, "kwargs": {"unit": "C"}}, smol, {"city": "Paris", "unit": "C"}),
        ({"kwargs": {"to_agent": "b", "ctx": "<Context object at 0x1>"}}, schema, {"to_agent": "b"}),
        ({"args": ["Paris", "C", "extra"], "kwargs": {}}, smol, {"args": ["Paris", "C", "extra"], "kwargs": {}}),
        ({"args": ["x"], "kwargs": {}}, None, {"args": ["x"], "kwargs": {}}),
        ({"kwargs": {"a": 1}, "other": 2}, None, {"kwargs": {"a": 1}, "other": 2}),
    ]
    for arguments, parameters, expected in cases:
        assert read_operation(oi_tool(arguments, parameters)).tool_arguments == expected, arguments


def test_openinference_llamaindex_tool_output_is_the_text_sent_back() -> None:
    output = {"blocks": [{"text": "sunny"}], "tool_name": "t", "raw_input": {"args": [], "kwargs": {}},
              "raw_output": "sunny", "is_error": False}
    assert read_operation(oi_tool({"kwargs": {}}, output=output)).tool_result == "sunny"
    assert read_operation(oi_tool({"kwargs": {}}, output={"blocks": "x", "other": 1})).tool_result == {"blocks": "x", "other": 1}


def test_openinference_agent_run_spans_and_reprs() -> None:
    """smolagents names an agent's span ``{name}.run`` and records ``run``'s arguments as input;
    LlamaIndex records a truncated Python repr as a workflow's output: no text."""
    agent = span(1, "planner.run", 0, 1, None, attributes={
        "openinference.span.kind": "AGENT", "input.value": json.dumps({"task": QUESTION, "stream": False}),
        "output.value": "StopEvent(result=AgentOutput(response=ChatMessage(role=<MessageRole.ASSISTANT: 'assistant'>..."})
    op = read_operation(agent)
    assert (op.agent_name, op.input_messages[0].text, op.output_messages) == ("planner", QUESTION, None)
    answer = span(1, "a", 0, 1, None, attributes={"openinference.span.kind": "AGENT", "output.value": "Paris (France) is sunny."})
    assert read_operation(answer).output_text() == "Paris (France) is sunny."


def test_openinference_prepare_span_is_no_model_call_and_react_answers_split() -> None:
    prepare = span(1, "OpenAI._prepare_chat_with_tools", 0, 1, None, attributes={"openinference.span.kind": "LLM"})
    assert read_operation(prepare) is None  # builds the request; the response is on the next span
    react = span(1, "OpenAI.astream_chat", 0, 1, None, attributes={
        "openinference.span.kind": "LLM", "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "Thought: I know.\nAnswer: Sunny."})
    op = read_operation(react)
    assert (op.output_text(), op.reasoning_text()) == ("Sunny.", "I know.")


def _read_as_defined(record: SpanRecord) -> Any:
    """``read_operation`` as the ``dialects`` module doc defines it: every detected dialect asked in turn."""
    from otel_agent_eval.assembly.dialects import AGENT_NAME_PREFIXES
    from otel_agent_eval.assembly.dialects.base import AGENT, OTHER, TOOL, Operation, span_name_subject, tool_error

    found = [d for d in DIALECTS if d.detect(record)]
    kind = next((k for d in found if (k := d.kind(record)) is not None), None)
    if kind is None:
        kind = next((k for d in found if hasattr(d, "guess_kind") and (k := d.guess_kind(record)) is not None), None)
    if kind is None or kind == OTHER or any(hasattr(d, "ignores") and d.ignores(record) for d in found):
        return None
    op = Operation(record=record, kind=kind)
    for dialect in found:
        dialect.extract(record, op)
    for dialect in found:
        if hasattr(dialect, "finish"):
            dialect.finish(op)
    if op.kind == TOOL and op.error is None:
        op.error = tool_error(record)
    if op.kind == AGENT and not op.agent_name:
        op.agent_name = span_name_subject(record.name, *AGENT_NAME_PREFIXES)
    return op


def _fields(op: Any) -> Any:
    if op is None:
        return None
    inputs = op.input_messages  # parsed (with its issues) before the fields are compared
    return {f.name: getattr(op, f.name) for f in dataclasses.fields(op) if not f.name.startswith("_")} | {"in": inputs}


def test_read_operation_reads_every_span_as_the_dialects_define_it() -> None:
    """Dispatch by key set (one ``Reading`` per set of dialects, confirmed keys not asked again) reads
    every span of every scenario, and of every scenario with malformed JSON, as asking each dialect in
    turn does: the same kind, fields, messages and issues."""
    scenarios = [build() for build in SCENARIO_BY_DIALECT.values()]
    scenarios += [corrupt(spans, garbage)[0] for spans in list(scenarios) for garbage in ("{not json", "")]
    adk = {"gen_ai.operation.name": "execute_tool", "gen_ai.system": "gcp.vertex.agent"}
    swarm_input = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Context:\nUser Request: go"}]}])
    scenarios.append([  # ``ignores`` and ``finish``
        SpanRecord(trace_id=1, span_id=i, parent_span_id=None, name=name, start_time_unix_nano=0, end_time_unix_nano=1,
                   attributes=attributes, scope_name=scope)
        for i, (name, scope, attributes) in enumerate([
            ("execute_tool (merged)", "gcp.vertex.agent", {**adk, "gen_ai.tool.name": "(merged)"}),
            ("execute_tool transfer_to_agent", "", {**adk, "gen_ai.tool.name": "transfer_to_agent"}),
            ("invoke_agent", "strands.telemetry.tracer", {"gen_ai.operation.name": "invoke_agent",
             "gen_ai.provider.name": "strands-agents", "gen_ai.input.messages": swarm_input}),
        ])
    ])
    for spans in scenarios:
        for record in spans:
            assert _fields(read_operation(record)) == _fields(_read_as_defined(record)), (record.name, dict(record.attributes))
