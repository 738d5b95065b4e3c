"""``get_action_status``: where a proposal stands, and its attempt's redacted
status, optionally waiting (up to 30 s) until it is settled.

The proposal is read as the MCP server's proposer (the service's own rules:
the uniform NotFound for anything else); its attempt is read as the
proposal's actor, the owner the service lets read it. The wait holds no
thread: it sleeps on this process's view-change notification, first for the
actor's decision (the proposal's inbox row), then for the attempt to settle.
That notification sees only this process's writes; the decision and the
worker may be in another process (``ledger serve`` with ``ledger mcp
--no-worker``), so the wait also reads the store again every
``RECHECK_SECONDS``.

A stopping ``ledger mcp`` closes the notification (``end_waits``, as ``ledger
serve`` does): both waits end at once and answer the status they see then, in
the shape of a wait that ran out, instead of holding the graceful stop.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Annotated, Any

import anyio
from anyio import to_thread
from pydantic import BaseModel, ConfigDict, Field

from adapters.view_changes import ViewChanges
from api.http.schemas.proposals import ProposalViewOut
from api.mcp.tools import McpContext
from api.service import attempts, proposals
from api.service.principal import Principal, Role
from api.service.validation import parse
from projections.inbox import INBOX_VIEW

MAX_WAIT_SECONDS = 30
RECHECK_SECONDS = 1.0  # how soon a write of another process is seen by a wait
# What the agent is told while there is no attempt: the proposal's own status.
PROPOSAL_STATUS = {"presented": "awaiting_approval", "claimed": "approved"}


class ActionStatusIn(BaseModel):
    """The arguments of ``get_action_status``."""

    model_config = ConfigDict(extra="forbid")

    proposal_id: Annotated[str, Field(min_length=1, max_length=80)]
    wait_seconds: Annotated[float, Field(ge=0, le=MAX_WAIT_SECONDS)] = 0


def _current(view: ProposalViewOut) -> tuple[int, str, str | None]:
    version = next(v for v in view.versions if v.version == view.current_version)
    return version.version, version.status, version.attempt_id


def _answer(view: ProposalViewOut, attempt: Any | None) -> dict[str, Any]:
    version, status, attempt_id = _current(view)
    answer: dict[str, Any] = {
        "proposal_id": view.proposal_id,
        "version": version,
        "proposal_status": status,
        "status": PROPOSAL_STATUS.get(status, status),
        "settled": status not in ("presented", "claimed"),
    }
    if attempt is not None:
        answer["status"] = attempt.status
        answer["settled"] = attempt.status in attempts.SETTLED
        answer["attempt"] = attempt.model_dump(mode="json", exclude_none=True)
    elif attempt_id is not None:
        answer["attempt"] = {"attempt_id": attempt_id}
    return answer


def _changes(ctx: McpContext) -> ViewChanges | None:
    changes = getattr(ctx.ledger.views, "changes", None)
    return changes if isinstance(changes, ViewChanges) else None


def _stopping(changes: ViewChanges | None) -> bool:
    """True once the process is stopping (its view changes closed): a wait answers now."""
    return changes is not None and changes.closed


async def get_action_status(
    ctx: McpContext,
    principal: Principal,
    raw: dict[str, Any],
    *,
    monotonic: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """The proposal's status and its attempt's redacted view (see the module
    docstring); ``monotonic`` is the clock the wait's deadline is kept on."""
    args = parse(ActionStatusIn, raw)
    ledger = ctx.ledger
    deadline = monotonic() + args.wait_seconds
    changes = _changes(ctx)

    def read() -> ProposalViewOut:
        return proposals.get_proposal(ledger, principal, args.proposal_id)

    view = await to_thread.run_sync(read)
    if _current(view)[1] == "presented" and args.wait_seconds > 0:
        watching = (
            changes.watch(INBOX_VIEW, view.proposal_id)
            if changes is not None
            else contextlib.nullcontext(None)
        )
        with watching as waiter:
            view = await to_thread.run_sync(read)
            while (
                _current(view)[1] == "presented"
                and not _stopping(changes)
                and (left := deadline - monotonic()) > 0
            ):
                seconds = min(left, RECHECK_SECONDS)
                if waiter is None:
                    await anyio.sleep(seconds)
                else:
                    await waiter.wait(seconds)
                view = await to_thread.run_sync(read)
    attempt_id = _current(view)[2]
    if attempt_id is None:
        return _answer(view, None)
    owner = Principal(subject=view.actor_id, role=Role.ACTOR)
    attempt = await to_thread.run_sync(attempts.get_attempt, ledger, owner, attempt_id)
    while (
        attempt.status not in attempts.SETTLED
        and not _stopping(changes)
        and (left := deadline - monotonic()) > 0
    ):
        seconds = min(left, RECHECK_SECONDS)
        if changes is None:
            await anyio.sleep(seconds)
            attempt = await to_thread.run_sync(attempts.get_attempt, ledger, owner, attempt_id)
        else:
            attempt = await attempts.wait_attempt_async(ledger, owner, attempt_id, seconds)
    return _answer(view, attempt)
