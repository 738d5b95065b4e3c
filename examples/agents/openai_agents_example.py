"""An OpenAI Agents SDK agent whose create_task tool runs in the ledger, once, after
the actor's approval. The model is scripted so the example runs without a model
provider: give the Agent your model instead.

    pip install './clients/python[openai-agents]'
    python examples/agents/openai_agents_example.py [--decline]

The environment is described in common.py. It prints what the tool answered the
model: the ledger's redacted result, or the refusal when the actor declined.
"""

from __future__ import annotations

import asyncio
import secrets
import sys

from agents import Agent, Runner, RunState, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from common import TASK_SCHEMA, gate, tasks_tool

from ledger_client.openai_agents import apply_decisions, ledger_tool


async def main(approve: bool) -> None:
    set_tracing_disabled(True)
    ledger = gate(approve=approve)
    create_task = ledger_tool(
        ledger,
        tasks_tool(),
        name="create_task",
        description="Create a task",
        params_json_schema=TASK_SCHEMA,
    )
    call_id = "call_" + secrets.token_hex(8)
    model = ScriptedModel(
        [
            [function_call("create_task", {"title": "Buy milk"}, call_id=call_id)],
            [assistant_message("Done.")],
        ]
    )
    agent = Agent(name="assistant", model=model, tools=[create_task])
    result = await Runner.run(agent, "Remind me to buy milk")  # stops at the approval
    saved = result.to_state().to_string()  # what a real agent keeps until the actor answers
    state = await RunState.from_string(agent, saved)
    while await apply_decisions(ledger, state, wait_seconds=30):
        pass  # still awaiting the actor
    result = await Runner.run(agent, state)
    for item in result.new_items:
        if item.type == "tool_call_output_item":
            print(item.output)


if __name__ == "__main__":
    asyncio.run(main(approve="--decline" not in sys.argv[1:]))
