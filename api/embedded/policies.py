"""The policy set and standing grants of the in-process ledger (docs/policies.md).

The same service functions as ``/policies`` and ``/standing-grants``: the
host acts as an admin, or, through ``acting_as(principal)``, as a channel for
its actor (a standing grant the actor gives through its channel).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from adapters.bootstrap import Ledger
from api.http.schemas.policies import (
    PolicySetIn,
    PolicySetOut,
    RevokeGrantIn,
    StandingGrantIn,
    StandingGrantListOut,
    StandingGrantOut,
)
from api.service import grants, policies
from api.service.principal import Principal, Role
from api.service.validation import parse


class PolicyMethods:
    """Mixed into :class:`api.embedded.EmbeddedLedger`."""

    @property
    def wiring(self) -> Ledger:
        raise NotImplementedError

    def _as(self, role: Role) -> Principal:
        raise NotImplementedError

    def policies(self) -> PolicySetOut:
        """The policy set: version (0: none), digest (every spec's ``policy_digest``
        while one is configured), policies and text."""
        return policies.get_policies(self.wiring, self._as(Role.ADMIN))

    def apply_policies(self, text: str, *, expected_version: int | None = None) -> PolicySetOut:
        """Validate and apply a Cedar policy set (``InvalidPolicySet`` says what is
        wrong); the same text changes nothing. An empty text removes every policy."""
        body = parse(PolicySetIn, {"text": text, "expected_version": expected_version})
        return policies.put_policies(self.wiring, self._as(Role.ADMIN), body)

    def grant(
        self,
        actor_id: str,
        *,
        capability: str,
        max_uses: int,
        expires_at: str,
        destination: str | None = None,
        effect: str | None = None,
        conditions: Sequence[Mapping[str, Any]] = (),
    ) -> StandingGrantOut:
        """A standing approval ("allow always") of ``capability`` for ``actor_id``
        within the bounds; conditions are ``{"field", "op", "value"}`` on content."""
        body = parse(
            StandingGrantIn,
            {
                "actor_id": actor_id,
                "capability": capability,
                "max_uses": max_uses,
                "expires_at": expires_at,
                "destination": destination,
                "effect": effect,
                "conditions": [dict(c) for c in conditions],
            },
        )
        return grants.grant(self.wiring, self._as(Role.ADMIN), body)

    def standing_grants(self, actor_id: str) -> StandingGrantListOut:
        """The actor's standing grants with their uses and state."""
        return grants.list_grants(self.wiring, self._as(Role.ADMIN), actor_id)

    def standing_grant(self, grant_id: str) -> StandingGrantOut:
        return grants.get_grant(self.wiring, self._as(Role.ADMIN), grant_id)

    def revoke_grant(self, grant_id: str) -> StandingGrantOut:
        """Revoke a standing grant: it approves nothing from now on."""
        return grants.revoke(self.wiring, self._as(Role.ADMIN), grant_id, RevokeGrantIn())
