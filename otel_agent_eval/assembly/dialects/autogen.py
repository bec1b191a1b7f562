"""AutoGen AgentChat (``tests/test_frameworks_autogen.py``): structural rules, no span reading of its own.

AutoGen's native spans (``invoke_agent``, ``execute_tool``: ``gen_ai.system`` ``autogen``) are read by the
semconv dialect, its model calls by the LLM instrumentation users add (OpenLLMetry's, or OpenInference's
``autogen-agentchat`` instrumentor, whose AGENT span sits inside each native ``invoke_agent``). Rules
(``RULES``; ``assembly/rules.py``):

* ``rules.StackedAgents``: the native ``invoke_agent`` around OpenInference's AGENT span of the same agent
  is that one agent;
* ``HandoffRelay``: a ``Swarm`` hands off by sending the next agent's model, after the user's message, a
  *user* message ``Transferred to {agent}, adopting the role of {agent} immediately.`` (the default
  ``Handoff.message``); that message is AutoGen's, not the user's, so it is no agent's task. A handoff
  with a custom message is not recognised.
"""

from __future__ import annotations

from typing import Any

from ..rules import STACKED_AGENTS, Rule, Scope
from .adk import OTHER_AGENT
from .base import Message, last_user_text


def handoff_message(agent: str) -> str:
    """AutoGen's default handoff message to ``agent`` (``autogen_agentchat.base.Handoff.message``)."""
    return f"Transferred to {agent}, adopting the role of {agent} immediately."


class HandoffRelay(Rule):
    """The handoff message AutoGen sends an agent's model as a user message is not that agent's task (module doc)."""

    def regroup(self, assembly: Any, scopes: dict[int, Scope]) -> None:
        for scope in scopes.values():
            agent = scope.agent
            if agent is None or not agent.agent_name or not scope.llms or last_user_text(agent.input_messages):
                continue  # the task is read from the first model call's input only when the agent span has none
            relay = handoff_message(agent.agent_name)
            messages: list[Message] = scope.llms[0].input_messages or []
            for message in reversed(messages):
                if message.role == "user":
                    if message.texts == [relay]:
                        message.role = OTHER_AGENT
                    break


RULES = (STACKED_AGENTS, HandoffRelay())
