"""Property-based tests (hypothesis) of ``assemble`` invariants on random agent traces.

A generated trace: one agent span; N LLM turns in strictly increasing time, each
requesting K tool calls (with call ids, or sometimes none); every requested call
runs in a tool span, placed as a sibling of the LLM span, as its child, or under a
per-turn wrapper span (LangGraph ``tools`` node style, a plain span); the tool
spans of one turn run in a random order, sometimes in parallel (overlapping). The
last turn answers with text. Invariants checked:

* every tool span lands in exactly one step, the step of the turn that requested it
  (parallel calls of one turn stay together in one step);
* steps follow the LLM spans' start order, one step per LLM span;
* no span is lost or duplicated across steps;
* the result serializes losslessly through JSON.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_agent_eval import assemble
from otel_agent_eval.model import AgentTrace
from otel_agent_eval.records import SpanRecord, span_id_hex

TRACE_ID = 0xABCDEF
MS = 1_000_000
TOOL_NAMES = ["search", "lookup", "fetch", "compute"]

PLACEMENTS = ("sibling", "child", "wrapper")


@dataclass
class Generated:
    spans: list[SpanRecord]
    llm_ids: list[int]  # in start order
    tool_turn: dict[int, int] = field(default_factory=dict)  # tool span id -> index of the requesting turn
    wrapper_ids: list[int] = field(default_factory=list)


def _span(span_id: int, parent: int | None, name: str, start_ms: int, end_ms: int, *, offset_ns: int = 0,
          **attrs: object) -> SpanRecord:
    return SpanRecord(
        trace_id=TRACE_ID, span_id=span_id, parent_span_id=parent, name=name,
        start_time_unix_nano=start_ms * MS + offset_ns, end_time_unix_nano=end_ms * MS, attributes=attrs,
    )


arguments = st.dictionaries(
    st.sampled_from(["q", "id", "n", "city"]),
    st.one_of(st.integers(-1000, 1000), st.text(max_size=8), st.booleans()),
    max_size=3,
)


@st.composite
def agent_traces(
    draw: st.DrawFn, placements: tuple[str, ...] = PLACEMENTS, has_id: st.SearchStrategy[bool] = st.booleans()
) -> Generated:
    call = st.tuples(st.sampled_from(TOOL_NAMES), arguments, has_id)  # name, args, has id
    turn = st.tuples(
        st.lists(call, min_size=0, max_size=4),
        st.sampled_from(placements),
        st.permutations(range(4)),  # tool start order within the turn
        st.booleans(),  # parallel (all tools overlap) or sequential
    )
    turns = draw(st.lists(turn, min_size=1, max_size=6))
    final_text = draw(st.text(min_size=1, max_size=20).filter(str.strip))
    next_id = iter(range(2, 10_000))
    spans: list[SpanRecord] = []
    gen = Generated(spans, [])
    t = 0
    call_number = 0
    for index, (calls, placement, order, parallel) in enumerate(turns + [([], "sibling", list(range(4)), False)]):
        llm_id = next(next_id)
        gen.llm_ids.append(llm_id)
        parts: list[dict[str, object]] = []
        ids: list[str | None] = []
        for name, args, with_id in calls:
            call_number += 1
            cid = f"call_{call_number}" if with_id else None
            ids.append(cid)
            part: dict[str, object] = {"type": "tool_call", "name": name, "arguments": args}
            if cid is not None:
                part["id"] = cid
            parts.append(part)
        if not calls:
            parts.append({"type": "text", "content": final_text if index == len(turns) else "thinking"})
        llm_start = t
        llm_end = t + 10 + (10 * len(calls) + 10 if placement == "child" else 0)
        spans.append(_span(
            llm_id, 1, "chat m", llm_start, llm_end,
            **{"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
               "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts}])},
        ))
        if placement == "child":
            parent, tool_t = llm_id, llm_start + 5  # tools run inside the LLM span
        elif placement == "wrapper":
            wrapper = next(next_id)
            gen.wrapper_ids.append(wrapper)
            parent, tool_t = wrapper, llm_end + 2
            spans.append(_span(wrapper, 1, "tools", llm_end + 1, llm_end + 2 + 10 * len(calls) + 10))
        else:
            parent, tool_t = 1, llm_end + 1
        positions = [p for p in order if p < len(calls)]
        for slot, position in enumerate(positions):
            name, args, _ = calls[position]
            tool_id = next(next_id)
            gen.tool_turn[tool_id] = index
            start = tool_t if parallel else tool_t + 10 * slot
            end = start + (10 * len(calls) if parallel else 8)
            attrs: dict[str, object] = {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                "gen_ai.tool.call.arguments": json.dumps(args), "gen_ai.tool.call.result": json.dumps({"ok": position}),
            }
            if ids[position] is not None:
                attrs["gen_ai.tool.call.id"] = ids[position]
            # parallel tools start 1 us apart: real clocks rarely tie (ties: test_tied_start_times_... below)
            spans.append(_span(tool_id, parent, f"execute_tool {name}", start, end, offset_ns=slot * 1000, **attrs))
        t = max(s.end_time_unix_nano for s in spans) // MS + 5
    spans.insert(0, _span(1, None, "invoke_agent a", 0, t + 1, **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}))
    shuffled = draw(st.permutations(spans))  # arrival order must not matter
    gen.spans = list(shuffled)
    return gen


@settings(max_examples=int(__import__("os").environ.get("PROP_EXAMPLES", "200")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(agent_traces())
def test_assembly_invariants(gen: Generated) -> None:
    (trace,) = assemble(gen.spans)
    llm_hex = [span_id_hex(i) for i in gen.llm_ids]

    # one step per LLM span, in LLM start order
    assert len(trace.steps) == len(gen.llm_ids)
    step_llms = [[s for s in step.span_ids if s in llm_hex] for step in trace.steps]
    assert step_llms == [[h] for h in llm_hex]
    assert [step.index for step in trace.steps] == list(range(len(trace.steps)))

    # every tool span in exactly one step: the step of the turn that requested it
    placed = Counter(c.span_id for step in trace.steps for c in step.tool_calls if c.span_id is not None)
    assert placed == Counter({span_id_hex(i): 1 for i in gen.tool_turn})
    for index, step in enumerate(trace.steps):
        executed = {c.span_id for c in step.tool_calls if c.span_id is not None}
        expected = {span_id_hex(i) for i, turn_index in gen.tool_turn.items() if turn_index == index}
        assert executed == expected, f"step {index}"
        assert all(c.requested and c.executed for c in step.tool_calls)

    # no span lost or duplicated in the steps' span lists
    listed = Counter(s for step in trace.steps for s in step.span_ids)
    assert all(n == 1 for n in listed.values())
    assert set(listed) == set(llm_hex) | {span_id_hex(i) for i in gen.tool_turn}

    # lossless serialization
    assert AgentTrace.model_validate_json(trace.model_dump_json()) == trace


@settings(max_examples=100, deadline=None)
@given(agent_traces(), st.integers(0, 5))
def test_arrival_order_and_duplicates_do_not_change_the_result(gen: Generated, repeat: int) -> None:
    """The same spans in another order, some delivered twice: the same AgentTrace."""
    (reference,) = assemble(sorted(gen.spans, key=lambda s: s.span_id))
    (shuffled,) = assemble(gen.spans + gen.spans[:repeat])
    assert shuffled == reference


def test_tied_start_times_do_not_depend_on_arrival_order() -> None:
    agent = _span(1, None, "invoke_agent a", 0, 100, **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"})
    chat = _span(2, 1, "chat m", 0, 10, **{"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps(
        [{"role": "assistant", "parts": [{"type": "tool_call", "name": "t", "arguments": {}}] * 2}])})
    t3 = _span(3, 1, "execute_tool t", 20, 30, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "gen_ai.tool.call.result": "r3"})
    t4 = _span(4, 1, "execute_tool t", 20, 30, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "gen_ai.tool.call.result": "r4"})
    assert assemble([agent, chat, t3, t4]) == assemble([agent, chat, t4, t3])
