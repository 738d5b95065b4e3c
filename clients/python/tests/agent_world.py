"""What the agent framework adapters' tests share: a gate on the real `ledger serve`,
a channel that approves or declines what was delivered to it, the requests the gate
sent, and the executor's calls counted in the fakes' effect ledger."""

from __future__ import annotations

import secrets
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from ledger_servers import DIGESTS, FAKE, Actor, LedgerServer

from adapters.executors.fake import FileEffectLedger
from ledger_client import AsyncClient, Client
from ledger_client.gate import FileJournal, GatedTool, LedgerGate, LedgerResult, PendingApproval

TASKS = GatedTool(
    FAKE, permission="tasks.write", effect="create", destination="tasks", digests=DIGESTS
)
TASK_SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}},
    "required": ["title"],
    "additionalProperties": False,
}


def new_call_id() -> str:
    return "call_" + secrets.token_hex(12)


def resource(path: str) -> str:
    """What a request is about: ``proposals``, ``presentations``, ``execution-attempts``..."""
    parts = path.split("/api/conversational/", 1)[-1].split("/")
    return parts[2] if len(parts) > 2 else parts[0]


@dataclass
class World:
    """One test's agent processes: each :meth:`gate` is a new process's, on one journal."""

    server: LedgerServer
    actor: Actor
    journal_path: Path
    delivered: list[PendingApproval] = field(default_factory=list)
    sent: Counter[tuple[str, str]] = field(default_factory=Counter)
    connections: list[httpx.AsyncClient] = field(default_factory=list)

    def gate(self) -> LedgerGate:
        """A gate of a freshly started process: a new client, the journal on disk."""

        async def count(request: httpx.Request) -> None:
            self.sent[(request.method, resource(request.url.path))] += 1

        async def deliver(pending: PendingApproval) -> None:
            self.delivered.append(pending)

        http = httpx.AsyncClient(event_hooks={"request": [count]})
        self.connections.append(http)
        ledger = AsyncClient(self.server.url, token=self.server.token("proposer"), http_client=http)
        who = self.actor.provenance
        owner = self.server.token("actor", subject=who.actor_id)
        reader = AsyncClient(self.server.url, token=owner, http_client=http)
        return LedgerGate(
            ledger, who, deliver, reader=reader, journal=FileJournal(self.journal_path)
        )

    @property
    def proposals_sent(self) -> int:
        return self.sent[("POST", "proposals")]

    def decide(self, call_id: str, *, approve: bool) -> str | None:
        """The actor answers in the channel; the attempt's id once it has settled."""
        (shown,) = [p for p in self.delivered if p.call_id == call_id][:1]
        with Client(self.server.url, token=self.actor.channel_token) as channel:
            if not approve:
                channel.decline(shown.presentation.token)
                return None
            attempt = channel.wait(channel.approve(shown.presentation.token), timeout=30)
            assert attempt.status == "succeeded", attempt
            return attempt.attempt_id

    def ledger_result(self, attempt_id: str) -> LedgerResult:
        """The attempt as the ledger reports it to an admin."""
        with Client(self.server.url, token=self.server.token("admin")) as admin:
            return LedgerResult.of("", admin.attempt(attempt_id))

    def executor_calls(self, result: LedgerResult) -> int:
        """How many times the fake executor was called for this attempt's key."""
        assert self.server.effects_file is not None and result.receipt is not None
        calls = FileEffectLedger(str(self.server.effects_file)).calls
        ours = [key for _, key in calls if "fake_" + key[4:20] == result.receipt["provider_id"]]
        return len(ours)

    async def close(self) -> None:
        for http in self.connections:
            await http.aclose()
