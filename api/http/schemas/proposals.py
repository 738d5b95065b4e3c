"""Schemas of the proposal, presentation and approval routes."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from domain.directory import Ident, ShortText
from domain.spec import ProposalSpec
from projections.status import AttemptApproval

ProposalId = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^prop_[0-9a-f]{32}$")]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProposalIn(_Body):
    """Propose an effect for an actor; with ``lineage_id``, a new version of a lineage.

    A refusal about the request is a 422 whose ``errors`` name every failing
    field by its JSON pointer (``/actor_id``, ``/spec/content/title``...)."""

    actor_id: Ident = Field(
        description="The actor who will approve: an enabled actor of the directory that holds "
        "the spec's permission (else 422 `unknown_actor`, `actor_disabled` or "
        "`permission_not_granted`)."
    )
    spec: ProposalSpec = Field(
        description="The effect, complete (design.md 2.1). `executor_build` and "
        "`schema_digest` come from `GET /executors`; `plugin_build` and `policy_digest` "
        "from the proposer."
    )
    lineage_id: ProposalId | None = Field(
        default=None,
        description="Propose version n+1 of this lineage (superseding version n) instead "
        "of a new one; the same actor only.",
    )
    expected_version: Annotated[int, Field(ge=1, le=1_000_000)] | None = Field(
        default=None,
        description="With `lineage_id`: the version being revised must be this one "
        "(else 409 `stale_version`).",
    )


class ProposalOut(BaseModel):
    """The stored version, its hashes and the rendered preview. ``claimed`` when a
    policy or a standing grant approved it at once: then with its attempt and how."""

    proposal_id: str
    version: int
    payload_hash: str
    view_hash: str
    preview: str
    status: str
    attempt_id: str | None = None
    approval: AttemptApproval | None = None


class PresentationIn(_Body):
    """Create a single-use presentation bound to one actor, binding and conversation."""

    version: Annotated[int, Field(ge=1, le=1_000_000)]
    identity_binding_id: Ident
    channel_binding_id: Ident
    conversation_key: ShortText
    ttl_seconds: Annotated[int, Field(ge=60, le=86400)] | None = None
    actor_id: Ident | None = Field(
        default=None,
        description="A quorum member's own presentation (the identity binding's actor); "
        "only for a version a policy asks a quorum for. By default the proposal's actor.",
    )


class PresentationOut(BaseModel):
    """The opaque token: shown only here, stored only as its SHA-256."""

    presentation_id: str
    token: str
    expires_at: str


class ProvenanceIn(_Body):
    """Who decides, through what: asserted by a channel service for a binding of
    its own channel (both bindings' ``channel`` must be the service's)."""

    actor_id: Ident = Field(description="The actor who decides (a directory actor id).")
    identity_binding_id: Ident = Field(
        description="The actor's identity binding on the service's channel."
    )
    channel_binding_id: Ident = Field(
        description="The conversation's channel binding on the service's channel."
    )
    conversation_key: ShortText = Field(
        description="The conversation the decision was made in (as the channel binding names it)."
    )


PROVENANCE_DESCRIPTION = (
    "Only for a channel service (a channel token registered for one channel, by a "
    "`channel` claim or LEDGER_AUTH_CHANNEL_SERVICES): the provenance of this decision, "
    "accepted only for bindings on the service's own channel, and recorded as asserted by "
    "the service. A per-conversation channel token carries its provenance in its claims "
    "and sends none here. Any mismatch is the uniform 404 `approval_unavailable`."
)


class ApprovalIn(_Body):
    """The opaque token; who approves comes from the caller's credential, or, for a
    channel service, from ``provenance`` (checked against its channel)."""

    token: Annotated[str, Field(min_length=1, max_length=512)]
    provenance: ProvenanceIn | None = Field(default=None, description=PROVENANCE_DESCRIPTION)


class ApprovalOut(BaseModel):
    """Approval never executes: the attempt is queued for the worker. A quorum
    member's vote that is not the M-th answers ``vote_recorded`` with the votes
    counted so far and the number required, and no attempt yet."""

    status: str = Field(description="execution_pending, or vote_recorded.")
    attempt_id: str | None = None
    attempt_revision: int | None = None
    votes: int | None = Field(default=None, description="A quorum: valid votes counted so far.")
    required: int | None = Field(default=None, description="A quorum: the votes it needs.")


class DeclineIn(_Body):
    """The opaque token of the presentation the actor refused; who declines comes from
    the caller's credential, or, for a channel service, from ``provenance``."""

    token: Annotated[str, Field(min_length=1, max_length=512)]
    provenance: ProvenanceIn | None = Field(default=None, description=PROVENANCE_DESCRIPTION)


class DeclineOut(BaseModel):
    """The stored truth: ``declined``, or ``claimed`` (with its attempt) when an
    approval of a sibling presentation won."""

    proposal_id: str
    version: int
    status: str
    attempt_id: str | None = None


class CancelIn(_Body):
    """Withdraw one version of a proposal."""

    version: Annotated[int, Field(ge=1, le=1_000_000)]


class ProposalVersionOut(BaseModel):
    """One version: its status as of now (``expired`` derived), hashes and attempt."""

    version: int
    status: str
    payload_hash: str
    view_hash: str
    created_at: str
    expires_at: str
    attempt_id: str | None = None
    approval: AttemptApproval | None = None
    votes: list[str] = Field(
        default_factory=list,
        description="A quorum: the members whose votes are recorded so far, oldest first "
        "(the deciding vote is on the approval).",
    )
    escalated_to: str | None = Field(
        default=None,
        description="The fallback group this version escalated to, if it did "
        "(its members approve it from then on).",
    )


class PresentationSummaryOut(BaseModel):
    """A presentation's id, status and expiry; never its token."""

    presentation_id: str
    version: int
    status: str
    created_at: str
    expires_at: str
    actor_id: str | None = Field(
        default=None,
        description="Who it is for: a quorum member's own, or the proposal's actor.",
    )


class ProposalViewOut(BaseModel):
    """A proposal lineage: versions, statuses, hashes, presentations, attempt ids."""

    model_config = ConfigDict(extra="forbid")

    proposal_id: str
    actor_id: str
    current_version: int
    status: str
    revision: int
    versions: list[ProposalVersionOut]
    presentations: list[PresentationSummaryOut]


class InboxItemOut(BaseModel):
    """One proposal in an actor's inbox (its current version)."""

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
    votes: list[str] = Field(
        default_factory=list,
        description="A quorum: the members whose votes are recorded so far, oldest first "
        "(the deciding vote is on the approval).",
    )


class InboxOut(BaseModel):
    """A page of the inbox and the opaque cursor of the next one."""

    items: list[InboxItemOut]
    next_cursor: str | None = None
