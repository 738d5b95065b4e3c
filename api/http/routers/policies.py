"""The policy set (Cedar): read it (admin, proposer) and apply a new one (admin).
docs/policies.md is the guide."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from api.http.auth import Caller
from api.http.deps import AdminCaller, LedgerDep, require_roles
from api.http.errors import error_responses
from api.http.schemas.policies import PolicySetIn, PolicySetOut
from api.service import policies

router = APIRouter(
    prefix="/policies",
    tags=["policies"],
    responses=error_responses(400, 401, 403, 409, 413, 422, 503),
)

ReaderCaller = Annotated[Caller, Depends(require_roles(*policies.READERS))]


@router.get("")
def get_policies(caller: ReaderCaller, ledger: LedgerDep) -> PolicySetOut:
    """The policy set: version (0: none), digest (what every spec's `policy_digest`
    must be while a set is configured; null without one), its policies' ids and
    effects, and for an admin its Cedar text."""
    return policies.get_policies(ledger, caller)


@router.put("")
def put_policies(body: PolicySetIn, caller: AdminCaller, ledger: LedgerDep) -> PolicySetOut:
    """Validate and apply a policy set (422 `invalid_policy_set` naming what is
    wrong). Each change is one audited event of `policy-set:default`; the same
    text appends nothing. With `expected_version`, 409 `stale_policy_set` when
    the set moved since."""
    return policies.put_policies(ledger, caller, body)
