"""The OpenAI Agents SDK adapter on a real `ledger serve` (SQLite and the emulator),
with a scripted model (no model is called): the tool's output is the ledger's result,
a run resumed after a crash proposes once and the executor runs once, and a declined
call never runs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from agent_world import TASK_SCHEMA, TASKS, World, new_call_id
from agents import Agent, Runner, RunResult, RunState, ToolCallOutputItem, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from ledger_servers import Actor, LedgerServer, proposal_streams

from ledger_client.gate import LedgerGate
from ledger_client.openai_agents import apply_decisions, ledger_tool

set_tracing_disabled(True)  # no trace is exported anywhere


def assistant(gate: LedgerGate, *steps: Any) -> Agent[Any]:
    """An agent whose model says exactly ``steps``, with the gated create_task tool."""
    tool = ledger_tool(
        gate, TASKS, name="create_task", description="Create a task", params_json_schema=TASK_SCHEMA
    )
    return Agent(name="assistant", model=ScriptedModel(steps), tools=[tool])


def asks(call_id: str, title: str) -> Any:
    return [function_call("create_task", {"title": title}, call_id=call_id)]


def tool_output(result: RunResult) -> dict[str, Any]:
    (item,) = [i for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    output: dict[str, Any] = json.loads(item.output)
    return output


def test_approval_answers_the_ledgers_result_and_a_resume_never_proposes_or_runs_again(
    ledger_server: LedgerServer, actor: Actor, tmp_path: Path
) -> None:
    world = World(ledger_server, actor, tmp_path / "calls.db")
    call_id = new_call_id()
    before = proposal_streams(ledger_server)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], str]:
        # The first process proposes, then dies before it saves the run state.
        lost = await Runner.run(assistant(world.gate(), asks(call_id, "Buy milk")), "Add a task")
        assert [i.call_id for i in lost.interruptions] == [call_id]
        # Started again, the run asks the same call: nothing more is proposed.
        gate = world.gate()
        first = await Runner.run(assistant(gate, asks(call_id, "Buy milk")), "Add a task")
        state = first.to_state()
        assert [i.call_id for i in await apply_decisions(gate, state)] == [call_id]  # undecided
        saved = state.to_string()
        attempt_id = world.decide(call_id, approve=True)
        assert attempt_id is not None
        done = await resume_in(world, saved)
        # The process dies after the tool answered, before it saved: resumed again.
        again = await resume_in(world, saved)
        await world.close()
        return tool_output(done), tool_output(again), attempt_id

    output, again, attempt_id = asyncio.run(scenario())
    ledger = world.ledger_result(attempt_id)
    assert output == again == {**ledger.to_json()}
    assert output["status"] == "succeeded" and output["receipt"] == ledger.receipt
    assert world.proposals_sent == 1 and len(world.delivered) == 1
    assert proposal_streams(ledger_server) - before == 1
    assert world.executor_calls(ledger) == 1
    assert world.sent[("GET", "execution-attempts")] >= 1  # the result was read, not made


async def resume_in(world: World, saved: str) -> RunResult:
    gate = world.gate()
    agent = assistant(gate, [assistant_message("Done.")])
    state = await RunState.from_string(agent, saved)
    assert await apply_decisions(gate, state) == []
    return await Runner.run(agent, state)


def test_a_declined_call_is_rejected_in_the_run_and_never_runs(
    ledger_server: LedgerServer, actor: Actor, tmp_path: Path
) -> None:
    world = World(ledger_server, actor, tmp_path / "calls.db")
    call_id = new_call_id()

    async def scenario() -> tuple[str, dict[str, Any]]:
        gate = world.gate()
        first = await Runner.run(assistant(gate, asks(call_id, "Sell the car")), "Add a task")
        saved = first.to_state().to_string()
        assert world.decide(call_id, approve=False) is None
        after = await resume_in(world, saved)
        (item,) = [i for i in after.new_items if isinstance(i, ToolCallOutputItem)]
        decision = await world.gate().decision(call_id)
        await world.close()
        return str(item.output), {"status": decision.status, "attempt": decision.attempt_id}

    told, decision = asyncio.run(scenario())
    assert "declined" in told and "Nothing was done" in told
    assert decision == {"status": "declined", "attempt": None}
    assert world.sent[("GET", "execution-attempts")] == 0  # the tool never asked for a result
