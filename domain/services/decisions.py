"""Decline and cancel (design.md 5.6): the actor says no, the proposer withdraws.

Both are events on the proposal stream that revoke every active presentation in the
same append, so they race an approval on one stream version and exactly one of
them wins. A decline or cancel of a version that is already decided (claimed,
declined, canceled, superseded, conflicted) appends nothing: the answer is the
stored truth. Decline failures are the approval's uniform ``ApprovalUnavailable``.
"""

from __future__ import annotations

from dataclasses import dataclass

from domain.errors import ConcurrencyConflict, IllegalTransition, LookupConflict, NotFound
from domain.ports import Commit, ReadCheck
from domain.proposal import PresentationStatus, Proposal, ProposalStatus
from domain.services.approval import (
    ChannelService,
    Provenance,
    check_service_channel,
    load_bound_presentation,
    resolve_presentation,
    unavailable,
)
from domain.services.authorization import DirectoryReads
from domain.services.context import ServiceContext
from domain.services.idempotency import IdempotencyKey
from domain.services.read_cache import DirectorySnapshot
from domain.services.retry import retry_on_conflict
from domain.timeutil import format_utc


@dataclass(frozen=True)
class DeclineResult:
    """The stored truth after a decline: ``declined``, or ``claimed`` (with its
    attempt) when an approval of a sibling presentation won."""

    proposal_id: str
    version: int
    status: str
    attempt_id: str | None = None


def decline(
    ctx: ServiceContext,
    *,
    token: str,
    provenance: Provenance,
    service: ChannelService | None = None,
) -> DeclineResult:
    """Consume one presentation as a refusal; no attempt can come from the version.

    With ``service``, both bindings must be on its channel (as for an approval)."""
    proposal_id, presentation_id = resolve_presentation(ctx, token)

    def contended() -> DeclineResult:
        raise unavailable("contention")

    return retry_on_conflict(
        lambda: _decline_once(ctx, proposal_id, presentation_id, provenance, service),
        exhausted=contended,
    )


def _decline_once(
    ctx: ServiceContext,
    proposal_id: str,
    presentation_id: str,
    who: Provenance,
    service: ChannelService | None,
) -> DeclineResult:
    now = ctx.clock.now()
    proposal = load_bound_presentation(ctx, proposal_id, presentation_id, who)
    reads = _RecordedReads(ctx)
    check_service_channel(reads, who, service)
    version = proposal.presentations[presentation_id]["version"]
    record = proposal.versions[version]
    shown = proposal.presentation_status(presentation_id, now)
    if record["status"] in (ProposalStatus.CLAIMED.value, ProposalStatus.DECLINED.value) and (
        shown in (PresentationStatus.CONSUMED, PresentationStatus.REVOKED)
    ):
        # A repeated decline, or the approval of a sibling won: the stored truth.
        return DeclineResult(proposal.id, version, record["status"], record["attempt_id"])
    try:
        proposal.decline(
            presentation_id=presentation_id,
            now=now,
            at=format_utc(now),
            asserted_by=service.asserted_by if service else None,
        )
    except IllegalTransition:
        raise unavailable("not_declinable") from None
    # The bindings a channel service was checked against must not change before
    # the decline commits (a binding moved to another channel conflicts).
    ctx.store.commit(Commit(aggregates=[proposal], read_set=reads.read_set))
    return DeclineResult(proposal.id, version, ProposalStatus.DECLINED.value)


class _RecordedReads(DirectoryReads):
    """Fresh directory reads that remember the version of each record read."""

    def __init__(self, ctx: ServiceContext) -> None:
        super().__init__(ctx, fresh=True)
        self.read_set: list[ReadCheck] = []

    def get(self, stream_id: str) -> DirectorySnapshot | None:
        found = super().get(stream_id)
        if found is not None:
            self.read_set.append(ReadCheck(found.id, found.version))
        return found


def cancel(
    ctx: ServiceContext,
    *,
    proposal_id: str,
    version: int,
    idempotency: IdempotencyKey | None = None,
) -> Proposal:
    """Withdraw a presented version (revoking its presentations); returns the stored
    proposal, unchanged when the version was already decided.

    With an idempotency key, the key is committed with the ``Canceled`` event
    (or alone when there is nothing to cancel); a retry answers with the stored
    proposal and appends nothing."""
    if (
        idempotency is not None
        and idempotency.stored_answer(ctx.store, ctx.clock.now()) is not None
    ):
        return _stored(ctx, proposal_id)

    def cancel_once() -> Proposal:
        now = ctx.clock.now()
        proposal = ctx.store.get(Proposal, proposal_id)
        if proposal is None or version not in proposal.versions:
            raise NotFound()
        changed = proposal.cancel(version=version, at=format_utc(now))
        lookups = [idempotency.record(now, proposal_id=proposal_id)] if idempotency else []
        if not changed and not lookups:
            return proposal
        try:
            ctx.store.commit(Commit(aggregates=[proposal], lookups=lookups))
        except LookupConflict:
            assert idempotency is not None
            if idempotency.stored_answer(ctx.store, ctx.clock.now()) is None:
                raise
            return _stored(ctx, proposal_id)
        return proposal

    def contended() -> Proposal:
        raise ConcurrencyConflict(proposal_id)

    return retry_on_conflict(cancel_once, exhausted=contended)


def _stored(ctx: ServiceContext, proposal_id: str) -> Proposal:
    proposal = ctx.store.get(Proposal, proposal_id)
    if proposal is None:
        raise NotFound()
    return proposal
