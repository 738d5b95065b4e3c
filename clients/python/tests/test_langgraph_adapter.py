"""The LangGraph adapter on a real `ledger serve` (SQLite and the emulator), with a
scripted agent node (no model): the tool message is the ledger's result, a graph
resumed after a crash proposes once and the executor runs once, and a declined call
never runs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agent_world import TASKS, World, new_call_id
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command
from ledger_servers import Actor, LedgerServer, proposal_streams

from ledger_client.gate import LedgerGate
from ledger_client.langgraph import INTERRUPT_KEY, ledger_tool_node


class Crash(Exception):
    """The process dies after the node read the ledger's result, before the checkpoint."""


def app(gate: LedgerGate, saver: InMemorySaver, call_id: str, *, crash: bool = False) -> Any:
    """The graph of one process: a scripted agent asks create_task once, then says done."""

    def agent(state: MessagesState) -> dict[str, list[AIMessage]]:
        if isinstance(state["messages"][-1], HumanMessage):
            call = {"name": "create_task", "args": {"title": "Buy milk"}, "id": call_id}
            return {"messages": [AIMessage(content="", tool_calls=[call])]}
        return {"messages": [AIMessage(content="Done.")]}

    tools = ledger_tool_node(gate, {"create_task": TASKS})

    async def ledger(state: MessagesState) -> dict[str, list[ToolMessage]]:
        answer: dict[str, list[ToolMessage]] = await tools(state)
        if crash:
            raise Crash()
        return answer

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("ledger", ledger)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges(
        "agent", lambda s: "ledger" if s["messages"][-1].tool_calls else END
    )
    graph.add_edge("ledger", "agent")
    return graph.compile(checkpointer=saver)


def tool_message(state: dict[str, Any]) -> ToolMessage:
    (message,) = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    return message


def test_approval_answers_the_ledgers_result_and_a_resume_never_proposes_or_runs_again(
    ledger_server: LedgerServer, actor: Actor, tmp_path: Path
) -> None:
    world = World(ledger_server, actor, tmp_path / "calls.db")
    saver, call_id = InMemorySaver(), new_call_id()
    config: Any = {"configurable": {"thread_id": call_id}}
    before = proposal_streams(ledger_server)

    async def scenario() -> tuple[dict[str, Any], str]:
        first = await app(world.gate(), saver, call_id).ainvoke(
            {"messages": [HumanMessage("Add a task")]}, config
        )
        (stopped,) = first["__interrupt__"]
        assert [c["call_id"] for c in stopped.value[INTERRUPT_KEY]] == [call_id]
        # A resume before the actor has decided stops again, proposing nothing.
        again = await app(world.gate(), saver, call_id).ainvoke(Command(resume=True), config)
        assert "__interrupt__" in again
        attempt_id = world.decide(call_id, approve=True)
        assert attempt_id is not None
        with pytest.raises(Crash):
            await app(world.gate(), saver, call_id, crash=True).ainvoke(
                Command(resume=True), config
            )
        done = await app(world.gate(), saver, call_id).ainvoke(Command(resume=True), config)
        await world.close()
        return done, attempt_id

    done, attempt_id = asyncio.run(scenario())
    message = tool_message(done)
    ledger = world.ledger_result(attempt_id)
    assert json.loads(str(message.content)) == ledger.to_json()
    assert message.status == "success" and done["messages"][-1].content == "Done."
    assert world.proposals_sent == 1 and len(world.delivered) == 1
    assert proposal_streams(ledger_server) - before == 1
    assert world.executor_calls(ledger) == 1
    assert world.sent[("GET", "execution-attempts")] >= 1  # the result was read, not made


def test_a_declined_call_answers_an_error_message_and_never_runs(
    ledger_server: LedgerServer, actor: Actor, tmp_path: Path
) -> None:
    world = World(ledger_server, actor, tmp_path / "calls.db")
    saver, call_id = InMemorySaver(), new_call_id()
    config: Any = {"configurable": {"thread_id": call_id}}

    async def scenario() -> dict[str, Any]:
        await app(world.gate(), saver, call_id).ainvoke(
            {"messages": [HumanMessage("Add a task")]}, config
        )
        assert world.decide(call_id, approve=False) is None
        done: dict[str, Any] = await app(world.gate(), saver, call_id).ainvoke(
            Command(resume=True), config
        )
        await world.close()
        return done

    message = tool_message(asyncio.run(scenario()))
    told = json.loads(str(message.content))
    assert message.status == "error"
    assert told["status"] == "declined" and told["ran"] is False
    assert world.sent[("GET", "execution-attempts")] == 0 and world.proposals_sent == 1
