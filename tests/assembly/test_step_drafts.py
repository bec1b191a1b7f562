"""Step drafts on their own: the paths of ``StepDraft.open_call`` the recorded traces seldom take."""

from __future__ import annotations

from otel_agent_eval.assembly.dialects.base import TOOL, Operation
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
