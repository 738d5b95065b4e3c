"""The states of a proposal and its presentations, the queries over them and
the rules its commands check (``domain.proposal`` holds the commands and events).

Ownership: a lineage belongs to the proposer that created it (``proposer`` on
``Proposed``). A lineage proposed before the field existed has none, and any
proposer keeps the access it had then (``owned_by``).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from domain.errors import IllegalTransition, ProposalClaimed, StaleVersion
from domain.timeutil import format_utc, is_past, parse_utc


class ProposalStatus(StrEnum):
    """Status of one proposal version."""

    PRESENTED = "presented"
    CLAIMED = "claimed"
    CONFLICTED = "conflicted"
    SUPERSEDED = "superseded"
    CANCELED = "canceled"
    EXPIRED = "expired"
    DECLINED = "declined"


class PresentationStatus(StrEnum):
    """Status of one single-use presentation."""

    ACTIVE = "active"
    CONSUMED = "consumed"
    REVOKED = "revoked"
    EXPIRED = "expired"


class ProposalState:
    """What a proposal's events built up, read by queries and checked by rules."""

    actor_id: str
    proposer: str | None
    versions: dict[int, dict[str, Any]]
    presentations: dict[str, dict[str, Any]]
    current_version: int

    def owned_by(self, proposer: str) -> bool:
        """True for the proposer that created the lineage (and for any proposer
        when it was created before the proposer was recorded)."""
        return self.proposer is None or self.proposer == proposer

    # -- queries -------------------------------------------------------------

    def version_record(self, number: int) -> dict[str, Any] | None:
        return self.versions.get(number)

    def version_status(self, number: int) -> ProposalStatus:
        return ProposalStatus(self.versions[number]["status"])

    def presentation_status(self, presentation_id: str, now: datetime) -> PresentationStatus:
        """The status, with ``expired`` derived from the clock for active presentations."""
        p = self.presentations[presentation_id]
        status = PresentationStatus(p["status"])
        if status is PresentationStatus.ACTIVE and is_past(p["expires_at"], now):
            return PresentationStatus.EXPIRED
        return status

    def expiry_of(self, number: int) -> str:
        """When version ``number`` stops being approvable if nothing else happens:
        its spec expiry, or earlier the expiry of the last of its presentations.

        Stable once reached: an expired version cannot be presented again."""
        record = self.versions[number]
        deadline = parse_utc(record["spec"]["expires_at"])
        expiries = [
            parse_utc(p["expires_at"])
            for p in self.presentations.values()
            if p["version"] == number
        ]
        if expiries:
            deadline = min(deadline, max(expiries))
        return format_utc(deadline)

    def effective_status(self, number: int, now: datetime) -> ProposalStatus:
        """The stored status, with ``expired`` derived from the clock for a
        presented version whose spec or whose every presentation has expired."""
        status = self.version_status(number)
        if status is ProposalStatus.PRESENTED and is_past(self.expiry_of(number), now):
            return ProposalStatus.EXPIRED
        return status

    def active_presentation_ids(self, version: int | None = None) -> list[str]:
        """Ids of presentations still marked active (expiry not considered)."""
        return sorted(
            pid
            for pid, p in self.presentations.items()
            if p["status"] == PresentationStatus.ACTIVE.value
            and (version is None or p["version"] == version)
        )

    # -- rules ---------------------------------------------------------------

    def check_current(self, expected_version: int | None) -> None:
        if expected_version is not None and expected_version != self.current_version:
            raise StaleVersion()

    def check_revisable(self) -> None:
        if self.version_status(self.current_version) is ProposalStatus.CLAIMED:
            raise ProposalClaimed()

    def check_presentable(self, version: int, now: datetime | None = None) -> None:
        if version != self.current_version:
            raise StaleVersion()
        if self.version_status(version) is not ProposalStatus.PRESENTED:
            raise IllegalTransition("Only a presented, current version can be presented.")
        if now is not None and self.effective_status(version, now) is ProposalStatus.EXPIRED:
            raise IllegalTransition("The proposal version has expired.")

    def check_claimable(self, presentation_id: str, now: datetime) -> None:
        p = self.presentations.get(presentation_id)
        if p is None:
            raise IllegalTransition("Unknown presentation.")
        if self.presentation_status(presentation_id, now) is not PresentationStatus.ACTIVE:
            raise IllegalTransition("The presentation is not active.")
        version = p["version"]
        if version != self.current_version:
            raise IllegalTransition("The presentation is for a superseded version.")
        if self.version_status(version) is not ProposalStatus.PRESENTED:
            raise IllegalTransition("The proposal version is not presented.")
        if p["view_hash"] != self.versions[version]["view_hash"]:
            raise IllegalTransition("The presentation is bound to another view.")
