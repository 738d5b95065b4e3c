"""The Proposal aggregate: a lineage of immutable versions and their presentations.

Only the current version of a lineage can be presented or claimed. Creating
version n+1 supersedes version n and revokes its active presentations in the
same event, so both happen in one commit. The lineage belongs to the proposer
that created it (``proposer``, on ``Proposed``); the service layer lets no other
proposer read, revise, present or cancel it. Claiming consumes one presentation
and revokes every sibling in the same ``Claimed`` event (I2); declining and
canceling revoke every active presentation in the same way, so a decline and an
approval of sibling presentations race on one stream version and exactly one wins.

Expiry is a fact derived from time, never written: a presented version whose
spec has expired, or whose every presentation has expired, is ``expired``
(``effective_status``), and it can no longer be presented.

A version has at most ``max_active`` live presentations, and presenting retires
the lapsed ones (``PresentationsLapsed``, in the same commit), so no event that
lists presentations (``Claimed``, ``Revised``, ``Conflicted``) can grow without
bound, and no replay of the stream either.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from eventsourcing.domain import event

from domain.base import LedgerAggregate
from domain.errors import IllegalTransition, TooManyPresentations
from domain.proposal_state import PresentationStatus, ProposalState, ProposalStatus
from domain.timeutil import is_past

__all__ = ["PresentationStatus", "Proposal", "ProposalStatus"]


BALLOT_FIELDS = ("actor_id", "identity_binding_id", "channel_binding_id", "conversation_key")
"""What a vote is bound to: its presentation's actor and bindings."""


class Proposal(LedgerAggregate, ProposalState):
    """A proposal lineage. ``versions[n]`` and ``presentations[id]`` are plain dicts;
    the queries and rules are :class:`ProposalState`'s."""

    @staticmethod
    def create_id(proposal_id: str, **_: Any) -> str:
        return proposal_id

    @event("Proposed")
    def __init__(
        self,
        proposal_id: str,
        actor_id: str,
        spec: dict[str, Any],
        payload_hash: str,
        view_hash: str,
        renderer_build: str,
        at: str,
        proposer: str | None = None,  # came later: older events replay with None
    ) -> None:
        self.actor_id = actor_id
        self.proposer = proposer
        self.versions = {}
        self.presentations = {}
        self._add_version(1, spec, payload_hash, view_hash, renderer_build, at)

    def _add_version(
        self,
        number: int,
        spec: dict[str, Any],
        payload_hash: str,
        view_hash: str,
        renderer_build: str,
        at: str,
    ) -> None:
        self.versions[number] = {
            "spec": spec,
            "payload_hash": payload_hash,
            "view_hash": view_hash,
            "renderer_build": renderer_build,
            "status": ProposalStatus.PRESENTED.value,
            "created_at": at,
            "attempt_id": None,
        }
        self.current_version = number

    # -- commands ------------------------------------------------------------

    def revise(
        self,
        *,
        spec: dict[str, Any],
        payload_hash: str,
        view_hash: str,
        renderer_build: str,
        expected_version: int | None,
        at: str,
    ) -> int:
        """Create version n+1, superseding n and revoking its active presentations."""
        self.check_current(expected_version)
        self.check_revisable()
        self._revised(
            version=self.current_version + 1,
            spec=spec,
            payload_hash=payload_hash,
            view_hash=view_hash,
            renderer_build=renderer_build,
            superseded_version=self.current_version,
            revoked=self.active_presentation_ids(),
            at=at,
        )
        return self.current_version

    @event("Revised")
    def _revised(
        self,
        version: int,
        spec: dict[str, Any],
        payload_hash: str,
        view_hash: str,
        renderer_build: str,
        superseded_version: int,
        revoked: list[str],
        at: str,
    ) -> None:
        old = self.versions[superseded_version]
        if old["status"] == ProposalStatus.PRESENTED.value:
            old["status"] = ProposalStatus.SUPERSEDED.value
        self._revoke(revoked)
        self._add_version(version, spec, payload_hash, view_hash, renderer_build, at)

    def present(
        self,
        *,
        presentation_id: str,
        version: int,
        token_hash: str,
        identity_binding_id: str,
        channel_binding_id: str,
        conversation_key: str,
        expires_at: str,
        at: str,
        now: datetime | None = None,
        max_active: int | None = None,
        actor_id: str | None = None,
    ) -> None:
        """Add a single-use presentation of the current version.

        With ``now``, active presentations that have expired are retired first;
        with ``max_active``, a version that already has that many live ones is
        refused (TooManyPresentations). ``actor_id``: a quorum member's own
        presentation (None: the proposal's actor, as for a single approval).
        """
        self.check_presentable(version, now)
        if presentation_id in self.presentations:
            raise IllegalTransition("Presentation id already used.")
        active = self.active_presentation_ids(version)
        lapsed = (
            [pid for pid in active if is_past(self.presentations[pid]["expires_at"], now)]
            if now is not None
            else []
        )
        if max_active is not None and len(active) - len(lapsed) >= max_active:
            raise TooManyPresentations()
        if lapsed:
            self._lapsed(presentation_ids=lapsed, at=at)
        self._presented(
            presentation_id=presentation_id,
            version=version,
            token_hash=token_hash,
            actor_id=actor_id or self.actor_id,
            identity_binding_id=identity_binding_id,
            channel_binding_id=channel_binding_id,
            conversation_key=conversation_key,
            view_hash=self.versions[version]["view_hash"],
            expires_at=expires_at,
            at=at,
        )

    @event("Presented")
    def _presented(
        self,
        presentation_id: str,
        version: int,
        token_hash: str,
        actor_id: str,
        identity_binding_id: str,
        channel_binding_id: str,
        conversation_key: str,
        view_hash: str,
        expires_at: str,
        at: str,
    ) -> None:
        self.presentations[presentation_id] = {
            "version": version,
            "token_hash": token_hash,
            "actor_id": actor_id,
            "identity_binding_id": identity_binding_id,
            "channel_binding_id": channel_binding_id,
            "conversation_key": conversation_key,
            "view_hash": view_hash,
            "expires_at": expires_at,
            "created_at": at,
            "status": PresentationStatus.ACTIVE.value,
        }

    @event("PresentationsLapsed")
    def _lapsed(self, presentation_ids: list[str], at: str) -> None:
        for pid in presentation_ids:
            self.presentations[pid]["status"] = PresentationStatus.EXPIRED.value

    def claim(
        self,
        *,
        presentation_id: str,
        attempt_id: str,
        now: datetime,
        at: str,
        asserted_by: str | None = None,
        approval: dict[str, Any] | None = None,
    ) -> None:
        """Consume one presentation, claim its version and revoke every sibling.

        ``asserted_by``: the channel service that asserted the approval's
        provenance in its request (None: the credential carried it).
        ``approval``: how it was approved (``domain.approvals``)."""
        self.check_claimable(presentation_id, now)
        self._claimed(
            version=self.presentations[presentation_id]["version"],
            presentation_id=presentation_id,
            attempt_id=attempt_id,
            revoked=[p for p in self.active_presentation_ids() if p != presentation_id],
            at=at,
            asserted_by=asserted_by,
            approval=approval,
        )

    def claim_automatically(
        self, *, version: int, attempt_id: str, approval: dict[str, Any], now: datetime, at: str
    ) -> None:
        """The ledger claims the current, presented version itself (a policy or a
        standing grant approved it): no presentation is consumed, every active one
        is revoked, in the same ``Claimed`` event a person's approval appends."""
        if version != self.current_version:
            raise IllegalTransition("Only the current version can be claimed.")
        if self.effective_status(version, now) is not ProposalStatus.PRESENTED:
            raise IllegalTransition("The proposal version is not presented.")
        self._claimed(
            version=version,
            presentation_id=None,
            attempt_id=attempt_id,
            revoked=self.active_presentation_ids(),
            at=at,
            approval=approval,
        )

    @event("Claimed")
    def _claimed(
        self,
        version: int,
        presentation_id: str | None,  # None: claimed by the ledger (policy, grant)
        attempt_id: str,
        revoked: list[str],
        at: str,
        asserted_by: str | None = None,  # came later: older events replay with None
        approval: dict[str, Any] | None = None,  # likewise (None: a human approval)
    ) -> None:
        if presentation_id is not None:
            self.presentations[presentation_id]["status"] = PresentationStatus.CONSUMED.value
        self._revoke(revoked)
        self.versions[version]["status"] = ProposalStatus.CLAIMED.value
        self.versions[version]["attempt_id"] = attempt_id
        self.versions[version]["approval"] = approval
        self.versions[version]["approved_at"] = at

    def record_vote(
        self, *, presentation_id: str, now: datetime, at: str, asserted_by: str | None = None
    ) -> None:
        """A quorum member's vote that is not the deciding one: consume their
        presentation and add the vote to the version (docs/policies.md, I13)."""
        self.check_claimable(presentation_id, now)
        self._vote_recorded(
            version=self.presentations[presentation_id]["version"],
            presentation_id=presentation_id,
            at=at,
            asserted_by=asserted_by,
        )

    @event("VoteRecorded")
    def _vote_recorded(
        self, version: int, presentation_id: str, at: str, asserted_by: str | None
    ) -> None:
        shown = self.presentations[presentation_id]
        shown["status"] = PresentationStatus.CONSUMED.value
        vote = {key: shown[key] for key in BALLOT_FIELDS} | {"presentation_id": presentation_id}
        self.versions[version].setdefault("votes", []).append(vote | {"at": at})

    def votes(self, version: int) -> list[dict[str, Any]]:
        """The votes recorded for a version, oldest first (the deciding one is on
        the claim's approval, not here)."""
        return list(self.versions[version].get("votes", []))

    def escalate(self, *, version: int, group: str, policy_id: str, now: datetime, at: str) -> bool:
        """Hand the current, presented version to a fallback group, once
        (``domain.escalation``): revoke every active presentation and record the
        group, in one event. False (no event) when it is no longer presented or
        has escalated already."""
        if version != self.current_version or "escalated" in self.versions[version]:
            return False
        if self.effective_status(version, now) is not ProposalStatus.PRESENTED:
            return False
        self._escalated(
            version=version,
            group=group,
            policy_id=policy_id,
            revoked=self.active_presentation_ids(version),
            at=at,
        )
        return True

    @event("Escalated")
    def _escalated(
        self, version: int, group: str, policy_id: str, revoked: list[str], at: str
    ) -> None:
        self._revoke(revoked)
        self.versions[version]["escalated"] = {"group": group, "policy_id": policy_id, "at": at}

    def decline(
        self, *, presentation_id: str, now: datetime, at: str, asserted_by: str | None = None
    ) -> None:
        """The actor says no: consume this presentation, mark the version declined and
        revoke every sibling, in one event (no attempt can come from it)."""
        self.check_claimable(presentation_id, now)
        self._declined(
            version=self.presentations[presentation_id]["version"],
            presentation_id=presentation_id,
            revoked=[p for p in self.active_presentation_ids() if p != presentation_id],
            at=at,
            asserted_by=asserted_by,
        )

    @event("Declined")
    def _declined(
        self,
        version: int,
        presentation_id: str,
        revoked: list[str],
        at: str,
        asserted_by: str | None = None,  # came later: older events replay with None
    ) -> None:
        self.presentations[presentation_id]["status"] = PresentationStatus.CONSUMED.value
        self._revoke(revoked)
        self.versions[version]["status"] = ProposalStatus.DECLINED.value
        self.versions[version]["decided_at"] = at

    def cancel(self, *, version: int, at: str) -> bool:
        """Withdraw a presented version and revoke its presentations; False (no event)
        when the version is no longer presented: the stored truth stands."""
        if version not in self.versions:
            raise IllegalTransition("Unknown proposal version.")
        if self.version_status(version) is not ProposalStatus.PRESENTED:
            return False
        self._canceled(version=version, revoked=self.active_presentation_ids(), at=at)
        return True

    @event("Canceled")
    def _canceled(self, version: int, revoked: list[str], at: str) -> None:
        self._revoke(revoked)
        self.versions[version]["status"] = ProposalStatus.CANCELED.value
        self.versions[version]["decided_at"] = at

    def mark_conflicted(self, *, version: int, reason: str, at: str) -> None:
        """Target drift: the version can never be claimed; its presentations are revoked."""
        if self.version_status(version) is not ProposalStatus.PRESENTED:
            raise IllegalTransition("Only a presented version can become conflicted.")
        self._conflicted(
            version=version, reason=reason, revoked=self.active_presentation_ids(), at=at
        )

    @event("Conflicted")
    def _conflicted(self, version: int, reason: str, revoked: list[str], at: str) -> None:
        self.versions[version]["status"] = ProposalStatus.CONFLICTED.value
        self._revoke(revoked)

    def _revoke(self, presentation_ids: list[str]) -> None:
        for pid in presentation_ids:
            self.presentations[pid]["status"] = PresentationStatus.REVOKED.value
