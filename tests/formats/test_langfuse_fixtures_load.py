"""The recorded framework traces (shared/fixtures/genai-traces) load into sane span trees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otel_agent_eval.formats.langfuse import iso_to_unix_nano, load_attribute_map, load_langfuse_export
from otel_agent_eval.records import SpanRecord

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "genai-traces"

pytestmark = pytest.mark.skipif(
    not FIXTURES.is_dir(),
    reason=f"GenAI trace fixtures not found at {FIXTURES} (copy shared/ beside the clone)",
)

# Span counts from the fixtures README table.
EXPECTED_SPANS = {
    "langfuse-openai-agents-2025-09-30.json": 5,
    "langfuse-microsoft-agent-2025-10-14.json": 4,
    "langfuse-google-adk-2025-08-28.json": 5,
    "langfuse-pydantic-ai-tools-2025-12-04.json": 12,
    "langfuse-koog-2025-08-26.json": 11,
}


def _load(name: str) -> list[SpanRecord]:
    return load_langfuse_export(FIXTURES / name)


def _named(records: list[SpanRecord], prefix: str) -> list[SpanRecord]:
    return [r for r in records if r.name.startswith(prefix)]


@pytest.mark.parametrize("name", sorted(EXPECTED_SPANS))
def test_span_count_and_tree(name: str) -> None:
    records = _load(name)
    assert len(records) == EXPECTED_SPANS[name]
    by_id = {r.span_id: r for r in records}
    assert len(by_id) == len(records), "duplicate span ids"
    assert len({r.trace_id for r in records}) == 1
    trace_id = json.loads((FIXTURES / name).read_text())["trace"]["id"]
    assert records[0].trace_id == int(trace_id, 16)
    roots = [r for r in records if r.parent_span_id is None]
    assert len(roots) == 1
    for r in records:  # every span reaches the root without cycles
        seen: set[int] = set()
        node = r
        while node.parent_span_id is not None:
            assert node.span_id not in seen
            seen.add(node.span_id)
            assert node.parent_span_id in by_id, f"{r.name}: dangling parent"
            node = by_id[node.parent_span_id]
        assert node is roots[0]
        assert r.start_time_unix_nano <= r.end_time_unix_nano
        assert r.status_code == "UNSET" and r.kind == "INTERNAL"
        assert r.scope_name


def test_openai_agents_openinference() -> None:
    records = _load("langfuse-openai-agents-2025-09-30.json")
    assert [r.name for r in records][:2] == ["Agent workflow", "Hello world"]
    tool = _named(records, "get_weather")[0]
    assert tool.attributes["openinference.span.kind"] == "TOOL"
    assert json.loads(tool.attributes["input.value"]) == {"city": "Tokyo"}
    assert tool.attributes["output.value"] == "The weather in Tokyo is sunny."
    assert "tool.id" not in tool.attributes  # no call id on the TOOL span (README)
    first, second = _named(records, "response")
    key = "llm.output_messages.0.message.tool_calls.0.tool_call"
    assert first.attributes[f"{key}.id"] == "call_Kud0j0DxWSmLzv9W5m6qVqXn"
    assert json.loads(first.attributes[f"{key}.function.arguments"]) == {"city": "Tokyo"}
    assert first.attributes["llm.token_count.prompt"] == 55
    assert json.loads(first.attributes["output.value"])["output"][0]["type"] == "function_call"
    assert second.attributes["llm.input_messages.3.message.tool_call_id"] == (
        "call_Kud0j0DxWSmLzv9W5m6qVqXn"
    )


def test_microsoft_agent_framework_restores_semconv_content() -> None:
    records = _load("langfuse-microsoft-agent-2025-10-14.json")
    agent = records[0]
    assert agent.name.startswith("invoke_agent") and agent.scope_name == "agent_framework"
    chats = _named(records, "chat gpt-4o")
    assert len(chats) == 2
    first_out = json.loads(chats[0].attributes["gen_ai.output.messages"])
    call = first_out[0]["parts"][0]
    assert call["type"] == "tool_call" and call["name"] == "get_weather"
    assert call["id"] == ["run_9guMCbt68iSVgtsx6WdKMA18", "call_Sz1QP8T7fuJkIECGDLFWOorq"]
    assert json.loads(chats[1].attributes["gen_ai.input.messages"])[1]["role"] == "tool"
    assert chats[1].attributes["gen_ai.usage.input_tokens"] == 631
    tool = _named(records, "execute_tool")[0]
    assert tool.attributes["gen_ai.tool.call.id"] == (
        "run_9guMCbt68iSVgtsx6WdKMA18",
        "call_Sz1QP8T7fuJkIECGDLFWOorq",
    )
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"location": "Portland"}
    assert tool.attributes["gen_ai.tool.call.result"].startswith("The weather in Portland")


def test_google_adk_keeps_native_attributes() -> None:
    records = _load("langfuse-google-adk-2025-08-28.json")
    tool = _named(records, "execute_tool say_hello")[0]
    parent = next(r for r in records if r.span_id == tool.parent_span_id)
    assert parent.name == "call_llm"  # ADK nests the tool under the LLM call
    assert tool.attributes["gen_ai.tool.call.id"].startswith("adk-")
    assert json.loads(tool.attributes["gcp.vertex.agent.tool_call_args"]) == {}
    assert json.loads(tool.attributes["gcp.vertex.agent.tool_response"]) == {
        "greeting": "Hello Langfuse 👋"
    }
    assert "input.value" not in tool.attributes  # not invented from Langfuse's `input`
    for llm in _named(records, "call_llm"):
        assert json.loads(llm.attributes["gcp.vertex.agent.llm_request"])["model"]
        assert "content" in json.loads(llm.attributes["gcp.vertex.agent.llm_response"])
        assert isinstance(llm.attributes["gen_ai.usage.input_tokens"], int)


def test_pydantic_ai_v2_tools() -> None:
    records = _load("langfuse-pydantic-ai-tools-2025-12-04.json")
    tools = _named(records, "running tool: ")
    assert len(tools) == 3
    group = next(r for r in records if r.name == "running 3 tools")
    assert {t.parent_span_id for t in tools} == {group.span_id}
    for t in tools:
        assert t.attributes["gen_ai.tool.call.id"].startswith("call_")
        assert json.loads(t.attributes["tool_arguments"]) == {"topic": "programming"}
        assert isinstance(t.attributes["tool_response"], str)
    chats = _named(records, "chat gpt-4o-mini")
    assert len(chats) == 4
    for chat in chats:
        assert json.loads(chat.attributes["gen_ai.input.messages"])[0]["role"] == "system"
        assert json.loads(chat.attributes["gen_ai.output.messages"])[0]["role"] == "assistant"
    first_calls = json.loads(chats[0].attributes["gen_ai.output.messages"])[0]["parts"]
    assert {p["id"] for p in first_calls} == {t.attributes["gen_ai.tool.call.id"] for t in tools}
    root = next(r for r in records if r.parent_span_id is None)
    assert root.scope_name == "langfuse-sdk"
    assert json.loads(root.attributes["langfuse.observation.input"]) == {
        "args": ["programming"],
        "kwargs": {},
    }


def test_koog_legacy_indexed_attributes() -> None:
    records = _load("langfuse-koog-2025-08-26.json")
    for llm in _named(records, "llm.chat"):
        assert "gen_ai.input.messages" not in llm.attributes  # Koog never wrote these
        assert llm.attributes["gen_ai.prompt.0.role"] == "system"
    first = _named(records, "llm.chat")[0]
    calls = json.loads(first.attributes["gen_ai.completion.0.content"])
    assert calls[0]["id"] == "call_n2HaWg9KFP0BZDqXv6G4b3nJ"
    tools = _named(records, "tool.")
    assert sorted(t.name for t in tools) == ["tool.ByeTool", "tool.HelloTool"]
    for t in tools:
        assert t.attributes["gen_ai.tool.call.id"].startswith("call_")
        assert json.loads(t.attributes["input.value"]) == {"name": "Bob"}
        assert "gen_ai.tool.call.arguments" not in t.attributes  # already in input.value
        assert isinstance(t.attributes["output.value"], str)


def test_openinference_attribute_map() -> None:
    record = load_attribute_map(FIXTURES / "openinference-otel_genai_client_span_tool_calls.json")
    assert record.name == "chat gpt-4"
    assert record.parent_span_id is None
    messages = json.loads(record.attributes["gen_ai.input.messages"])
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert messages[1]["parts"][1]["id"] == messages[2]["parts"][0]["id"] == "1234"
    assert json.loads(record.attributes["gen_ai.output.messages"])[0]["finish_reason"] == "stop"
    assert record.attributes["gen_ai.usage.input_tokens"] == 97
    assert record.attributes["gen_ai.response.finish_reasons"] == ("stop",)


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("2025-08-28T07:32:31.222Z", 1756366351_222000000),
        ("1970-01-01T00:00:00Z", 0),
        ("1970-01-01T00:00:01.123456789Z", 1_123456789),
        ("1970-01-01T01:00:00+01:00", 0),
    ],
)
def test_iso_to_unix_nano(text: str, ns: int) -> None:
    assert iso_to_unix_nano(text) == ns
