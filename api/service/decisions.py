"""Approve and decline: the channel role forwards an actor's decision with the
trusted provenance of its credential, or, for a channel service, the
provenance it asserts in the request for a binding of its own channel.

Every refusal is the same ``ApprovalUnavailable`` (the uniform 404); its
reason goes to the log only, never to the caller or to a metric label (a
scraper can read those). The decided proposal leaves the inbox at once.
"""

from __future__ import annotations

import logging

from adapters.bootstrap import Ledger
from api.http.schemas.proposals import (
    ApprovalIn,
    ApprovalOut,
    DeclineIn,
    DeclineOut,
    ProvenanceIn,
)
from api.service.principal import Principal
from api.service.proposals import refresh_inbox
from domain.errors import ApprovalUnavailable, ProposalConflicted
from domain.services import approval, decisions

logger = logging.getLogger("ledger.approval")


def approve(ledger: Ledger, principal: Principal, body: ApprovalIn) -> ApprovalOut:
    """Claim the proposal and queue its one attempt. Never executes anything.

    Every failure other than target drift (``ProposalConflicted``) is the same
    ``ApprovalUnavailable``."""
    provenance, service = principal.decision_provenance(_asserted(body.provenance))
    ctx = ledger.context
    try:
        with ctx.tracer.span("ledger.approve"):
            result = approval.approve(ctx, token=body.token, provenance=provenance, service=service)
    except ApprovalUnavailable as denied:
        logger.info("approval denied reason=%s", denied.reason)
        ledger.metrics.inc("ledger_approvals_total", result="refused")
        raise
    except ProposalConflicted:
        ledger.metrics.inc("ledger_approvals_total", result="conflicted")
        _refresh_inbox_of(ledger, body.token)
        raise
    accepted = "vote" if result.status == "vote_recorded" else "accepted"
    ledger.metrics.inc("ledger_approvals_total", result=accepted)
    _refresh_inbox_of(ledger, body.token)
    return ApprovalOut(
        status=result.status,
        attempt_id=result.attempt_id,
        attempt_revision=result.attempt_revision,
        votes=result.votes,
        required=result.required,
    )


def decline(ledger: Ledger, principal: Principal, body: DeclineIn) -> DeclineOut:
    """The actor says no: the presentation is consumed and the proposal declined;
    no attempt is created. Every failure is the approval's ``ApprovalUnavailable``."""
    provenance, service = principal.decision_provenance(_asserted(body.provenance))
    try:
        result = decisions.decline(
            ledger.context, token=body.token, provenance=provenance, service=service
        )
    except ApprovalUnavailable as denied:
        logger.info("decline denied reason=%s", denied.reason)
        ledger.metrics.inc("ledger_declines_total", result="refused")
        raise
    ledger.metrics.inc("ledger_declines_total", result=result.status)
    refresh_inbox(ledger, result.proposal_id)
    return DeclineOut(**result.__dict__)


def _asserted(body: ProvenanceIn | None) -> approval.Provenance | None:
    return None if body is None else approval.Provenance(**body.model_dump())


def _refresh_inbox_of(ledger: Ledger, token: str) -> None:
    """The claimed (or conflicted) proposal leaves the inbox now, not when the
    projector gets there."""
    proposal_id, _ = approval.resolve_presentation(ledger.context, token)
    refresh_inbox(ledger, proposal_id)
