"""Approve: the atomic claim (design.md 5.2).

All checks read first. Then ONE commit: condition checks that every directory
record read is unchanged, ``Claimed`` on the proposal (consuming this
presentation and revoking its siblings), ``Queued`` as version 1 of the
deterministic attempt stream, and the due-work entry. A loser of a race
re-reads and converges on the stored attempt. Approval never calls an
executor (I6). Every failure except target drift is the same uniform
``ApprovalUnavailable``, whatever the reason, so nothing about existence leaks.

The proposal and the directory records come from the read cache: the claim
commit checks the proposal's version and every record's version, so a stale
entry makes it conflict, the entries are dropped and the step runs again on
fresh reads. A refusal reached on cached reads is judged again on fresh ones
before it is returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

from domain.approvals import human_approval
from domain.attempt import ExecutionAttempt
from domain.directory import channel_binding_record_id, identity_binding_record_id
from domain.errors import (
    ApprovalUnavailable,
    IllegalTransition,
    InvalidSpec,
    ProposalConflicted,
)
from domain.policy import Verdict
from domain.ports import Commit, DueWork, ReadCheck
from domain.proposal import PresentationStatus, Proposal, ProposalStatus
from domain.services import quorum
from domain.services.authorization import (
    Approver,
    AuthorizationFailed,
    DirectoryReads,
    TargetDrift,
    authorize,
)
from domain.services.claims import queued_attempt
from domain.services.context import ServiceContext
from domain.services.proposals import token_hash, token_lookup_key
from domain.services.read_cache import commit, read_proposal
from domain.services.retry import retry_on_conflict
from domain.spec import ProposalSpec, stored_spec
from domain.timeutil import format_utc


class Provenance(Approver):
    """Who approves, through what: from the caller's credential, or asserted in
    the request by a channel service for a binding of its own channel."""


@dataclass(frozen=True)
class ChannelService:
    """A channel caller registered for one channel: only bindings whose
    ``channel`` is this one are accepted, whoever carried the provenance.
    ``asserted``: the service asserted the provenance in its request, so the
    decision records it (``asserted_by``)."""

    subject: str
    channel: str
    asserted: bool = False

    @property
    def asserted_by(self) -> str | None:
        return self.subject if self.asserted else None


def check_service_channel(
    reads: DirectoryReads, who: Approver, service: ChannelService | None
) -> None:
    """The uniform failure unless both bindings are on the service's channel.

    The records come from ``reads``; an approval's commit condition-checks them
    (the authorization reads them too), a decline's lists them in its read set."""
    if service is None:
        return
    for stream_id in (
        identity_binding_record_id(who.identity_binding_id),
        channel_binding_record_id(who.channel_binding_id),
    ):
        record = reads.get(stream_id)
        if record is None or record.text("channel") != service.channel:
            raise unavailable("foreign_channel")


@dataclass(frozen=True)
class ApprovalResult:
    """``execution_pending`` with the attempt id and its current revision; or, for
    a quorum member's vote that is not the M-th, ``vote_recorded`` with the votes
    counted so far and the number required (no attempt yet)."""

    attempt_id: str | None
    attempt_revision: int | None
    status: str = "execution_pending"
    votes: int | None = None
    required: int | None = None


def unavailable(reason: str) -> ApprovalUnavailable:
    """The uniform failure; ``reason`` is for logs and metrics only, never the caller."""
    error = ApprovalUnavailable()
    error.reason = reason
    return error


def approve(
    ctx: ServiceContext,
    *,
    token: str,
    provenance: Provenance,
    service: ChannelService | None = None,
) -> ApprovalResult:
    """Turn one opaque token into exactly one queued attempt, or fail closed.

    With ``service``, both bindings must be on its channel (checked before
    anything else is answered, the stored attempt of a repeat included)."""
    proposal_id, presentation_id = resolve_presentation(ctx, token)

    def contended() -> ApprovalResult:
        raise unavailable("contention")

    def once(fresh: bool) -> ApprovalResult:
        return _approve_once(ctx, proposal_id, presentation_id, provenance, service, fresh=fresh)

    def step() -> ApprovalResult:
        if not ctx.cache.enabled:
            return once(True)
        try:
            return once(False)
        except ApprovalUnavailable:
            # Judged on cached reads: a stale entry may refuse what the store allows.
            ctx.cache.forget([proposal_id])
            return once(True)

    return retry_on_conflict(step, exhausted=contended)


def resolve_presentation(ctx: ServiceContext, token: str) -> tuple[str, str]:
    """(proposal id, presentation id) of a token, or the uniform failure.

    Hash first, always: the unknown-token path does the same work up to the lookup."""
    lookup = ctx.store.get_lookup(token_lookup_key(token_hash(token)), now=ctx.clock.now())
    if lookup is None:
        raise unavailable("unknown_token")
    return lookup["proposal_id"], lookup["presentation_id"]


def load_bound_presentation(
    ctx: ServiceContext,
    proposal_id: str,
    presentation_id: str,
    who: Provenance,
    *,
    cached: bool = False,
) -> Proposal:
    """The proposal of a presentation bound exactly to this caller's provenance,
    or the uniform failure. ``cached``: from the read cache (the caller's
    commit appends to the proposal, so its version is checked)."""
    if cached:
        proposal = read_proposal(ctx.store, ctx.cache, proposal_id)
    else:
        proposal = ctx.store.get(Proposal, proposal_id)
    if proposal is None or presentation_id not in proposal.presentations:
        raise unavailable("missing_record")
    presentation = proposal.presentations[presentation_id]
    # A presentation is the proposal's actor's, or a quorum member's own (made
    # only for a version that needs a quorum): either way, exactly this caller's.
    if (
        presentation["actor_id"] != who.actor_id
        or presentation["identity_binding_id"] != who.identity_binding_id
        or presentation["channel_binding_id"] != who.channel_binding_id
        or presentation["conversation_key"] != who.conversation_key
    ):
        raise unavailable("provenance_mismatch")
    return proposal


def _approve_once(
    ctx: ServiceContext,
    proposal_id: str,
    presentation_id: str,
    who: Provenance,
    service: ChannelService | None,
    *,
    fresh: bool,
) -> ApprovalResult:
    now = ctx.clock.now()
    proposal = load_bound_presentation(ctx, proposal_id, presentation_id, who, cached=not fresh)
    reads = DirectoryReads(ctx, fresh=fresh)
    check_service_channel(reads, who, service)
    presentation = proposal.presentations[presentation_id]
    version = presentation["version"]
    record = proposal.versions[version]
    status = proposal.presentation_status(presentation_id, now)
    if record["status"] == ProposalStatus.CLAIMED.value and status in (
        PresentationStatus.CONSUMED,
        PresentationStatus.REVOKED,
    ):
        # Duplicate, concurrent or sibling approval after the claim: converge.
        return _stored_attempt(ctx, record["attempt_id"])
    # a quorum member's presentation, or any made after the version escalated
    member = presentation["actor_id"] != proposal.actor_id or "escalated" in record
    replayed_vote = member and status is PresentationStatus.CONSUMED
    if replayed_vote and proposal.effective_status(version, now) is not ProposalStatus.PRESENTED:
        # a vote replayed once the version conflicted, was declined or superseded
        raise unavailable("not_claimable")
    if not replayed_vote:
        try:
            proposal.check_claimable(presentation_id, now)
        except IllegalTransition:
            raise unavailable("not_claimable") from None

    try:
        spec = stored_spec(record["spec"], record["payload_hash"])
    except InvalidSpec:
        raise unavailable("stored_spec_invalid") from None
    if spec is None:
        raise unavailable("payload_hash_mismatch")
    if member:
        return _vote(ctx, proposal, presentation_id, who, spec, reads, service)
    try:
        auth = authorize(ctx, who, spec, now, reads)
    except AuthorizationFailed as failed:
        raise unavailable(failed.reason) from None
    except TargetDrift as drift:
        _conflicted(ctx, proposal, version, drift)

    if auth.decision.verdict is Verdict.QUORUM:
        raise unavailable("requester_not_counted")  # members decide, not the requester
    at = format_utc(now)
    approval = human_approval(who.actor_id)
    attempt = queued_attempt(
        ctx,
        proposal,
        version,
        record,
        spec,
        delivery_mode=auth.delivery_mode,
        at=at,
        authorized=[[c.stream_id, c.version] for c in auth.read_set],
        approval=approval,
        approver=who,
    )
    attempt_id = attempt.id
    proposal.claim(
        presentation_id=presentation_id,
        attempt_id=attempt_id,
        now=now,
        at=at,
        asserted_by=service.asserted_by if service else None,
        approval=approval,
    )
    commit(
        ctx.store,
        ctx.cache,
        Commit(
            aggregates=[proposal, attempt],
            read_set=auth.read_set,
            due=[DueWork(attempt_id, now)],
        ),
    )
    return ApprovalResult(attempt_id=attempt_id, attempt_revision=attempt.version)


def _vote(
    ctx: ServiceContext,
    proposal: Proposal,
    presentation_id: str,
    who: Provenance,
    spec: ProposalSpec,
    reads: DirectoryReads,
    service: ChannelService | None,
) -> ApprovalResult:
    """A quorum member's approval (``quorum.py``): a vote, or the claim."""
    asserted_by = service.asserted_by if service else None
    version = proposal.presentations[presentation_id]["version"]
    try:
        done = quorum.vote(
            ctx, proposal, presentation_id, who, spec, ctx.clock.now(), reads, asserted_by
        )
    except quorum.NotCounted as refused:
        raise unavailable(refused.reason) from None
    except TargetDrift as drift:
        _conflicted(ctx, proposal, version, drift)
    return ApprovalResult(
        done.attempt_id, done.attempt_revision, done.status, done.votes, done.required
    )


def _conflicted(
    ctx: ServiceContext, proposal: Proposal, version: int, drift: TargetDrift
) -> NoReturn:
    """Target drift: the version can never be claimed; say so in one commit."""
    proposal.mark_conflicted(version=version, reason="target_drift", at=format_utc(ctx.clock.now()))
    target_check = ReadCheck(drift.target.id, drift.target.version)
    commit(ctx.store, ctx.cache, Commit(aggregates=[proposal], read_set=[target_check]))
    raise ProposalConflicted()


def _stored_attempt(ctx: ServiceContext, attempt_id: str | None) -> ApprovalResult:
    if attempt_id is None:
        raise unavailable("claimed_without_attempt")
    attempt = ctx.store.get(ExecutionAttempt, attempt_id)
    if attempt is None:
        # I3 says this state is unreachable; fail closed rather than guess.
        raise unavailable("claimed_without_attempt")
    return ApprovalResult(attempt_id=attempt.id, attempt_revision=attempt.version)
