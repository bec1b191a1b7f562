"""Scripted LangGraph ``create_react_agent`` runs with a fake tool-calling chat model (no network).

``ScriptedToolModel`` is langchain-core's ``GenericFakeChatModel`` with ``bind_tools`` (returning
itself: the script already knows which tools to call), replaying AIMessages that carry ``tool_calls``.
Instrumentation (OpenInference / OpenLLMetry LangChain) is the caller's business.

``run_researcher``:

- turn 1: ``search(query="x")`` and ``fetch_page(url="https://example.test/x")`` in parallel;
- turns 2 and 3: ``search(query="x")`` again, same arguments (a loop: 3 identical calls in all);
- turn 4: the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent

QUESTION = "Find x."
ANSWER = "I could not find anything about x."
PAGE_URL = "https://example.test/x"
MODEL_NAME = "scripted-research"

SCRIPT = [
    AIMessage(content="", tool_calls=[
        {"name": "search", "args": {"query": "x"}, "id": "call_search_1", "type": "tool_call"},
        {"name": "fetch_page", "args": {"url": PAGE_URL}, "id": "call_fetch_1", "type": "tool_call"},
    ]),
    AIMessage(content="", tool_calls=[{"name": "search", "args": {"query": "x"}, "id": "call_search_2", "type": "tool_call"}]),
    AIMessage(content="Trying once more.", tool_calls=[
        {"name": "search", "args": {"query": "x"}, "id": "call_search_3", "type": "tool_call"},
    ]),
    AIMessage(content=ANSWER),
]


class ScriptedToolModel(GenericFakeChatModel):
    """A fake chat model that LangGraph's ReAct agent accepts (``bind_tools``) and that names its model."""

    model_name: str = MODEL_NAME

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedToolModel:
        return self

    @property
    def _llm_type(self) -> str:
        return "scripted-tool-model"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name}


@tool
def search(query: str) -> str:
    """Search the web."""
    return "no results"


@tool
def fetch_page(url: str) -> str:
    """Fetch a web page."""
    return "404 not found"


def run_researcher(callbacks: Sequence[Any] = ()) -> str:
    model = ScriptedToolModel(messages=iter([m.model_copy() for m in SCRIPT]))
    agent = create_react_agent(model, [search, fetch_page], name="researcher")
    result = agent.invoke({"messages": [("user", QUESTION)]}, config={"callbacks": list(callbacks)})
    return str(result["messages"][-1].content)


SCENARIOS: dict[str, Callable[..., str]] = {"researcher": run_researcher}
