"""Proposals: propose and present (the proposer role, a trusted channel backend),
read one proposal, cancel a version, and the pending-approval inbox."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response, status

from adapters.bootstrap import Ledger
from api.http.auth import Caller, Role
from api.http.cursors import decode_cursor, encode_cursor
from api.http.deps import LedgerDep, known_id, require_proposer, require_roles
from api.http.errors import error_responses
from api.http.idempotency import KeyHeader, idempotency_key, in_flight
from api.http.schemas.proposals import (
    CancelIn,
    InboxItemOut,
    InboxOut,
    PresentationIn,
    PresentationOut,
    ProposalIn,
    ProposalOut,
    ProposalViewOut,
)
from domain.directory import Ident
from domain.errors import NotFound
from domain.proposal import Proposal, ProposalStatus
from domain.services.decisions import cancel
from domain.services.proposals import present, propose
from projections.inbox import list_inbox as inbox_page
from projections.inbox import proposal_view

router = APIRouter(
    prefix="/proposals",
    tags=["proposals"],
    responses=error_responses(400, 401, 403, 404, 409, 413, 422, 503),
)

ProposerCaller = Annotated[Caller, Depends(require_proposer)]
ReaderCaller = Annotated[Caller, Depends(require_roles(Role.PROPOSER, Role.CHANNEL, Role.ADMIN))]
CancelCaller = Annotated[Caller, Depends(require_roles(Role.PROPOSER, Role.ADMIN))]
InboxCaller = Annotated[Caller, Depends(require_roles(Role.CHANNEL, Role.ADMIN))]


def may_see_proposal(caller: Caller, actor_id: str) -> bool:
    """Proposers (trusted backends), admins, and the channel of the proposal's actor."""
    if caller.role in (Role.PROPOSER, Role.ADMIN):
        return True
    return caller.provenance is not None and caller.provenance.actor_id == actor_id


def refresh_inbox(ledger: Ledger, proposal_id: str) -> None:
    """Read-your-writes for the inbox: project the lineage the caller just changed
    (the projector would get there too; projecting twice is harmless)."""
    if ledger.views is not None:
        ledger.projector.project_proposal(proposal_id)


def visible_proposal(ledger: Ledger, caller: Caller, proposal_id: str) -> Proposal:
    """The proposal, or the same 404 whether it is missing or not the caller's."""
    proposal = ledger.store.get(Proposal, known_id(proposal_id))
    if proposal is None or not may_see_proposal(caller, proposal.actor_id):
        raise NotFound()
    return proposal


@router.post("", status_code=status.HTTP_201_CREATED)
def create_proposal(
    body: ProposalIn,
    caller: ProposerCaller,
    ledger: LedgerDep,
    request: Request,
    idempotency_key_header: KeyHeader = None,
) -> ProposalOut:
    """Store a proposal version (superseding the previous one of its lineage).

    With ``Idempotency-Key``, a retry of the same request gets the first answer."""
    key = idempotency_key(idempotency_key_header, request, caller, body)
    with in_flight(request).hold(key):
        result = propose(
            ledger.context,
            actor_id=body.actor_id,
            spec_data=body.spec.model_dump(mode="json", exclude_none=True),
            lineage_id=body.lineage_id,
            expected_version=body.expected_version,
            idempotency=key,
        )
    refresh_inbox(ledger, result.proposal_id)
    return ProposalOut(**result.__dict__)


@router.post("/{proposal_id}/presentations", status_code=status.HTTP_201_CREATED)
def create_presentation(
    proposal_id: str,
    body: PresentationIn,
    caller: ProposerCaller,
    ledger: LedgerDep,
    response: Response,
    request: Request,
    idempotency_key_header: KeyHeader = None,
) -> PresentationOut:
    """A single-use approval control; the token is returned only in this response
    (and, with ``Idempotency-Key``, again in the answer to a retry)."""
    key = idempotency_key(idempotency_key_header, request, caller, body)
    with in_flight(request).hold(key):
        result = present(
            ledger.context,
            proposal_id=known_id(proposal_id),
            version=body.version,
            identity_binding_id=body.identity_binding_id,
            channel_binding_id=body.channel_binding_id,
            conversation_key=body.conversation_key,
            ttl_seconds=body.ttl_seconds,
            idempotency=key,
        )
    refresh_inbox(ledger, proposal_id)
    response.headers["Cache-Control"] = "no-store"
    return PresentationOut(**result.__dict__)


@router.get("")
def get_inbox(
    caller: InboxCaller,
    ledger: LedgerDep,
    actor_id: Ident,
    status: ProposalStatus = ProposalStatus.PRESENTED,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=400)] = None,
) -> InboxOut:
    """An actor's proposals in one status (by default what it still has to
    approve, soonest expiry first), from the inbox projection. A channel sees
    only its own actor's inbox; for any other actor the page is empty."""
    assert ledger.views is not None
    after = decode_cursor(cursor)
    if not may_see_proposal(caller, actor_id):
        return InboxOut(items=[])
    rows, next_raw = inbox_page(ledger.views, actor_id, status, ledger.clock.now(), limit, after)
    items = [InboxItemOut.model_validate(row) for row in rows]
    return InboxOut(items=items, next_cursor=encode_cursor(next_raw))


@router.get("/{proposal_id}")
def get_proposal(proposal_id: str, caller: ReaderCaller, ledger: LedgerDep) -> ProposalViewOut:
    """Versions, statuses (``expired`` derived from the clock), hashes, controls
    (never tokens) and attempt ids; anyone else gets the same 404 as a missing id."""
    proposal = visible_proposal(ledger, caller, proposal_id)
    return ProposalViewOut.model_validate(proposal_view(proposal, ledger.clock.now()))


@router.post("/{proposal_id}/cancel")
def cancel_proposal(
    proposal_id: str,
    body: CancelIn,
    caller: CancelCaller,
    ledger: LedgerDep,
    request: Request,
    idempotency_key_header: KeyHeader = None,
) -> ProposalViewOut:
    """Withdraw a presented version and revoke its controls: no attempt can ever
    come from it. An already decided version is answered with the stored truth."""
    known_id(proposal_id)
    key = idempotency_key(idempotency_key_header, request, caller, body)
    with in_flight(request).hold(key):
        proposal = cancel(
            ledger.context, proposal_id=proposal_id, version=body.version, idempotency=key
        )
    refresh_inbox(ledger, proposal_id)
    return ProposalViewOut.model_validate(proposal_view(proposal, ledger.clock.now()))
