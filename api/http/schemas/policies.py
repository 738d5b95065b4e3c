"""Schemas of the policy set and standing grant routes (docs/policies.md)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from api.http.schemas.proposals import ProvenanceIn
from domain.directory import Ident
from domain.policy import MAX_POLICY_TEXT_BYTES


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PolicyOut(BaseModel):
    """One policy of the set: its ``@id``, effect and whether it approves by itself."""

    id: str
    effect: str
    auto_approve: bool
    quorum: int | None = Field(
        default=None, description='@quorum("M"): how many distinct members must approve.'
    )
    group: str | None = Field(default=None, description='@group("name"): of which group.')


class PolicySetIn(_Body):
    """A new policy set (Cedar text; empty removes every policy)."""

    text: Annotated[str, Field(max_length=MAX_POLICY_TEXT_BYTES)] = Field(
        description='Cedar policies, each with a unique @id("..."); @auto_approve on a permit '
        "approves what it permits without a person."
    )
    expected_version: Annotated[int, Field(ge=0, le=1_000_000_000)] | None = Field(
        default=None,
        description="Apply only if the set is still at this version (0: none yet); "
        "409 stale_policy_set otherwise.",
    )


class PolicySetOut(BaseModel):
    """The policy set: its version (0: none), digest (what a spec's policy_digest
    must be; null without policies), policies and, for admins, its text."""

    version: int
    digest: str | None
    policies: list[PolicyOut]
    text: str | None = None
    updated_at: str | None = None
    changed: bool | None = None


class ConditionIn(_Body):
    """``content[field] <op> value``."""

    field: Annotated[str, Field(min_length=1, max_length=128)]
    op: Annotated[str, Field(description="eq, ne, lt, lte, gt, gte or in.")]
    value: Any = Field(description="A string, integer or boolean; a list of them for `in`.")


class StandingGrantIn(_Body):
    """A standing approval ("allow always") for one capability, within bounds.

    An admin names ``actor_id``; a channel grants for its own actor (a channel
    service asserts the actor's ``provenance``, as for an approval)."""

    actor_id: Ident | None = None
    provenance: ProvenanceIn | None = None
    capability: Annotated[str, Field(min_length=1, max_length=64)]
    destination: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    effect: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    conditions: Annotated[list[ConditionIn], Field(max_length=8)] = Field(default_factory=list)
    expires_at: str = Field(description="When it stops approving (UTC, at most 366 days ahead).")
    max_uses: Annotated[int, Field(ge=1, le=10_000)]

    def bounds(self) -> dict[str, Any]:
        return self.model_dump(exclude={"actor_id", "provenance"}, exclude_none=True)


class RevokeGrantIn(_Body):
    """Revoke a standing grant; a channel service asserts the actor's provenance."""

    provenance: ProvenanceIn | None = None


class StandingGrantOut(BaseModel):
    """A standing grant: its bounds, uses and state (active, spent, expired, revoked)."""

    grant_id: str
    actor_id: str
    capability: str
    destination: str | None = None
    effect: str | None = None
    conditions: list[dict[str, Any]]
    expires_at: str
    max_uses: int
    uses: int
    state: str
    revoked: bool
    granted_by: dict[str, Any]
    granted_at: str
    revoked_by: dict[str, Any] | None = None
    revoked_at: str | None = None


class StandingGrantListOut(BaseModel):
    """An actor's standing grants, oldest first."""

    items: list[StandingGrantOut]
