"""Decline, cancel, expiry as a fact and the notifications derived from them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from domain.errors import IllegalTransition
from domain.notifications import NotificationType, expired_at, proposal_notifications
from domain.proposal import PresentationStatus, Proposal, ProposalStatus
from domain.timeutil import format_utc
from tests.support.aggregates import AT, NOW, TTL, claim, new_proposal, present, version_args
from tests.support.factories import T0
from tests.support.replay import Replay

LATER = T0 + TTL + timedelta(seconds=1)


@pytest.fixture
def replay() -> Replay:
    return Replay()


def test_a_decline_consumes_the_control_and_revokes_its_siblings(replay: Replay) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_a")
    present(proposal, "pres_b")
    proposal.decline(presentation_id="pres_a", now=NOW, at=AT)
    assert proposal.version_status(1) is ProposalStatus.DECLINED
    assert proposal.presentations["pres_a"]["status"] == PresentationStatus.CONSUMED.value
    assert proposal.presentations["pres_b"]["status"] == PresentationStatus.REVOKED.value
    with pytest.raises(IllegalTransition):
        claim(proposal, "pres_b")
    replay.check()


def test_a_claimed_version_cannot_be_declined_or_canceled(replay: Replay) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_a")
    present(proposal, "pres_b")
    claim(proposal, "pres_a")
    with pytest.raises(IllegalTransition):
        proposal.decline(presentation_id="pres_b", now=NOW, at=AT)
    assert proposal.cancel(version=1, at=AT) is False
    assert [type(e).__name__ for e in replay.events_of(proposal)][-1] == "Claimed"


def test_cancel_revokes_every_control_once(replay: Replay) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_a")
    assert proposal.cancel(version=1, at=AT) is True
    assert proposal.cancel(version=1, at=AT) is False
    assert proposal.version_status(1) is ProposalStatus.CANCELED
    assert proposal.presentations["pres_a"]["status"] == PresentationStatus.REVOKED.value
    with pytest.raises(IllegalTransition):
        proposal.cancel(version=2, at=AT)
    replay.check()


def test_a_version_expires_with_its_last_presentation_and_stays_expired(replay: Replay) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_a")
    assert proposal.effective_status(1, NOW) is ProposalStatus.PRESENTED
    assert proposal.effective_status(1, T0 + TTL) is ProposalStatus.EXPIRED
    assert proposal.version_status(1) is ProposalStatus.PRESENTED  # nothing was written
    with pytest.raises(IllegalTransition):
        proposal.present(
            presentation_id="pres_b",
            version=1,
            token_hash="h",
            identity_binding_id="ib",
            channel_binding_id="cb",
            conversation_key="c",
            expires_at=format_utc(LATER + TTL),
            at=format_utc(LATER),
            now=LATER,
        )


def test_expired_is_notified_once_per_version(replay: Replay) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_a")
    assert proposal_notifications(proposal, NOW) == []
    first = proposal_notifications(proposal, LATER)
    again = proposal_notifications(proposal, LATER + timedelta(days=3))
    assert first == again
    assert [(n.type, n.version) for n in first] == [(NotificationType.PROPOSAL_EXPIRED, 1)]
    assert first[0].at == format_utc(T0 + TTL)
    # superseded after it expired: still one notification for version 1, none for 2 yet
    proposal.revise(
        expected_version=None, at=format_utc(LATER), **version_args(destination="list-2")
    )
    assert proposal_notifications(proposal, LATER) == first
    assert expired_at(proposal, 2, LATER) is None


def test_a_decision_before_the_deadline_is_not_an_expiry(replay: Replay) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_a")
    proposal.decline(presentation_id="pres_a", now=NOW, at=format_utc(NOW))
    found = proposal_notifications(proposal, LATER)
    assert [(n.type, n.version) for n in found] == [(NotificationType.PROPOSAL_DECLINED, 1)]
    canceled = new_proposal(Replay())
    present(canceled, "pres_b")
    canceled.cancel(version=1, at=format_utc(NOW))
    assert proposal_notifications(canceled, LATER) == []


def test_revised_before_the_deadline_the_old_version_never_expires(replay: Replay) -> None:
    proposal: Proposal = new_proposal(replay)
    present(proposal, "pres_a")
    proposal.revise(expected_version=None, at=format_utc(NOW), **version_args(destination="list-2"))
    assert expired_at(proposal, 1, LATER) is None
