"""Typed requests: the proposal spec and the bodies of the POST and PUT routes.

Each mirrors the server's schema named by its ``SCHEMA``; an optional field
left ``None`` is omitted from the body, never sent as ``null``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ledger_client._base import Model as _Model

# -- the spec --------------------------------------------------------------------------


@dataclass(frozen=True)
class Target(_Model):
    """The canonical target of an effect and the revision the proposal is based on."""

    SCHEMA: ClassVar[str] = "Target"
    id: str
    base_revision: str


@dataclass(frozen=True)
class ProposalSpec(_Model):
    """Exactly one external effect (design.md 2.1); every field but ``target`` is required.

    ``executor_build`` names the exact build that will run it and ``schema_digest``
    the content schema of that build, both as ``GET /executors`` lists them.
    ``plugin_build`` and ``policy_digest`` are the proposer's: ``sha256:<64 hex>``
    digests of the proposing code's build and of the policy the proposer
    applied. All of them are inside the payload hash, so an approval is bound
    to each one.
    """

    SCHEMA: ClassVar[str] = "ProposalSpec"
    capability: str
    executor_build: str
    plugin_build: str
    schema_digest: str
    policy_digest: str
    permission: str
    effect: str
    destination: str
    content: dict[str, Any]
    sources: list[str]
    expires_at: str
    target: Target | None = None


@dataclass(frozen=True)
class Provenance:
    """Who approves, through what: an actor, its identity binding, the channel
    binding and the conversation. A presentation is bound to exactly these."""

    actor_id: str
    identity_binding_id: str
    channel_binding_id: str
    conversation_key: str


@dataclass(frozen=True)
class ProvenanceIn(_Model):
    """Who decides, through what, as a channel service asserts it for a binding
    of its own channel (``approve(..., provenance=...)``)."""

    SCHEMA: ClassVar[str] = "ProvenanceIn"
    actor_id: str
    identity_binding_id: str
    channel_binding_id: str
    conversation_key: str

    @classmethod
    def of(cls, who: Provenance) -> ProvenanceIn:
        return cls(
            who.actor_id, who.identity_binding_id, who.channel_binding_id, who.conversation_key
        )


# -- requests --------------------------------------------------------------------------


@dataclass(frozen=True)
class ProposalIn(_Model):
    """Propose an effect for an actor; with ``lineage_id``, a new version of a lineage."""

    SCHEMA: ClassVar[str] = "ProposalIn"
    actor_id: str
    spec: ProposalSpec
    lineage_id: str | None = None
    expected_version: int | None = None


@dataclass(frozen=True)
class PresentationIn(_Model):
    """A single-use presentation bound to one actor, binding and conversation."""

    SCHEMA: ClassVar[str] = "PresentationIn"
    version: int
    identity_binding_id: str
    channel_binding_id: str
    conversation_key: str
    ttl_seconds: int | None = None
    actor_id: str | None = None


@dataclass(frozen=True)
class ApprovalIn(_Model):
    """The opaque token; who approves comes from the caller's credentials."""

    SCHEMA: ClassVar[str] = "ApprovalIn"
    token: str
    provenance: ProvenanceIn | None = None


@dataclass(frozen=True)
class DeclineIn(_Model):
    """The opaque token of the presentation the actor refused."""

    SCHEMA: ClassVar[str] = "DeclineIn"
    token: str
    provenance: ProvenanceIn | None = None


@dataclass(frozen=True)
class CancelIn(_Model):
    """Withdraw one version of a proposal."""

    SCHEMA: ClassVar[str] = "CancelIn"
    version: int


@dataclass(frozen=True)
class ReconcileIn(_Model):
    """Run the attempt's registered read-only reconciler."""

    SCHEMA: ClassVar[str] = "ReconcileIn"
    expected_revision: int


@dataclass(frozen=True)
class ResolveIn(_Model):
    """Settle ``outcome_unknown`` with an admin verdict and a reason."""

    SCHEMA: ClassVar[str] = "ResolveIn"
    expected_revision: int
    resolution: str
    reason: str
    receipt: dict[str, Any] | None = None


@dataclass(frozen=True)
class ActorIn(_Model):
    """Enable or disable an actor; ``groups`` are what policies see of it."""

    SCHEMA: ClassVar[str] = "ActorIn"
    enabled: bool
    groups: list[str] | None = None


@dataclass(frozen=True)
class IdentityBindingIn(_Model):
    """Bind an actor to one external identity on one channel."""

    SCHEMA: ClassVar[str] = "IdentityBindingIn"
    actor_id: str
    channel: str
    external_id: str
    active: bool


@dataclass(frozen=True)
class ChannelBindingIn(_Model):
    """Bind one conversation on one channel as a place approvals may come from."""

    SCHEMA: ClassVar[str] = "ChannelBindingIn"
    conversation_key: str
    channel: str
    active: bool


@dataclass(frozen=True)
class GrantIn(_Model):
    """Grant or revoke one catalogue permission."""

    SCHEMA: ClassVar[str] = "GrantIn"
    granted: bool


@dataclass(frozen=True)
class ExecutorBuildIn(_Model):
    """Allow or withdraw one exact executor build."""

    SCHEMA: ClassVar[str] = "ExecutorBuildIn"
    delivery_mode: str
    available: bool


@dataclass(frozen=True)
class TargetIn(_Model):
    """Set the current revision of a canonical target."""

    SCHEMA: ClassVar[str] = "TargetIn"
    revision: str


# -- policies and standing grants ------------------------------------------------------


@dataclass(frozen=True)
class PolicySetIn(_Model):
    """A new policy set (Cedar text; empty removes every policy), applied only while
    the set is at ``expected_version`` when one is given (0: none yet)."""

    SCHEMA: ClassVar[str] = "PolicySetIn"
    text: str
    expected_version: int | None = None


@dataclass(frozen=True)
class ConditionIn(_Model):
    """``content[field] <op> value``: op is eq, ne, lt, lte, gt, gte or in."""

    SCHEMA: ClassVar[str] = "ConditionIn"
    field: str
    op: str
    value: Any


@dataclass(frozen=True)
class StandingGrantIn(_Model):
    """A standing approval ("allow always") for one capability, within bounds; an
    admin names ``actor_id``, a channel service asserts the actor's ``provenance``."""

    SCHEMA: ClassVar[str] = "StandingGrantIn"
    capability: str
    expires_at: str
    max_uses: int
    actor_id: str | None = None
    provenance: ProvenanceIn | None = None
    destination: str | None = None
    effect: str | None = None
    conditions: list[ConditionIn] | None = None


@dataclass(frozen=True)
class RevokeGrantIn(_Model):
    """Revoke a standing grant; a channel service asserts the actor's provenance."""

    SCHEMA: ClassVar[str] = "RevokeGrantIn"
    provenance: ProvenanceIn | None = None
