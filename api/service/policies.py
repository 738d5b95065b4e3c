"""The policy set: read it (admins: everything; proposers: the version and
digest their specs' ``policy_digest`` must name, and the policy ids), and
apply a new one (admins). ``ledger policies`` and ``PUT /policies`` call these."""

from __future__ import annotations

from adapters.bootstrap import Ledger
from api.http.schemas.policies import PolicyOut, PolicySetIn, PolicySetOut
from api.service.principal import Principal, Role, require_role
from domain.services.policies import PolicySetView, apply_policy_set, get_policy_set

READERS = (Role.ADMIN, Role.PROPOSER)


def _out(view: PolicySetView, principal: Principal, *, applied: bool = False) -> PolicySetOut:
    admin = principal.role is Role.ADMIN
    return PolicySetOut(
        version=view.version,
        digest=view.digest,
        policies=[PolicyOut(**p) for p in view.policies],
        text=view.text if admin else None,
        updated_at=view.updated_at,
        changed=view.changed if applied else None,
    )


def get_policies(ledger: Ledger, principal: Principal) -> PolicySetOut:
    """The current policy set (version 0 and no policies when none was applied)."""
    require_role(principal, *READERS)
    return _out(get_policy_set(ledger.store), principal)


def put_policies(ledger: Ledger, principal: Principal, body: PolicySetIn) -> PolicySetOut:
    """Validate and apply a policy set; the same text appends nothing (``changed`` false)."""
    require_role(principal, Role.ADMIN)
    view = apply_policy_set(
        ledger.store,
        ledger.clock,
        body.text,
        expected_version=body.expected_version,
        cache=ledger.read_cache,
    )
    return _out(view, principal, applied=True)
