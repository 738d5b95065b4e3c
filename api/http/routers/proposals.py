"""Propose and present: the proposer role (a trusted channel backend)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response, status

from api.http.deps import LedgerDep, known_id, require_proposer
from api.http.errors import error_responses
from api.http.schemas.proposals import PresentationIn, PresentationOut, ProposalIn, ProposalOut
from domain.services.proposals import present, propose

router = APIRouter(
    prefix="/proposals",
    tags=["proposals"],
    dependencies=[Depends(require_proposer)],
    responses=error_responses(400, 401, 403, 404, 409, 413, 422, 503),
)


@router.post("", status_code=status.HTTP_201_CREATED)
def create_proposal(body: ProposalIn, ledger: LedgerDep) -> ProposalOut:
    """Store a proposal version (superseding the previous one of its lineage)."""
    result = propose(
        ledger.context,
        actor_id=body.actor_id,
        spec_data=body.spec.model_dump(mode="json", exclude_none=True),
        lineage_id=body.lineage_id,
        expected_version=body.expected_version,
    )
    return ProposalOut(**result.__dict__)


@router.post("/{proposal_id}/presentations", status_code=status.HTTP_201_CREATED)
def create_presentation(
    proposal_id: str, body: PresentationIn, ledger: LedgerDep, response: Response
) -> PresentationOut:
    """A single-use approval control; the token is returned only in this response."""
    result = present(
        ledger.context,
        proposal_id=known_id(proposal_id),
        version=body.version,
        identity_binding_id=body.identity_binding_id,
        channel_binding_id=body.channel_binding_id,
        conversation_key=body.conversation_key,
        ttl_seconds=body.ttl_seconds,
    )
    response.headers["Cache-Control"] = "no-store"
    return PresentationOut(**result.__dict__)
