"""``get_action_status``'s two waits (for the actor's decision, then for the
attempt to settle) end as soon as the process stops (``end_waits`` closes its
view changes) and answer the status they see, in the shape of a wait that ran
out. The wait's clock never moves and the recheck is an hour: only the close
can end a wait, so a wait that went on (or spun on a closed hub) would hang
until the guard fails the test."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from adapters.bootstrap import Ledger
from adapters.view_changes import ViewChanges
from api.embedded import EmbeddedLedger
from api.mcp import status
from api.mcp.config import McpConfig, McpFile
from api.mcp.status import get_action_status
from api.mcp.tools import McpContext
from api.service.attempts import end_waits
from api.service.principal import Principal, Role
from tests.support.http_helpers import PROVENANCE, spec

pytestmark = pytest.mark.usefixtures("directory")

PROPOSER = "assistant-agent"
HANG_GUARD_SECONDS = 20  # not a timing assertion: how long a wait that never ends may hang


def frozen() -> float:
    """The wait's clock, stopped: its deadline never comes."""
    return 0.0


@pytest.fixture(autouse=True)
def recheck_in_an_hour(monkeypatch: pytest.MonkeyPatch) -> None:
    """No wait ends on the store recheck: only the close (or a write) wakes it."""
    monkeypatch.setattr(status, "RECHECK_SECONDS", 3600.0)


def changes_of(ledger: Ledger) -> ViewChanges:
    changes = getattr(ledger.views, "changes", None)
    assert isinstance(changes, ViewChanges)
    return changes


def proposed(ledger: Ledger, *, approved: bool) -> str:
    """A proposal presented to the actor (``approved``: approved, its attempt
    queued; no worker runs, so it stays queued)."""
    embedded = EmbeddedLedger(ledger, subject=PROPOSER, start=False)
    proposal = embedded.propose(PROVENANCE.actor_id, spec())
    shown = embedded.present(
        proposal.proposal_id,
        version=1,
        identity_binding_id=PROVENANCE.identity_binding_id,
        channel_binding_id=PROVENANCE.channel_binding_id,
        conversation_key=PROVENANCE.conversation_key,
    )
    if approved:
        embedded.approve(shown.token, provenance=PROVENANCE)
    return proposal.proposal_id


async def asked(ledger: Ledger, proposal_id: str) -> dict[str, Any]:
    """``get_action_status`` with a 30 s wait, as the MCP server's proposer."""
    ctx = McpContext(ledger, McpConfig(McpFile(proposer=PROPOSER)))
    principal = Principal(subject=PROPOSER, role=Role.PROPOSER)
    arguments = {"proposal_id": proposal_id, "wait_seconds": 30}
    return await get_action_status(ctx, principal, arguments, monotonic=frozen)


def answered_when_stopped_during_the_wait(ledger: Ledger, proposal_id: str) -> dict[str, Any]:
    """The answer of a wait that is under way when the process stops."""
    changes = changes_of(ledger)
    answers: list[dict[str, Any]] = []

    async def ask() -> None:
        answers.append(await asked(ledger, proposal_id))

    async def body() -> None:
        with anyio.fail_after(HANG_GUARD_SECONDS):
            async with anyio.create_task_group() as group:
                group.start_soon(ask)
                while not changes.waiting():  # sequencing only: until the wait is registered
                    await anyio.sleep(0.01)
                end_waits(ledger)

    anyio.run(body)
    assert changes.waiting() == 0
    [answer] = answers
    return answer


def answered_when_asked_after_the_stop(ledger: Ledger, proposal_id: str) -> dict[str, Any]:
    """The answer of a wait asked for once the process is already stopping."""
    end_waits(ledger)

    async def body() -> dict[str, Any]:
        with anyio.fail_after(HANG_GUARD_SECONDS):
            return await asked(ledger, proposal_id)

    return anyio.run(body)


def test_a_wait_for_the_decision_ends_when_the_process_stops(ledger: Ledger) -> None:
    answer = answered_when_stopped_during_the_wait(ledger, proposed(ledger, approved=False))
    assert answer["status"] == "awaiting_approval" and answer["settled"] is False, answer
    assert "attempt" not in answer


def test_a_wait_for_the_attempt_ends_when_the_process_stops(ledger: Ledger) -> None:
    answer = answered_when_stopped_during_the_wait(ledger, proposed(ledger, approved=True))
    assert answer["status"] == "queued" and answer["settled"] is False, answer
    assert answer["attempt"]["status"] == "queued"


@pytest.mark.parametrize("approved", [False, True], ids=["decision", "attempt"])
def test_a_wait_asked_for_after_the_stop_began_answers_at_once(
    ledger: Ledger, approved: bool
) -> None:
    answer = answered_when_asked_after_the_stop(ledger, proposed(ledger, approved=approved))
    assert answer["status"] == ("queued" if approved else "awaiting_approval"), answer
    assert answer["settled"] is False
