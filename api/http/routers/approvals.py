"""Approve: the channel role forwards an actor's approval with trusted provenance
(its token's, or the one a channel service asserts for its own channel)."""

from __future__ import annotations

from fastapi import APIRouter, status

from api.http.deps import ChannelCaller, LedgerDep
from api.http.errors import error_responses
from api.http.schemas.proposals import ApprovalIn, ApprovalOut
from api.service import decisions

router = APIRouter(
    prefix="/approvals",
    tags=["approvals"],
    responses=error_responses(400, 401, 403, 404, 409, 413, 422, 503),
)


@router.post("", status_code=status.HTTP_202_ACCEPTED, response_model_exclude_none=True)
def approve_presentation(body: ApprovalIn, caller: ChannelCaller, ledger: LedgerDep) -> ApprovalOut:
    """Claim the proposal and queue its one attempt. Never executes anything.

    Who approves comes from a per-conversation channel token's claims, or, for a
    channel service's token (registered for one channel), from `provenance` in
    the body, accepted only for bindings on that channel and recorded as
    asserted by the service. Every failure other than target drift is the same
    404 ``approval_unavailable``.

    For a proposal a policy asks a quorum for, each member approves through
    their own presentation: a vote that is not the M-th answers
    `vote_recorded` with `votes` (counted so far) and `required`; the M-th
    claims and answers `execution_pending` with the attempt, as above.
    """
    return decisions.approve(ledger, caller, body)
