"""Decline: the channel role forwards an actor's refusal with trusted provenance."""

from __future__ import annotations

import logging

from fastapi import APIRouter

from api.http.deps import ChannelCaller, LedgerDep
from api.http.errors import error_responses
from api.http.routers.proposals import refresh_inbox
from api.http.schemas.proposals import DeclineIn, DeclineOut
from domain.errors import ApprovalUnavailable
from domain.services.decisions import decline

logger = logging.getLogger("ledger.approval")

router = APIRouter(
    prefix="/declines",
    tags=["approvals"],
    responses=error_responses(400, 401, 403, 404, 413, 422, 503),
)


@router.post("")
def decline_presentation(body: DeclineIn, caller: ChannelCaller, ledger: LedgerDep) -> DeclineOut:
    """The actor says no: the control is consumed and the proposal declined; no
    attempt is created. Every failure is the approval's uniform 404."""
    try:
        result = decline(ledger.context, token=body.token, provenance=caller.require_provenance())
    except ApprovalUnavailable as denied:
        logger.info("decline denied reason=%s", denied.reason)
        ledger.metrics.inc("ledger_declines_total", result="denied", reason=denied.reason)
        raise
    ledger.metrics.inc("ledger_declines_total", result=result.status, reason="none")
    refresh_inbox(ledger, result.proposal_id)
    return DeclineOut(**result.__dict__)
