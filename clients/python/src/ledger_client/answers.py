"""Typed answers of the routes, mirroring the server's response schemas.

Unknown keys in an answer are ignored (a newer server may add some).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ledger_client._base import SETTLED_STATUSES
from ledger_client._base import Model as _Model

# -- answers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AttemptApproval(_Model):
    """How a proposal version was approved: ``human``, ``quorum``, ``policy`` or
    ``grant``, with ids only (the approvers, the policy or the standing grant)."""

    SCHEMA: ClassVar[str] = "AttemptApproval"
    kind: str
    approvers: list[str] = field(default_factory=list)
    policy_id: str | None = None
    policy_set_version: int | None = None
    policy_digest: str | None = None
    grant_id: str | None = None
    use: int | None = None
    max_uses: int | None = None
    group: str | None = None
    required: int | None = None


@dataclass(frozen=True)
class ProposalOut(_Model):
    """The stored version, its hashes and the rendered preview."""

    SCHEMA: ClassVar[str] = "ProposalOut"
    proposal_id: str
    version: int
    payload_hash: str
    view_hash: str
    preview: str
    status: str
    attempt_id: str | None = None
    approval: AttemptApproval | None = None


@dataclass(frozen=True)
class PresentationOut(_Model):
    """The opaque token: shown only here (and to a retry with the same key)."""

    SCHEMA: ClassVar[str] = "PresentationOut"
    presentation_id: str
    token: str = field(repr=False)
    expires_at: str


@dataclass(frozen=True)
class ApprovalOut(_Model):
    """Approval never executes: the attempt is queued for the worker
    (``execution_pending``). A quorum member's vote that is not the M-th is
    ``vote_recorded``, with the ``votes`` counted so far and the ``required``
    number, and no attempt yet."""

    SCHEMA: ClassVar[str] = "ApprovalOut"
    status: str
    attempt_id: str | None = None
    attempt_revision: int | None = None
    votes: int | None = None
    required: int | None = None


@dataclass(frozen=True)
class DeclineOut(_Model):
    """``declined``, or ``claimed`` (with its attempt) when a sibling's approval won."""

    SCHEMA: ClassVar[str] = "DeclineOut"
    proposal_id: str
    version: int
    status: str
    attempt_id: str | None = None


@dataclass(frozen=True)
class ProposalVersionOut(_Model):
    """One version: its status as of now, hashes and attempt."""

    SCHEMA: ClassVar[str] = "ProposalVersionOut"
    version: int
    status: str
    payload_hash: str
    view_hash: str
    created_at: str
    expires_at: str
    attempt_id: str | None = None
    approval: AttemptApproval | None = None
    votes: list[str] = field(default_factory=list)
    escalated_to: str | None = None


@dataclass(frozen=True)
class PresentationSummaryOut(_Model):
    """A presentation's id, status and expiry; never its token."""

    SCHEMA: ClassVar[str] = "PresentationSummaryOut"
    presentation_id: str
    version: int
    status: str
    created_at: str
    expires_at: str
    actor_id: str | None = None


@dataclass(frozen=True)
class ProposalViewOut(_Model):
    """A proposal lineage: versions, statuses, hashes, presentations, attempt ids."""

    SCHEMA: ClassVar[str] = "ProposalViewOut"
    proposal_id: str
    actor_id: str
    current_version: int
    status: str
    revision: int
    versions: list[ProposalVersionOut]
    presentations: list[PresentationSummaryOut]


@dataclass(frozen=True)
class InboxItemOut(_Model):
    """One proposal in an actor's inbox (its current version)."""

    SCHEMA: ClassVar[str] = "InboxItemOut"
    proposal_id: str
    actor_id: str
    version: int
    status: str
    payload_hash: str
    view_hash: str
    created_at: str
    expires_at: str
    presentation_ids: list[str]
    attempt_id: str | None = None
    approval: AttemptApproval | None = None
    votes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class InboxOut(_Model):
    """A page of the inbox and the cursor of the next one."""

    SCHEMA: ClassVar[str] = "InboxOut"
    items: list[InboxItemOut]
    next_cursor: str | None = None


@dataclass(frozen=True)
class AttemptResult(_Model):
    """The recorded outcome: its kind, a bounded reason code and a validated receipt."""

    SCHEMA: ClassVar[str] = "AttemptResult"
    kind: str
    reason_code: str | None = None
    receipt: dict[str, Any] | None = None


@dataclass(frozen=True)
class AttemptResolution(_Model):
    """An admin's resolution of an uncertain outcome."""

    SCHEMA: ClassVar[str] = "AttemptResolution"
    outcome: str
    reason: str
    resolved_by: str
    resolved_at: str


@dataclass(frozen=True)
class AttemptAcknowledgement(_Model):
    """An admin's acknowledgement of a failed_safe attempt: seen, nothing more to do."""

    SCHEMA: ClassVar[str] = "AttemptAcknowledgement"
    acknowledged_by: str
    note: str
    at: str


@dataclass(frozen=True)
class AttemptOut(_Model):
    """The redacted status view of an attempt."""

    SCHEMA: ClassVar[str] = "AttemptOut"
    attempt_id: str
    proposal_id: str
    proposal_version: int
    status: str
    revision: int
    delivery_mode: str
    created_at: str
    updated_at: str
    lease_generation: int
    dispatch_started_at: str | None = None
    result: AttemptResult | None = None
    resolution: AttemptResolution | None = None
    approval: AttemptApproval | None = None
    acknowledgement: AttemptAcknowledgement | None = None

    @property
    def settled(self) -> bool:
        """Terminal, or ``outcome_unknown``: nothing changes without a human."""
        return self.status in SETTLED_STATUSES


@dataclass(frozen=True)
class AttemptListOut(_Model):
    """One page of attempts and the cursor of the next."""

    SCHEMA: ClassVar[str] = "AttemptListOut"
    items: list[AttemptOut]
    next_cursor: str | None = None


@dataclass(frozen=True)
class ExecutorOut(_Model):
    """One executor build the server hosts; ``available`` when a proposal may name it."""

    SCHEMA: ClassVar[str] = "ExecutorOut"
    capability: str
    executor_build: str
    delivery_mode: str
    available: bool
    schema_digest: str
    """What a spec on this build names as ``schema_digest`` (of ``content_schema``)."""
    content_schema: dict[str, Any] | None = None
    """The JSON Schema the build declares for ``content``; None: any object."""
    state: str = "current"


@dataclass(frozen=True)
class ExecutorListOut(_Model):
    """Every hosted build, by capability, the newest first within one."""

    SCHEMA: ClassVar[str] = "ExecutorListOut"
    items: list[ExecutorOut]


# -- directory records -----------------------------------------------------------------


@dataclass(frozen=True)
class ActorOut(_Model):
    """An actor record."""

    SCHEMA: ClassVar[str] = "ActorOut"
    id: str
    kind: str
    revision: int
    updated_at: str
    enabled: bool
    groups: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class IdentityBindingOut(_Model):
    """An identity binding record."""

    SCHEMA: ClassVar[str] = "IdentityBindingOut"
    id: str
    kind: str
    revision: int
    updated_at: str
    actor_id: str
    channel: str
    external_id: str
    active: bool


@dataclass(frozen=True)
class ChannelBindingOut(_Model):
    """A channel binding record."""

    SCHEMA: ClassVar[str] = "ChannelBindingOut"
    id: str
    kind: str
    revision: int
    updated_at: str
    conversation_key: str
    channel: str
    active: bool


@dataclass(frozen=True)
class GrantOut(_Model):
    """A permission grant record."""

    SCHEMA: ClassVar[str] = "GrantOut"
    id: str
    kind: str
    revision: int
    updated_at: str
    actor_id: str
    permission: str
    granted: bool


@dataclass(frozen=True)
class ExecutorBuildOut(_Model):
    """An executor build record of the directory."""

    SCHEMA: ClassVar[str] = "ExecutorBuildOut"
    id: str
    kind: str
    revision: int
    updated_at: str
    capability: str
    build_digest: str
    delivery_mode: str
    available: bool


@dataclass(frozen=True)
class TargetOut(_Model):
    """A target record."""

    SCHEMA: ClassVar[str] = "TargetOut"
    id: str
    kind: str
    revision: int
    updated_at: str
    target_revision: str


# -- policies and standing grants ------------------------------------------------------


@dataclass(frozen=True)
class PolicyOut(_Model):
    """One policy of the set: its ``@id``, effect and whether it approves by itself."""

    SCHEMA: ClassVar[str] = "PolicyOut"
    id: str
    effect: str
    auto_approve: bool
    quorum: int | None = None
    group: str | None = None


@dataclass(frozen=True)
class PolicySetOut(_Model):
    """The policy set: its version (0: none), the digest a spec's ``policy_digest``
    must name (``None`` without policies), its policies and, for admins, its text."""

    SCHEMA: ClassVar[str] = "PolicySetOut"
    version: int
    digest: str | None
    policies: list[PolicyOut]
    text: str | None = None
    updated_at: str | None = None
    changed: bool | None = None


@dataclass(frozen=True)
class StandingGrantOut(_Model):
    """A standing grant: its bounds, uses and state (active, spent, expired, revoked)."""

    SCHEMA: ClassVar[str] = "StandingGrantOut"
    grant_id: str
    actor_id: str
    capability: str
    conditions: list[dict[str, Any]]
    expires_at: str
    max_uses: int
    uses: int
    state: str
    revoked: bool
    granted_by: dict[str, Any]
    granted_at: str
    destination: str | None = None
    effect: str | None = None
    revoked_by: dict[str, Any] | None = None
    revoked_at: str | None = None


@dataclass(frozen=True)
class StandingGrantListOut(_Model):
    """An actor's standing grants, oldest first."""

    SCHEMA: ClassVar[str] = "StandingGrantListOut"
    items: list[StandingGrantOut]
