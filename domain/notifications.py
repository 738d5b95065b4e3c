"""What the people around an approval are told: notification types and facts.

A notification is derived from the log (and, for expiry, from the clock), never
written by a background job. Each has a deterministic id, so whoever delivers
it (a webhook subscriber of the log) records one delivery per id and
subscription: ``proposal.expired`` is one notification per proposal version
however often, and by whichever process, the expiry is observed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from domain.proposal import Proposal, ProposalStatus
from domain.timeutil import parse_utc

ID_LABEL = "execution-ledger/notification/v1"


class NotificationType(StrEnum):
    """The event types a subscription can ask for (design.md 5.10)."""

    ATTEMPT_SUCCEEDED = "attempt.succeeded"
    ATTEMPT_FAILED_SAFE = "attempt.failed_safe"
    ATTEMPT_OUTCOME_UNKNOWN = "attempt.outcome_unknown"
    ATTEMPT_MANUALLY_RESOLVED = "attempt.manually_resolved"
    ATTEMPT_EFFECT_AFTER_NO_EFFECT = "attempt.effect_after_no_effect"
    PROPOSAL_DECLINED = "proposal.declined"
    PROPOSAL_EXPIRED = "proposal.expired"
    PROPOSAL_APPROVED = "proposal.approved"
    PROPOSAL_VOTE_RECORDED = "proposal.vote_recorded"
    PROPOSAL_ESCALATED = "proposal.escalated"


@dataclass(frozen=True)
class Notification:
    """One fact to tell: its type, the record it is about, and when it became true."""

    id: str
    type: NotificationType
    subject_id: str
    version: int
    at: str


def notification_id(kind: NotificationType, subject_id: str, version: int) -> str:
    """Deterministic: the same fact always has the same id (the webhook-id)."""
    digest = hashlib.sha256(f"{ID_LABEL}\n{kind.value}\n{subject_id}\n{version}".encode())
    return "msg_" + digest.hexdigest()[:40]


def _ended_at(proposal: Proposal, number: int) -> str | None:
    """When version ``number`` stopped being presented, or None while it is."""
    record = proposal.versions[number]
    if record["status"] == ProposalStatus.PRESENTED.value:
        return None
    if record["status"] == ProposalStatus.SUPERSEDED.value and number + 1 in proposal.versions:
        ended: str = proposal.versions[number + 1]["created_at"]
        return ended
    decided: str | None = record.get("decided_at") or record.get("approved_at")
    return decided


def expired_at(proposal: Proposal, number: int, now: datetime) -> str | None:
    """When version ``number`` expired, or None if it has not (yet): its expiry
    passed while it was still presented. Stable once not None."""
    deadline = proposal.expiry_of(number)
    ended = _ended_at(proposal, number)
    if ended is not None and parse_utc(ended) < parse_utc(deadline):
        return None
    if ended is None and now < parse_utc(deadline):
        return None
    if ended is not None and proposal.versions[number]["status"] in (
        ProposalStatus.CLAIMED.value,
        ProposalStatus.DECLINED.value,
    ):
        return None  # decided by the actor before or at the deadline
    return deadline


def proposal_notifications(proposal: Proposal, now: datetime) -> list[Notification]:
    """``proposal.approved``, ``proposal.declined`` and ``proposal.expired``, at
    most one per version (the proposal view it carries says who or what approved),
    and ``proposal.vote_recorded`` for each quorum member's recorded vote (the view
    lists the votes so far), and ``proposal.escalated`` once per version handed to
    a fallback group (the view names the group)."""
    found: list[Notification] = []

    def tell(kind: NotificationType, number: int, at: str, about: str = proposal.id) -> None:
        found.append(
            Notification(notification_id(kind, about, number), kind, proposal.id, number, at)
        )

    for number, record in sorted(proposal.versions.items()):
        for place, vote in enumerate(record.get("votes", []), start=1):
            # one per recorded vote of a quorum member (the deciding one is the approval)
            about = f"{proposal.id}/vote/{place}"
            tell(NotificationType.PROPOSAL_VOTE_RECORDED, number, vote["at"], about)
        escalated = record.get("escalated")
        if escalated is not None:
            tell(NotificationType.PROPOSAL_ESCALATED, number, escalated["at"])
        if record["status"] == ProposalStatus.CLAIMED.value:
            tell(NotificationType.PROPOSAL_APPROVED, number, record.get("approved_at") or "")
            continue
        if record["status"] == ProposalStatus.DECLINED.value:
            tell(NotificationType.PROPOSAL_DECLINED, number, record.get("decided_at") or "")
            continue
        moment = expired_at(proposal, number, now)
        if moment is not None:
            tell(NotificationType.PROPOSAL_EXPIRED, number, moment)
    return found


ATTEMPT_NOTIFICATIONS: dict[str, NotificationType] = {
    "succeeded": NotificationType.ATTEMPT_SUCCEEDED,
    "failed_safe": NotificationType.ATTEMPT_FAILED_SAFE,
    "outcome_unknown": NotificationType.ATTEMPT_OUTCOME_UNKNOWN,
    "manually_resolved": NotificationType.ATTEMPT_MANUALLY_RESOLVED,
    "effect_after_no_effect": NotificationType.ATTEMPT_EFFECT_AFTER_NO_EFFECT,
}


def attempt_notification(
    attempt_id: str, status: str, previous: str | None, version: int, at: str
) -> Notification | None:
    """The notification of an attempt reaching ``status`` at stream ``version``
    (None when the status did not change or is not one anyone is told of)."""
    kind = ATTEMPT_NOTIFICATIONS.get(status)
    if kind is None or status == previous:
        return None
    return Notification(notification_id(kind, attempt_id, version), kind, attempt_id, version, at)
