"""Proposals: propose and present (the proposer role, a trusted channel backend),
read one proposal, cancel a version, and the pending-approval inbox."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response, status

from api.http.auth import Caller
from api.http.deps import LedgerDep, require_proposer, require_roles
from api.http.errors import error_responses
from api.http.idempotency import KeyHeader
from api.http.schemas.proposals import (
    CancelIn,
    InboxOut,
    PresentationIn,
    PresentationOut,
    ProposalIn,
    ProposalOut,
    ProposalViewOut,
)
from api.service import proposals
from api.service.cursors import DEFAULT_PAGE, MAX_PAGE
from domain.directory import Ident
from domain.proposal import ProposalStatus

router = APIRouter(
    prefix="/proposals",
    tags=["proposals"],
    responses=error_responses(400, 401, 403, 404, 409, 413, 422, 503),
)

ProposerCaller = Annotated[Caller, Depends(require_proposer)]
ReaderCaller = Annotated[Caller, Depends(require_roles(*proposals.READERS))]
CancelCaller = Annotated[Caller, Depends(require_roles(*proposals.CANCELERS))]
InboxCaller = Annotated[Caller, Depends(require_roles(*proposals.INBOX_READERS))]


@router.post("", status_code=status.HTTP_201_CREATED, response_model_exclude_none=True)
def create_proposal(
    body: ProposalIn,
    caller: ProposerCaller,
    ledger: LedgerDep,
    idempotency_key_header: KeyHeader = None,
) -> ProposalOut:
    """Store a proposal version (superseding the previous one of its lineage).

    A `forbid` policy that holds refuses it (403 `policy_denied`, naming the
    policy); while a policy set is configured the spec's `policy_digest` must be
    its digest (409 `policy_digest_mismatch`). When an `@auto_approve` policy or
    a standing grant approves it, it is claimed at once: `status` `claimed`, with
    `attempt_id` and `approval`. With ``Idempotency-Key``, a retry of the same
    request gets the first answer."""
    return proposals.propose(ledger, caller, body, idempotency_key=idempotency_key_header)


@router.post("/{proposal_id}/presentations", status_code=status.HTTP_201_CREATED)
def create_presentation(
    proposal_id: str,
    body: PresentationIn,
    caller: ProposerCaller,
    ledger: LedgerDep,
    response: Response,
    idempotency_key_header: KeyHeader = None,
) -> PresentationOut:
    """A single-use presentation of one version; the token is returned only in
    this response (and, with ``Idempotency-Key``, again in the answer to a retry)."""
    answer = proposals.present(
        ledger, caller, proposal_id, body, idempotency_key=idempotency_key_header
    )
    response.headers["Cache-Control"] = "no-store"
    return answer


@router.get("")
def get_inbox(
    caller: InboxCaller,
    ledger: LedgerDep,
    actor_id: Ident,
    status: ProposalStatus = ProposalStatus.PRESENTED,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
    cursor: Annotated[str | None, Query(max_length=400)] = None,
) -> InboxOut:
    """An actor's proposals in one status (by default what it still has to
    approve, soonest expiry first), from the inbox projection. A channel sees
    only its own actor's inbox; for any other actor the page is empty."""
    return proposals.inbox(ledger, caller, actor_id, status, limit=limit, cursor=cursor)


@router.get("/{proposal_id}")
def get_proposal(proposal_id: str, caller: ReaderCaller, ledger: LedgerDep) -> ProposalViewOut:
    """Versions, statuses (``expired`` derived from the clock), hashes,
    presentations (never tokens) and attempt ids; anyone else gets the same 404
    as a missing id."""
    return proposals.get_proposal(ledger, caller, proposal_id)


@router.post("/{proposal_id}/cancel")
def cancel_proposal(
    proposal_id: str,
    body: CancelIn,
    caller: CancelCaller,
    ledger: LedgerDep,
    idempotency_key_header: KeyHeader = None,
) -> ProposalViewOut:
    """Withdraw a presented version and revoke its presentations: no attempt can
    ever come from it. An already decided version is answered with the stored truth."""
    return proposals.cancel(
        ledger, caller, proposal_id, body, idempotency_key=idempotency_key_header
    )
