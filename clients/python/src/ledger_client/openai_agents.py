"""The OpenAI Agents SDK: function tools that the ledger runs once, after the actor's approval.

Install with ``pip install 'execution-ledger-client[openai-agents]'``.

    gate = LedgerGate(AsyncClient(url, token=proposer_token), actor, deliver,
                      journal=FileJournal("tool-calls.db"))
    create_task = ledger_tool(gate, TASKS, name="create_task",
                              description="Create a task", params_json_schema=schema)
    agent = Agent(name="assistant", tools=[create_task])

    result = await Runner.run(agent, "Remind me to buy milk")  # stops at the approval
    state = result.to_state()                                  # keep state.to_string()
    ...                                                        # the actor decides in the channel
    await apply_decisions(gate, state)                         # the ledger's decision, not ours
    result = await Runner.run(agent, state)                    # the ledger's result

The tool's ``needs_approval`` proposes the call to the ledger, keyed by the
tool call's id, and asks the run to stop. :func:`apply_decisions` approves or
rejects each stopped call in the run state as the actor decided in the
ledger. The tool itself never performs the effect: it answers the attempt's
redacted result, so a run resumed twice reads the same result and the ledger
runs the call once. A call the run state approves but the ledger does not is
told so and nothing runs.
"""

from __future__ import annotations

import json
from typing import Any

from agents import FunctionTool, RunContextWrapper, RunState, ToolApprovalItem
from agents.tool_context import ToolContext

from ledger_client.gate import GatedTool, LedgerGate

DEFAULT_RESULT_TIMEOUT = 60.0


def ledger_tool(
    gate: LedgerGate,
    tool: GatedTool,
    *,
    name: str,
    description: str,
    params_json_schema: dict[str, Any],
    strict_json_schema: bool = False,
    result_timeout: float = DEFAULT_RESULT_TIMEOUT,
) -> FunctionTool:
    """A function tool whose every call is a proposal of ``tool`` to the ledger.

    ``params_json_schema`` is the arguments' schema the model sees (a
    capability's ``content_schema`` from ``GET /executors``, for one); the
    arguments become the spec's content. The tool's output is the JSON of
    :class:`~ledger_client.gate.LedgerResult`, waiting up to
    ``result_timeout`` seconds for the attempt to settle.
    """

    async def needs_approval(
        context: RunContextWrapper[Any], arguments: dict[str, Any], call_id: str
    ) -> bool:
        await gate.propose(tool, call_id, arguments)
        return True  # the run stops; apply_decisions records the ledger's answer

    async def answer(context: ToolContext[Any], arguments: str) -> str:
        decision = await gate.decision(context.tool_call_id)
        if not decision.approved:
            told = {"proposal_id": decision.proposal_id, "status": decision.status, "ran": False}
            return json.dumps(told, sort_keys=True)
        result = await gate.result(context.tool_call_id, timeout=result_timeout)
        return json.dumps(result.to_json(), sort_keys=True)

    return FunctionTool(
        name=name,
        description=description,
        params_json_schema=params_json_schema,
        on_invoke_tool=answer,
        strict_json_schema=strict_json_schema,
        needs_approval=needs_approval,
    )


async def apply_decisions(
    gate: LedgerGate, state: RunState[Any, Any], *, wait_seconds: float = 0.0
) -> list[ToolApprovalItem]:
    """Approve or reject, in ``state``, each stopped call this gate proposed, as its
    actor decided in the ledger (waiting up to ``wait_seconds`` for each).

    Answers the calls still awaiting a decision, and those this gate did not
    propose (left for the application to decide); resume the run with
    ``Runner.run(agent, state)`` once this list is empty.
    """
    undecided: list[ToolApprovalItem] = []
    for item in state.get_interruptions():
        call_id = item.call_id
        if call_id is None or not gate.knows(call_id):
            undecided.append(item)
            continue
        decision = await gate.decision(call_id, wait_seconds=wait_seconds)
        if decision.approved:
            state.approve(item)
        elif decision.refused:
            message = f"The actor's answer in the ledger: {decision.status}. Nothing was done."
            state.reject(item, rejection_message=message)
        else:
            undecided.append(item)
    return undecided
