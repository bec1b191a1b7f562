"""Scripted LangGraph ``create_react_agent`` runs with a fake tool-calling chat model (no network).

``ScriptedToolModel`` is langchain-core's ``GenericFakeChatModel`` with ``bind_tools`` (returning
itself: the script already knows which tools to call), replaying AIMessages that carry ``tool_calls``.
Instrumentation (OpenInference / OpenLLMetry LangChain) is the caller's business.

``run_researcher``:

- turn 1: ``search(query="x")`` and ``fetch_page(url="https://example.test/x")`` in parallel;
- turns 2 and 3: ``search(query="x")`` again, same arguments (a loop: 3 identical calls in all);
- turn 4: the answer.

``run_team`` (multi-agent): a parent ``StateGraph`` named ``team`` whose ``supervisor`` node (a plain
function calling its own scripted model through a prompt chain, routing on the reply's text with ``Command(goto=...)``) sends
the work to two ``create_react_agent`` graphs used as nodes: ``research_expert`` (node ``research``)
calls ``search(query="x")`` then answers, ``writer`` calls ``write_file(text=...)`` then answers;
then the supervisor finishes.

``run_handoff_team`` (multi-agent, the ``langgraph-supervisor`` layout built by hand): the supervisor is
itself a ``create_react_agent`` graph (node ``supervisor``) whose ``transfer_to_<agent>`` tools return
``Command(graph=Command.PARENT, goto=<agent>)``; each worker node calls its ``create_react_agent`` graph
and hands back (the library's ``transfer_back_to_supervisor`` message pair) along an edge to the supervisor,
which runs again. The supervisor hands off to ``research_expert`` (``search``), then to ``writer``
(``write_file``), then answers: three runs of the supervisor node. ``handoffs`` changes whom it hands
off to, in order (a worker run twice replays its script twice).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState, create_react_agent
from langgraph.types import Command

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


TEAM_QUESTION = "Find x and write it down."
TEAM_FINDING = "x is 42."
TEAM_ANSWER = "Wrote it down."
SUPERVISOR_MODEL = "scripted-supervisor"
SUPERVISOR_SCRIPT = [AIMessage(content="research"), AIMessage(content="writer"), AIMessage(content="FINISH")]
"""The supervisor's replies: the node to run next (``FINISH``: end)."""
TEAM_RESEARCH_SCRIPT = [
    AIMessage(content="", tool_calls=[{"name": "search", "args": {"query": "x"}, "id": "call_team_search", "type": "tool_call"}]),
    AIMessage(content=TEAM_FINDING),
]
TEAM_WRITER_SCRIPT = [
    AIMessage(content="", tool_calls=[
        {"name": "write_file", "args": {"text": TEAM_FINDING}, "id": "call_team_write", "type": "tool_call"},
    ]),
    AIMessage(content=TEAM_ANSWER),
]


@tool
def write_file(text: str) -> str:
    """Write text to a file."""
    return "written"


def _scripted(script: list[AIMessage], model_name: str = MODEL_NAME) -> ScriptedToolModel:
    return ScriptedToolModel(model_name=model_name, messages=iter([m.model_copy() for m in script]))


def run_team(callbacks: Sequence[Any] = ()) -> str:
    supervisor_model = _scripted(SUPERVISOR_SCRIPT, SUPERVISOR_MODEL)

    router = ChatPromptTemplate.from_messages([("system", "Route the work."), MessagesPlaceholder("messages")])
    route_chain = router | supervisor_model  # a chain inside a plain node: no sub-agent

    def supervisor(state: MessagesState) -> Command:
        route = str(route_chain.invoke({"messages": state["messages"]}).content)
        return Command(goto=END if route == "FINISH" else route)

    graph = StateGraph(MessagesState)
    graph.add_node("supervisor", supervisor, destinations=("research", "writer", END))
    graph.add_node("research", create_react_agent(_scripted(TEAM_RESEARCH_SCRIPT), [search], name="research_expert"))
    graph.add_node("writer", create_react_agent(_scripted(TEAM_WRITER_SCRIPT), [write_file], name="writer"))
    graph.add_edge(START, "supervisor")
    graph.add_edge("research", "supervisor")
    graph.add_edge("writer", "supervisor")
    app = graph.compile(name="team")
    result = app.invoke({"messages": [("user", TEAM_QUESTION)]}, config={"callbacks": list(callbacks)})
    return str(result["messages"][-1].content)


def handoff_call_id(index: int, agent: str) -> str:
    """The id of the supervisor's ``index``-th handoff call (to ``agent``)."""
    return f"call_to_{agent}_{index}"


def handoff_supervisor_script(handoffs: Sequence[str]) -> list[AIMessage]:
    """The supervisor's replies: one handoff per turn, then the answer."""
    calls = [[{"name": f"transfer_to_{agent}", "args": {}, "id": handoff_call_id(i, agent), "type": "tool_call"}]
             for i, agent in enumerate(handoffs)]
    return [*(AIMessage(content="", tool_calls=c) for c in calls), AIMessage(content=TEAM_ANSWER)]


def transferred(agent: str) -> str:
    """The ToolMessage content of a handoff to ``agent`` (``langgraph-supervisor``'s wording)."""
    return f"Successfully transferred to {agent}"


def handoff_tool(agent: str) -> BaseTool:
    """``langgraph-supervisor``'s ``create_handoff_tool``: move to ``agent``'s node of the parent graph."""

    @tool(f"transfer_to_{agent}")
    def transfer(state: Annotated[dict, InjectedState], tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
        """Ask another agent for help."""
        message = ToolMessage(content=transferred(agent), name=f"transfer_to_{agent}", tool_call_id=tool_call_id)
        return Command(goto=agent, graph=Command.PARENT, update={"messages": [*state["messages"], message]})

    return transfer


def _worker(agent: Any) -> Callable[[MessagesState], dict[str, Any]]:
    """A worker node as ``langgraph-supervisor`` makes it: run the agent, then hand back to the supervisor."""

    def call_agent(state: MessagesState) -> dict[str, Any]:
        messages = agent.invoke(state)["messages"]
        back_id = f"call_back_from_{agent.name}"
        back = [
            AIMessage(content="Transferring back to supervisor", name=agent.name, tool_calls=[
                {"name": "transfer_back_to_supervisor", "args": {}, "id": back_id, "type": "tool_call"}]),
            ToolMessage(content=transferred("supervisor"), name="transfer_back_to_supervisor", tool_call_id=back_id),
        ]
        return {"messages": [*messages, *back]}

    return call_agent


def run_handoff_team(callbacks: Sequence[Any] = (), handoffs: Sequence[str] = ("research_expert", "writer")) -> str:
    supervisor = create_react_agent(
        _scripted(handoff_supervisor_script(handoffs), SUPERVISOR_MODEL),
        [handoff_tool("research_expert"), handoff_tool("writer")],
        name="supervisor",
    )
    research = create_react_agent(
        _scripted(TEAM_RESEARCH_SCRIPT * handoffs.count("research_expert")), [search], name="research_expert",
    )
    writer = create_react_agent(_scripted(TEAM_WRITER_SCRIPT * handoffs.count("writer")), [write_file], name="writer")
    graph = StateGraph(MessagesState)
    graph.add_node(supervisor, destinations=("research_expert", "writer", END))
    for worker in (research, writer):
        graph.add_node(worker.name, _worker(worker))
        graph.add_edge(worker.name, "supervisor")
    graph.add_edge(START, "supervisor")
    app = graph.compile(name="team")
    result = app.invoke({"messages": [("user", TEAM_QUESTION)]}, config={"callbacks": list(callbacks)})
    return str(result["messages"][-1].content)


SCENARIOS: dict[str, Callable[..., str]] = {
    "researcher": run_researcher, "team": run_team, "handoff_team": run_handoff_team,
}
