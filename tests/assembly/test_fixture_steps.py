"""The recorded framework traces assemble into the steps expected by reference §7.

Fixtures: shared/fixtures/genai-traces (Langfuse exports of real framework runs, and
one hand-authored OpenInference attribute map); expectations: genai-dialects.md §7.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from otel_agent_eval import assemble
from otel_agent_eval.formats.langfuse import load_attribute_map, load_langfuse_export
from otel_agent_eval.model import AgentTrace

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "genai-traces"

pytestmark = pytest.mark.skipif(
    not FIXTURES.is_dir(),
    reason=f"GenAI trace fixtures not found at {FIXTURES} (copy shared/ beside the clone)",
)


def _traces(name: str) -> list[AgentTrace]:
    return assemble(load_langfuse_export(FIXTURES / name))


def _calls(step):  # (name, arguments, result, call_id, executed)
    return [(c.name, c.arguments, c.result, c.call_id, c.executed) for c in step.tool_calls]


def test_openai_agents_openinference_tool_span_without_id() -> None:
    # TOOL span has no tool.id: owned by name+args, id from the LLM output.
    (trace,) = _traces("langfuse-openai-agents-2025-09-30.json")  # `Agent workflow` is a container
    assert trace.agent_name == "Hello world"
    assert trace.input == "What's the weather in Tokyo?"
    assert len(trace.steps) == 2
    first, second = trace.steps
    assert _calls(first) == [
        ("get_weather", {"city": "Tokyo"}, "The weather in Tokyo is sunny.", "call_Kud0j0DxWSmLzv9W5m6qVqXn", True)
    ]
    assert first.output is None
    assert second.tool_calls == []
    assert second.output.startswith("The weather in Tokyo is currently sunny.")
    assert trace.final_output == second.output
    assert trace.usage.input_tokens == 55 + 85
    assert all(not step.issues for step in trace.steps)


def test_microsoft_agent_framework_list_call_ids() -> None:
    (trace,) = _traces("langfuse-microsoft-agent-2025-10-14.json")
    assert trace.agent_name == "99981f6a-abd1-4d09-9fba-00e2ab172193"
    assert trace.input == "What's the weather like in Portland?"
    assert [len(s.tool_calls) for s in trace.steps] == [1, 0]
    assert _calls(trace.steps[0]) == [
        (
            "get_weather",
            {"location": "Portland"},
            "The weather in Portland is stormy with a high of 19°C.",
            "call_Sz1QP8T7fuJkIECGDLFWOorq",
            True,
        )
    ]
    assert trace.final_output == "The weather in Portland is currently stormy with a high temperature of 19°C."
    assert trace.conversation_id == "thread_G78qCSLpzn0YQwFwrvK5OivI"
    assert trace.usage.input_tokens == 631  # only the 2nd chat has usage; the agent's aggregate is not added


def test_google_adk_tool_nested_under_call_llm() -> None:
    (trace,) = _traces("langfuse-google-adk-2025-08-28.json")
    assert trace.agent_name == "hello_agent"
    assert trace.conversation_id == "demo-session"
    assert trace.input == "hi"
    assert len(trace.steps) == 2
    assert _calls(trace.steps[0]) == [
        ("say_hello", {}, {"greeting": "Hello Langfuse 👋"}, "adk-8bd8dc65-717d-4102-858b-3a1dd6b75a00", True)
    ]
    assert trace.steps[0].tool_calls[0].requested  # matched by ancestry, the model output had no id
    assert trace.steps[1].tool_calls == []
    assert trace.final_output == "Hello Langfuse 👋!"
    assert trace.usage.input_tokens == 28 + 39


def test_pydantic_ai_three_agent_runs_and_parallel_calls() -> None:
    traces = _traces("langfuse-pydantic-ai-tools-2025-12-04.json")
    assert [t.agent_name for t in traces] == ["joke_agent", "joke_agent", "evaluator_agent"]
    run1, run2, evaluator = traces
    assert len(run1.steps) == 2
    parallel = run1.steps[0]
    assert [(c.name, c.arguments, c.call_id) for c in parallel.tool_calls] == [
        ("get_pun_suggestion", {"topic": "programming"}, "call_X0OSgjUukT5inyEQvuZQnHrk"),
        ("get_dad_joke_suggestion", {"topic": "programming"}, "call_WxZcCvSDhGT4RJHlcU01k10x"),
        ("get_one_liner_suggestion", {"topic": "programming"}, "call_aRaObiWKKt6GzgDkkUl3bu1Q"),
    ]
    assert all(c.executed and c.requested for c in parallel.tool_calls)
    assert parallel.tool_calls[0].result.startswith("Pun idea: Play on words")
    assert run1.steps[1].tool_calls == []
    assert "Why do programmers prefer dark mode?" in run1.final_output
    # usage comes from the chat spans only, never from the agent span's aggregate
    assert run1.usage.input_tokens == 265 + 417

    assert len(run2.steps) == 1
    assert run2.final_output == "Why do programmers hate nature?  \nIt has too many bugs!"

    assert len(evaluator.steps) == 1
    (output_tool,) = evaluator.steps[0].tool_calls
    assert (output_tool.name, output_tool.executed) == ("final_result", False)  # an output tool, never run
    assert output_tool.arguments["quality"] == "good"
    assert evaluator.final_output.startswith('{"quality": "good"')  # the agent span's final_result


def test_koog_legacy_indexed_tools_are_cousins() -> None:
    (trace,) = _traces("langfuse-koog-2025-08-26.json")
    assert trace.conversation_id == "6f8d2449-33ed-4c7c-82e7-5410e34ee4e6"
    assert trace.input.startswith("Greet and say goodbye to the user")
    assert len(trace.steps) == 2
    assert _calls(trace.steps[0]) == [
        ("HelloTool", {"name": "Bob"}, "Hello my darling Bob!", "call_n2HaWg9KFP0BZDqXv6G4b3nJ", True),
        ("ByeTool", {"name": "Bob"}, "Bye my dear Bob!", "call_dOeEHJDI0liHrCdFWTpkTsuO", True),
    ]
    assert all(c.requested for c in trace.steps[0].tool_calls)
    assert trace.final_output == "Hello my darling Bob! And, bye my dear Bob!"


def test_openinference_single_chat_span_round_trip_in_input() -> None:
    record = load_attribute_map(FIXTURES / "openinference-otel_genai_client_span_tool_calls.json")
    (trace,) = assemble([record])
    assert trace.input == "Weather in Paris?"
    (step,) = trace.steps
    assert step.tool_calls == []  # the round trip is history in the input, not this turn's request
    assert step.output == "The weather in Paris is currently rainy with a temperature of 57°F."
    assert step.model == "gpt-4-0613"
    assert (step.usage.input_tokens, step.usage.output_tokens) == (97, 52)
