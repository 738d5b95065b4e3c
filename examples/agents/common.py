"""What both agent examples share: the ledger and the actor from the environment, the
gated tool, and a stand-in for the actor's chat that approves (or declines) what it is
shown. In a real deployment ``deliver`` posts the presentation to the chat service and
the actor answers there; the agent never holds the token.

    LEDGER_URL              the ledger (http://127.0.0.1:8000)
    LEDGER_PROPOSER_TOKEN   the agent's proposer token
    LEDGER_ACTOR_TOKEN      a token of the actor (role actor): reads the attempt's status
    LEDGER_CHANNEL_TOKEN    the stand-in chat's channel token (it approves or declines)
    LEDGER_ACTOR            actor_id,identity_binding_id,channel_binding_id,conversation_key
    LEDGER_CAPABILITY       the capability the tool proposes (fake.provider_idempotency)
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from ledger_client import AsyncClient, Client, Provenance, SpecDigests, sha256_digest
from ledger_client.gate import FileJournal, GatedTool, LedgerGate, PendingApproval

TASK_SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}},
    "required": ["title"],
    "additionalProperties": False,
}


def env(name: str, default: str | None = None) -> str:
    value = os.environ.get(name, default)
    if not value:
        sys.exit(f"set {name} (see the module docstring)")
    return value


def tasks_tool() -> GatedTool:
    digests = SpecDigests(
        plugin_build=sha256_digest("the agent example, build 1"),  # schema_digest: the build's
        policy_digest=sha256_digest("create_task: the actor approves each call"),
    )
    capability = env("LEDGER_CAPABILITY", "fake.provider_idempotency")
    return GatedTool(
        capability, permission="tasks.write", effect="create", destination="tasks", digests=digests
    )


def gate(*, approve: bool) -> LedgerGate:
    """A gate whose stand-in chat answers each presentation at once."""
    url = env("LEDGER_URL")
    actor = Provenance(*env("LEDGER_ACTOR").split(","))
    channel_token = env("LEDGER_CHANNEL_TOKEN")

    async def deliver(pending: PendingApproval) -> None:
        print(f"shown to {pending.actor.actor_id}: {pending.proposal.preview}")
        with Client(url, token=channel_token) as chat:  # the actor's answer in the chat
            token = pending.presentation.token
            chat.approve(token) if approve else chat.decline(token)

    journal = Path(os.environ.get("LEDGER_JOURNAL") or tempfile.mkdtemp()) / "tool-calls.db"
    return LedgerGate(
        AsyncClient(url, token=env("LEDGER_PROPOSER_TOKEN")),
        actor,
        deliver,
        reader=AsyncClient(url, token=env("LEDGER_ACTOR_TOKEN")),
        journal=FileJournal(journal),
    )
