"""Decline: the channel role forwards an actor's refusal with trusted provenance."""

from __future__ import annotations

from fastapi import APIRouter

from api.http.deps import ChannelCaller, LedgerDep
from api.http.errors import error_responses
from api.http.schemas.proposals import DeclineIn, DeclineOut
from api.service import decisions

router = APIRouter(
    prefix="/declines",
    tags=["approvals"],
    responses=error_responses(400, 401, 403, 404, 413, 422, 503),
)


@router.post("")
def decline_presentation(body: DeclineIn, caller: ChannelCaller, ledger: LedgerDep) -> DeclineOut:
    """The actor says no: the presentation is consumed and the proposal declined;
    no attempt is created. A channel service sends `provenance` as for an
    approval. Every failure is the approval's uniform 404."""
    return decisions.decline(ledger, caller, body)
