"""Conversations: agent runs sharing ``gen_ai.conversation.id`` (or ``session.id``).

Each run gets the earlier runs of its conversation as ``prior_turns`` (oldest
first), so evaluators such as ``agent_memory`` see what was said before.
Offline, ``stitch`` does it over a whole set of traces; online,
``ConversationStore`` remembers the recent turns of recent conversations,
bounded in both, as traces complete.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from ..model import AgentTrace, ConversationTurn


def turn_of(trace: AgentTrace) -> ConversationTurn:
    return ConversationTurn(
        trace_id=trace.trace_id,
        agent_span_id=trace.agent_span_id,
        input=trace.input,
        final_output=trace.final_output,
        start_time_unix_nano=trace.start_time_unix_nano,
    )


def stitch(traces: Sequence[AgentTrace], max_turns: int = 20) -> list[AgentTrace]:
    """Give each run the earlier runs of its conversation (by start time). Pure."""
    by_conversation: dict[str, list[AgentTrace]] = {}
    for trace in traces:
        if trace.conversation_id:
            by_conversation.setdefault(trace.conversation_id, []).append(trace)
    prior: dict[int, list[ConversationTurn]] = {}
    for runs in by_conversation.values():
        runs = sorted(runs, key=lambda t: t.start_time_unix_nano)
        for number, run in enumerate(runs):
            prior[id(run)] = [turn_of(r) for r in runs[max(0, number - max_turns) : number]]
    return [
        t.model_copy(update={"prior_turns": prior[id(t)]}) if prior.get(id(t)) else t for t in traces
    ]


class ConversationStore:
    """Recent turns of recent conversations, for the live pipeline. Single-threaded (collector)."""

    def __init__(self, max_conversations: int = 1000, max_turns: int = 20) -> None:
        self.max_conversations = max_conversations
        self.max_turns = max_turns
        self._turns: OrderedDict[str, list[ConversationTurn]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._turns)

    def attach(self, trace: AgentTrace) -> AgentTrace:
        """Return ``trace`` with the turns seen before it, and remember it as a turn."""
        conversation = trace.conversation_id
        if not conversation:
            return trace
        turns = self._turns.pop(conversation, [])
        earlier = [t for t in turns if t.start_time_unix_nano <= trace.start_time_unix_nano]
        turns.append(turn_of(trace))
        turns.sort(key=lambda t: t.start_time_unix_nano)
        self._turns[conversation] = turns[-self.max_turns :]
        if len(self._turns) > self.max_conversations:
            self._turns.popitem(last=False)
        return trace.model_copy(update={"prior_turns": earlier}) if earlier else trace
