"""Proposals: propose and present (the proposer role), read one, cancel a
version (proposer or admin), and an actor's pending-approval inbox (its
channel, or an admin).

A lineage belongs to the proposer that created it: another proposer gets the
uniform NotFound when it reads, revises, presents or cancels it, exactly as for
a missing id. Admins read and cancel any; the channel of the proposal's actor
reads it (design.md 5.7).

Every write projects the lineage it changed into the inbox at once
(read-your-writes: the projector would get there too; projecting twice is
harmless).
"""

from __future__ import annotations

from pydantic import BaseModel

from adapters.bootstrap import Ledger
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
from api.service.cursors import DEFAULT_PAGE, decode_cursor, encode_cursor, page_size
from api.service.idempotency import held
from api.service.principal import Principal, Role, known_id, require_role
from domain.directory import validate_ident
from domain.errors import NotFound
from domain.proposal import Proposal, ProposalStatus
from domain.services import decisions
from domain.services import proposals as proposal_services
from domain.services.read_cache import read_proposal
from projections.inbox import list_inbox, proposal_view

READERS = (Role.PROPOSER, Role.CHANNEL, Role.ADMIN)
CANCELERS = (Role.PROPOSER, Role.ADMIN)
INBOX_READERS = (Role.CHANNEL, Role.ADMIN)


def may_see_inbox(principal: Principal, actor_id: str) -> bool:
    """Admins, and the channel of the actor."""
    if principal.role is Role.ADMIN:
        return True
    return principal.provenance is not None and principal.provenance.actor_id == actor_id


def may_see_proposal(principal: Principal, proposal: Proposal) -> bool:
    """Admins, the proposer that owns the lineage, and the channel of its actor."""
    if principal.role is Role.PROPOSER:
        return proposal.owned_by(principal.subject)
    return may_see_inbox(principal, proposal.actor_id)


def refresh_inbox(ledger: Ledger, proposal_id: str) -> None:
    """Read-your-writes for the inbox: project the lineage the caller just changed."""
    ledger.projector.project_proposal(proposal_id)


def visible_proposal(ledger: Ledger, principal: Principal, proposal_id: str) -> Proposal:
    """The proposal, or the same NotFound whether it is missing or not the caller's."""
    proposal = ledger.store.get(Proposal, known_id(proposal_id))
    if proposal is None or not may_see_proposal(principal, proposal):
        raise NotFound()
    return proposal


def check_owner(ledger: Ledger, principal: Principal, proposal_id: str) -> None:
    """NotFound unless the caller may change the lineage: its proposer, or an admin.

    Read through the read cache (the owner of a lineage never changes; the
    change itself reads the proposal again, checked by its commit)."""
    known_id(proposal_id)
    if principal.role is Role.ADMIN:
        return
    proposal = read_proposal(ledger.store, ledger.context.cache, proposal_id)
    if proposal is None or not proposal.owned_by(principal.subject):
        raise NotFound()


def propose(
    ledger: Ledger,
    principal: Principal,
    body: ProposalIn,
    *,
    idempotency_key: str | None = None,
    fingerprint: BaseModel | None = None,
) -> ProposalOut:
    """Store a proposal version (superseding the previous one of its lineage).

    With an idempotency key, a retry of the same request gets the first answer.
    ``fingerprint``: what "the same request" means when it is not ``body`` (an
    entry point that writes the spec's expiry itself, such as MCP's
    ``propose_action``, fingerprints the request it was given). A new lineage
    belongs to the caller; only it may add versions (NotFound for another
    proposer's lineage)."""
    require_role(principal, Role.PROPOSER)
    if body.lineage_id is not None:
        check_owner(ledger, principal, body.lineage_id)
    same = body if fingerprint is None else fingerprint
    with held(ledger, principal, idempotency_key, route="/proposals", body=same) as key:
        result = proposal_services.propose(
            ledger.context,
            actor_id=body.actor_id,
            spec_data=body.spec.model_dump(mode="json", exclude_none=True),
            lineage_id=body.lineage_id,
            expected_version=body.expected_version,
            idempotency=key,
            proposer=principal.subject,
        )
    refresh_inbox(ledger, result.proposal_id)
    return ProposalOut(**result.__dict__)


def present(
    ledger: Ledger,
    principal: Principal,
    proposal_id: str,
    body: PresentationIn,
    *,
    idempotency_key: str | None = None,
) -> PresentationOut:
    """A single-use presentation of one version; its token is in this answer only
    (and, with an idempotency key, again in the answer to a retry). Only the
    lineage's proposer presents it (NotFound for anyone else), and only to its
    actor's bindings (InvalidInput otherwise, before anything is counted)."""
    require_role(principal, Role.PROPOSER)
    check_owner(ledger, principal, proposal_id)
    route = f"/proposals/{proposal_id}/presentations"
    with held(ledger, principal, idempotency_key, route=route, body=body) as key:
        result = proposal_services.present(
            ledger.context,
            proposal_id=known_id(proposal_id),
            version=body.version,
            identity_binding_id=body.identity_binding_id,
            channel_binding_id=body.channel_binding_id,
            conversation_key=body.conversation_key,
            ttl_seconds=body.ttl_seconds,
            idempotency=key,
            actor_id=body.actor_id,
        )
    refresh_inbox(ledger, proposal_id)
    return PresentationOut(**result.__dict__)


def get_proposal(ledger: Ledger, principal: Principal, proposal_id: str) -> ProposalViewOut:
    """Versions, statuses (``expired`` derived from the clock), hashes,
    presentations (never tokens) and attempt ids; NotFound for anyone else."""
    require_role(principal, *READERS)
    proposal = visible_proposal(ledger, principal, proposal_id)
    return ProposalViewOut.model_validate(proposal_view(proposal, ledger.clock.now()))


def cancel(
    ledger: Ledger,
    principal: Principal,
    proposal_id: str,
    body: CancelIn,
    *,
    idempotency_key: str | None = None,
) -> ProposalViewOut:
    """Withdraw a presented version and revoke its presentations: no attempt can
    ever come from it. An already decided version is answered with the stored truth.
    The lineage's proposer or an admin; NotFound for another proposer."""
    require_role(principal, *CANCELERS)
    check_owner(ledger, principal, proposal_id)
    route = f"/proposals/{proposal_id}/cancel"
    with held(ledger, principal, idempotency_key, route=route, body=body) as key:
        proposal = decisions.cancel(
            ledger.context, proposal_id=proposal_id, version=body.version, idempotency=key
        )
    refresh_inbox(ledger, proposal_id)
    return ProposalViewOut.model_validate(proposal_view(proposal, ledger.clock.now()))


def inbox(
    ledger: Ledger,
    principal: Principal,
    actor_id: str,
    status: ProposalStatus = ProposalStatus.PRESENTED,
    *,
    limit: int = DEFAULT_PAGE,
    cursor: str | None = None,
) -> InboxOut:
    """An actor's proposals in one status (by default what it still has to
    approve, soonest expiry first), from the inbox projection. A channel sees
    only its own actor's inbox; for any other actor the page is empty."""
    require_role(principal, *INBOX_READERS)
    actor_id = validate_ident(actor_id, "actor_id", "query")
    after = decode_cursor(cursor)
    if not may_see_inbox(principal, actor_id):
        return InboxOut(items=[])
    rows, next_raw = list_inbox(
        ledger.views, actor_id, status, ledger.clock.now(), page_size(limit), after
    )
    items = [InboxItemOut.model_validate(row) for row in rows]
    return InboxOut(items=items, next_cursor=encode_cursor(next_raw))
