"""The console's pending approvals: what waits for a person's decision.

An admin names an actor and a status and sees that actor's proposals (the
inbox projection) and the proposals waiting for that actor's vote as a quorum
member (``projections.ballots``). A member, signed in with their own actor
token or through the identity provider, sees only their own, and no other
console page. Each row says how the version is decided: its kind (single,
quorum, policy, standing grant), the votes recorded (who, when), how many it
needs, who can still vote and, once escalated, the fallback group. Ids, times
and counts only: no token, no content.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from api.console import routes
from api.console.routes import ACTOR_ID, AnySessionDep, _page
from api.http.deps import LedgerDep
from api.service import ballots, proposals
from api.service.principal import Principal, Role
from domain.proposal import ProposalStatus

router = APIRouter(prefix="/console", include_in_schema=False)
INBOX_FIELDS = {"proposal_id", "version", "status", "created_at", "expires_at", "attempt_id"}


def _with_decisions(ledger: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = ballots.decisions_of(ledger, rows, ledger.clock.now())
    return [
        {**row, "decision": found.get((row["proposal_id"], int(row["version"])))} for row in rows
    ]


def _own_inbox(
    ledger: Any, principal: Principal, actor_id: str, status: ProposalStatus, cursor: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """An actor's own proposals in one status: any actor's for an admin, a
    member's own for the member."""
    if principal.role is Role.ACTOR:
        page = ballots.own_inbox(ledger, principal, status, limit=routes.PAGE_SIZE, cursor=cursor)
    else:
        page = proposals.inbox(
            ledger, principal, actor_id, status, limit=routes.PAGE_SIZE, cursor=cursor
        )
    rows = [item.model_dump(include=INBOX_FIELDS) for item in page.items]
    return rows, page.next_cursor


@router.get("/inbox", response_class=HTMLResponse)
def pending_approvals(
    request: Request,
    session: AnySessionDep,
    ledger: LedgerDep,
    actor_id: Annotated[str, Query(max_length=200)] = "",
    status: ProposalStatus = ProposalStatus.PRESENTED,
    cursor: Annotated[str | None, Query(max_length=400)] = None,
    ballot_cursor: Annotated[str | None, Query(max_length=400)] = None,
) -> Response:
    """An actor's proposals in one status (by default what it still has to
    approve, soonest expiry first) and what waits for its vote as a quorum
    member; a member sees only their own."""
    member = session.role is Role.ACTOR
    actor_id = session.subject if member else actor_id.strip()
    context: dict[str, Any] = {
        "session": session,
        "member": member,
        "active": "inbox",
        "actor_id": actor_id,
        "status": status.value,
        "statuses": [s.value for s in ProposalStatus],
        "rows": None,
        "ballots": None,
        "more": None,
        "more_ballots": None,
        "problem": None,
    }
    if not actor_id:
        return _page(request, "inbox.html", context)
    if not ACTOR_ID.fullmatch(actor_id):
        context["problem"] = "That is not an actor id: letters, digits and _.:@- only."
        context["actor_id"] = ""
        return _page(request, "inbox.html", context, 400)
    rows, next_cursor = _own_inbox(ledger, session.principal, actor_id, status, cursor)
    context["rows"] = _with_decisions(ledger, rows)
    if next_cursor:
        context["more"] = "/console/inbox?" + urlencode(
            {"actor_id": actor_id, "status": status.value, "cursor": next_cursor}
        )
    waiting, next_ballots = ballots.member_ballots(
        ledger, session.principal, actor_id, limit=routes.PAGE_SIZE, cursor=ballot_cursor
    )
    context["ballots"] = _with_decisions(ledger, waiting)
    if next_ballots:
        context["more_ballots"] = "/console/inbox?" + urlencode(
            {"actor_id": actor_id, "status": status.value, "ballot_cursor": next_ballots}
        )
    return _page(request, "inbox.html", context)
