"""Approve: the channel role forwards an actor's approval with trusted provenance."""

from __future__ import annotations

import logging

from fastapi import APIRouter, status

from adapters.bootstrap import Ledger
from api.http.deps import ChannelCaller, LedgerDep
from api.http.errors import error_responses
from api.http.routers.proposals import refresh_inbox
from api.http.schemas.proposals import ApprovalIn, ApprovalOut
from domain.errors import ApprovalUnavailable, ProposalConflicted
from domain.services.approval import approve, resolve_control

logger = logging.getLogger("ledger.approval")

router = APIRouter(
    prefix="/approvals",
    tags=["approvals"],
    responses=error_responses(400, 401, 403, 404, 409, 413, 422, 503),
)


@router.post("", status_code=status.HTTP_202_ACCEPTED)
def approve_presentation(body: ApprovalIn, caller: ChannelCaller, ledger: LedgerDep) -> ApprovalOut:
    """Claim the proposal and queue its one attempt. Never executes anything.

    Every failure other than target drift is the same 404 ``approval_unavailable``.
    """
    ctx = ledger.context
    try:
        with ctx.tracer.span("ledger.approve"):
            result = approve(ctx, token=body.token, provenance=caller.require_provenance())
    except ApprovalUnavailable as denied:
        # The reason goes to the log only: the uniform 404 hides it from the caller,
        # so the metrics (readable by a scraper) must not tell it either.
        logger.info("approval denied reason=%s", denied.reason)
        ledger.metrics.inc("ledger_approvals_total", result="refused")
        raise
    except ProposalConflicted:
        ledger.metrics.inc("ledger_approvals_total", result="conflicted")
        _refresh_inbox_of(ledger, body.token)
        raise
    ledger.metrics.inc("ledger_approvals_total", result="accepted")
    _refresh_inbox_of(ledger, body.token)
    return ApprovalOut(
        status=result.status,
        attempt_id=result.attempt_id,
        attempt_revision=result.attempt_revision,
    )


def _refresh_inbox_of(ledger: Ledger, token: str) -> None:
    """The claimed (or conflicted) proposal leaves the inbox now, not when the
    projector gets there (the same read-your-writes as the proposal routes)."""
    proposal_id, _ = resolve_control(ledger.context, token)
    refresh_inbox(ledger, proposal_id)
