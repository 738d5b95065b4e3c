"""LangGraph: tool calls that the ledger runs once, after the actor's approval.

Install with ``pip install 'execution-ledger-client[langgraph]'``.

    gate = LedgerGate(AsyncClient(url, token=proposer_token), actor, deliver,
                      journal=FileJournal("tool-calls.db"))
    graph = StateGraph(MessagesState)
    graph.add_node("agent", call_model)
    graph.add_node("ledger", ledger_tool_node(gate, {"create_task": TASKS}))
    ...
    app = graph.compile(checkpointer=saver)

    await app.ainvoke({"messages": [...]}, config)       # stops: __interrupt__
    ...                                                  # the actor decides in the channel
    await app.ainvoke(Command(resume=True), config)      # the tool messages are the ledger's

:func:`ledger_call` (inside any node) and :func:`ledger_tool_node` (a node of
its own) propose each tool call to the ledger, keyed by the tool call's id,
and ``interrupt`` while the actor has not decided. The graph resumes the node
from its start: the journal turns the proposal into a read (no request is
sent again), and the node reads the ledger's decision and result. The
resume value is not trusted: only the ledger says what was approved, and the
node never performs the effect, so a node resumed twice reads the same
result and the ledger runs the call once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import interrupt

from ledger_client.gate import Decision, GatedTool, LedgerGate, LedgerResult

DEFAULT_RESULT_TIMEOUT = 60.0
INTERRUPT_KEY = "execution_ledger"
"""The key of the interrupt's value: a list of the calls awaiting the actor."""


def _awaiting(decisions: list[Decision]) -> dict[str, Any]:
    pending = [d for d in decisions if d.pending]
    calls = [
        {"call_id": d.call_id, "proposal_id": d.proposal_id, "status": d.status} for d in pending
    ]
    return {INTERRUPT_KEY: calls}


async def _decide(gate: LedgerGate, proposed: list[Decision]) -> list[Decision]:
    decisions = proposed
    while any(d.pending for d in decisions):
        interrupt(_awaiting(decisions))  # on resume: its value, which is not trusted
        decisions = [await gate.decision(d.call_id) for d in decisions]
    return decisions


async def ledger_call(
    gate: LedgerGate,
    tool: GatedTool,
    call_id: str,
    arguments: Mapping[str, Any],
    *,
    result_timeout: float = DEFAULT_RESULT_TIMEOUT,
) -> LedgerResult | Decision:
    """One tool call through the ledger, inside a node: the ledger's result once
    approved, or the refusing :class:`~ledger_client.gate.Decision` (nothing ran).
    Interrupts the graph while the actor has not decided."""
    (decision,) = await _decide(gate, [await gate.propose(tool, call_id, arguments)])
    if decision.refused:
        return decision
    return await gate.result(call_id, timeout=result_timeout)


def _message(call: Mapping[str, Any], outcome: LedgerResult | Decision | str) -> ToolMessage:
    if isinstance(outcome, LedgerResult):
        status = "success" if outcome.succeeded else "error"
        content = json.dumps(outcome.to_json(), sort_keys=True)
    elif isinstance(outcome, Decision):
        status = "error"
        told = {"proposal_id": outcome.proposal_id, "status": outcome.status, "ran": False}
        content = json.dumps(told, sort_keys=True)
    else:
        status, content = "error", outcome
    return ToolMessage(content=content, tool_call_id=call["id"], name=call["name"], status=status)


def ledger_tool_node(
    gate: LedgerGate,
    tools: Mapping[str, GatedTool],
    *,
    messages_key: str = "messages",
    result_timeout: float = DEFAULT_RESULT_TIMEOUT,
) -> Any:
    """An async node running the tool calls of the state's last AI message through
    the ledger: ``tools`` names the gated tools; it answers one ``ToolMessage``
    per call (a call of another tool is answered with an error, never run)."""
    gated = dict(tools)

    async def node(state: Mapping[str, Any]) -> dict[str, list[ToolMessage]]:
        messages = state[messages_key]
        last = messages[-1] if messages else None
        if not isinstance(last, AIMessage):
            raise ValueError(f"the last of {messages_key!r} is not an AI message with tool calls")
        calls: list[dict[str, Any]] = [dict(call) for call in last.tool_calls]
        ours = [call for call in calls if call["name"] in gated]
        for call in ours:
            if not call.get("id"):
                raise ValueError(f"a call of {call['name']!r} has no id (the idempotency key)")
        proposed = [await gate.propose(gated[c["name"]], c["id"], c["args"]) for c in ours]
        decided = {d.call_id: d for d in await _decide(gate, proposed)}
        answers: list[ToolMessage] = []
        for call in calls:
            if call["name"] not in gated:
                answers.append(_message(call, f"tool {call['name']!r} is not available"))
                continue
            decision = decided[call["id"]]
            outcome: LedgerResult | Decision = decision
            if not decision.refused:
                outcome = await gate.result(call["id"], timeout=result_timeout)
            answers.append(_message(call, outcome))
        return {messages_key: answers}

    return node
