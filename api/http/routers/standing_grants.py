"""Standing grants ("allow always"): make, read, list and revoke them. An admin
acts for any actor; a channel for its own actor (a channel service asserts
the actor's provenance in the body, as for an approval)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, status

from api.http.auth import Caller
from api.http.deps import LedgerDep, require_roles
from api.http.errors import error_responses
from api.http.schemas.policies import (
    RevokeGrantIn,
    StandingGrantIn,
    StandingGrantListOut,
    StandingGrantOut,
)
from api.service import grants
from domain.directory import Ident

router = APIRouter(
    prefix="/standing-grants",
    tags=["standing grants"],
    responses=error_responses(400, 401, 403, 404, 409, 413, 422, 503),
)

GrantCaller = Annotated[Caller, Depends(require_roles(*grants.ROLES))]


@router.post("", status_code=status.HTTP_201_CREATED)
def create_grant(body: StandingGrantIn, caller: GrantCaller, ledger: LedgerDep) -> StandingGrantOut:
    """Grant a standing approval for one capability: its proposals within the
    bounds (destination, effect, conditions on content fields) are approved by
    the grant, up to `max_uses` times, until `expires_at` or a revocation."""
    return grants.grant(ledger, caller, body)


@router.get("")
def list_grants(
    caller: GrantCaller, ledger: LedgerDep, actor_id: Annotated[Ident, Query()]
) -> StandingGrantListOut:
    """An actor's standing grants with their uses and state; a channel sees only
    its own actor's (for any other the list is empty)."""
    return grants.list_grants(ledger, caller, actor_id)


@router.get("/{grant_id}")
def get_grant(grant_id: str, caller: GrantCaller, ledger: LedgerDep) -> StandingGrantOut:
    """One standing grant; another actor's is the same 404 as a missing one."""
    return grants.get_grant(ledger, caller, grant_id)


@router.post("/{grant_id}/revoke")
def revoke_grant(
    grant_id: str, body: RevokeGrantIn, caller: GrantCaller, ledger: LedgerDep
) -> StandingGrantOut:
    """Revoke a standing grant: it approves nothing from now on, and an attempt it
    approved that was not dispatched yet fails safe. Revoking twice changes nothing."""
    return grants.revoke(ledger, caller, grant_id, body)
