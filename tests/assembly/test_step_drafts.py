"""Step drafts on their own: the paths of ``StepDraft.open_call`` the recorded traces seldom take, and
``from_llm`` (``from_step`` written out for one model call) against ``from_step``."""

from __future__ import annotations

import random

from otel_agent_eval.assembly.dialects.base import LLM, TOOL, Message, Operation, RequestedCall
from otel_agent_eval.assembly.steps import StepDraft
from otel_agent_eval.model import tool_call_fields
from otel_agent_eval.records import SpanRecord


def _tool(name: str, handoff_to: str) -> Operation:
    record = SpanRecord(trace_id=1, span_id=9, parent_span_id=None, name=f"execute_tool {name}", start_time_unix_nano=5,
                        end_time_unix_nano=6)
    return Operation(record, TOOL, tool_name=name, handoff_to=handoff_to)


def test_a_renamed_handoff_tool_fulfils_the_one_open_call() -> None:
    # The handoff span names its target ("billing"), the requested call has a name that does not mention
    # it (a renamed handoff tool): with one call still open, that call is the one the handoff fulfils.
    draft = StepDraft(start=0)
    draft.calls.append(tool_call_fields("escalate", {"reason": "refund"}, "c1"))
    done = tool_call_fields("lookup", {}, "c0")
    done["executed"] = True
    draft.calls.insert(0, done)
    assert draft.open_call(_tool("escalate", "billing"), by="handoff") is draft.calls[1]
    draft.calls.append(tool_call_fields("search", {}, "c2"))  # two open calls: no guess
    assert draft.open_call(_tool("escalate", "billing"), by="handoff") is None


def test_a_model_calls_step_is_the_same_written_out_as_through_from_step() -> None:
    # ``from_llm`` writes ``from_step(None, [llm])`` out for the common case (speed): the two must agree
    # on every message shape, empty texts, reasoning and repeated call ids included.
    rng = random.Random(7)
    texts = [[], [""], ["a"], ["a", "b"], ["", "c"]]
    for case in range(500):
        messages = [
            Message(
                rng.choice(["assistant", "tool"]), texts=list(rng.choice(texts)), reasoning=list(rng.choice(texts)),
                tool_calls=[RequestedCall(rng.choice("xy"), rng.choice([None, {"q": 1}, "raw"]),
                                          rng.choice([None, "c1", "c2"])) for _ in range(rng.randrange(3))],
            )
            for _ in range(rng.randrange(4))
        ]
        record = SpanRecord(trace_id=1, span_id=case + 1, parent_span_id=None, name="chat", start_time_unix_nano=3,
                            end_time_unix_nano=4)
        llm = Operation(record, LLM, output_messages=messages or rng.choice([None, []]))
        fast, general = StepDraft.from_llm(llm), StepDraft.from_step(None, [llm])
        fields = ("start", "llm", "llms", "step", "calls", "text", "reasoning", "calls_in_text")
        assert [getattr(fast, f) for f in fields] == [getattr(general, f) for f in fields], messages
