"""A LangGraph graph whose create_task tool calls run in the ledger, once, after the
actor's approval. The agent node is scripted so the example runs without a model:
put your model's node in its place.

    pip install './clients/python[langgraph]'
    python examples/agents/langgraph_example.py [--decline]

The environment is described in common.py. It prints the tool message: the
ledger's redacted result, or the refusal when the actor declined.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
from typing import Any

from common import gate, tasks_tool
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command

from ledger_client.langgraph import ledger_tool_node


def agent(state: MessagesState) -> dict[str, list[AIMessage]]:
    """A scripted model: asks create_task once, then says done."""
    if isinstance(state["messages"][-1], HumanMessage):
        call = {
            "name": "create_task",
            "args": {"title": "Buy milk"},
            "id": "call_" + secrets.token_hex(8),
        }
        return {"messages": [AIMessage(content="", tool_calls=[call])]}
    return {"messages": [AIMessage(content="Done.")]}


async def main(approve: bool) -> None:
    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("ledger", ledger_tool_node(gate(approve=approve), {"create_task": tasks_tool()}))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges(
        "agent", lambda s: "ledger" if s["messages"][-1].tool_calls else END
    )
    graph.add_edge("ledger", "agent")
    app = graph.compile(checkpointer=InMemorySaver())  # a durable checkpointer in production
    config: Any = {"configurable": {"thread_id": "example"}}
    state = await app.ainvoke({"messages": [HumanMessage("Remind me to buy milk")]}, config)
    while "__interrupt__" in state:  # awaiting the actor: resume, and the node reads the ledger
        await asyncio.sleep(0.2)
        state = await app.ainvoke(Command(resume=True), config)
    for message in state["messages"]:
        if isinstance(message, ToolMessage):
            print(message.content)


if __name__ == "__main__":
    asyncio.run(main(approve="--decline" not in sys.argv[1:]))
