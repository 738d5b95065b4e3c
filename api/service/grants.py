"""Standing grants ("allow always"): an admin grants for any actor; a channel
for its own actor, with the provenance an approval would need (its
credential's, or the one a channel service asserts for a binding of its own
channel). Reading and revoking follow the same rule; another actor's grant
is the uniform 404."""

from __future__ import annotations

from typing import Any

from adapters.bootstrap import Ledger
from api.http.schemas.policies import (
    RevokeGrantIn,
    StandingGrantIn,
    StandingGrantListOut,
    StandingGrantOut,
)
from api.http.schemas.proposals import ProvenanceIn
from api.service.principal import Principal, Role, known_id, require_role
from domain.directory import validate_ident
from domain.errors import InvalidInput, NotFound, StandingGrantRefused
from domain.services import grants
from domain.services.approval import Provenance

ROLES = (Role.ADMIN, Role.CHANNEL)


def _grantor(principal: Principal, asserted: ProvenanceIn | None) -> grants.Grantor:
    """Who grants or revokes: the admin, or the actor through its channel."""
    require_role(principal, *ROLES)
    if principal.role is Role.ADMIN:
        if asserted is not None:
            raise InvalidInput("provenance: only a channel service asserts one")
        return grants.Grantor("admin", principal.subject)
    claimed = None if asserted is None else Provenance(**asserted.model_dump())
    provenance, service = principal.decision_provenance(claimed)
    return grants.Grantor(
        "channel",
        principal.subject,
        provenance=provenance,
        service_channel=service.channel if service else None,
        asserted_by=service.asserted_by if service else None,
    )


def _shown(grant: dict[str, Any]) -> StandingGrantOut:
    return StandingGrantOut.model_validate(grant)


def grant(ledger: Ledger, principal: Principal, body: StandingGrantIn) -> StandingGrantOut:
    """Make a standing grant; an admin names the actor, a channel grants for its own."""
    grantor = _grantor(principal, body.provenance)
    if grantor.provenance is None:
        if body.actor_id is None:
            raise InvalidInput("actor_id: an admin names the actor the grant is for")
        actor_id = body.actor_id
    else:
        actor_id = grantor.provenance.actor_id
        if body.actor_id not in (None, actor_id):
            raise StandingGrantRefused()
    made = grants.grant(ledger.context, actor_id=actor_id, bounds=body.bounds(), grantor=grantor)
    return _shown(made)


def revoke(
    ledger: Ledger, principal: Principal, grant_id: str, body: RevokeGrantIn
) -> StandingGrantOut:
    """Revoke a grant (a channel: only its actor's); revoking twice changes nothing."""
    grantor = _grantor(principal, body.provenance)
    actor_id = grantor.provenance.actor_id if grantor.provenance else None
    done = grants.revoke(
        ledger.context, grant_id=known_id(grant_id), grantor=grantor, actor_id=actor_id
    )
    return _shown(done)


def get_grant(ledger: Ledger, principal: Principal, grant_id: str) -> StandingGrantOut:
    """One grant; another actor's is the same 404 as a missing one (and a channel
    service, which carries no actor of its own, reads none)."""
    require_role(principal, *ROLES)
    actor_id: str | None = None
    if principal.role is not Role.ADMIN:
        if principal.provenance is None:
            raise NotFound()
        actor_id = principal.provenance.actor_id
    return _shown(grants.get(ledger.context, known_id(grant_id), actor_id))


def list_grants(ledger: Ledger, principal: Principal, actor_id: str) -> StandingGrantListOut:
    """An actor's grants; a channel sees only its own actor's (any other: empty)."""
    require_role(principal, *ROLES)
    actor_id = validate_ident(actor_id, "actor_id")
    if principal.role is not Role.ADMIN and (
        principal.provenance is None or principal.provenance.actor_id != actor_id
    ):
        return StandingGrantListOut(items=[])
    return StandingGrantListOut(
        items=[_shown(g) for g in grants.list_grants(ledger.context, actor_id)]
    )
