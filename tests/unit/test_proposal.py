"""The Proposal aggregate: versions, presentations and the atomic claim (design.md 5.1-5.2, I2)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from domain.errors import IllegalTransition, LedgerError, ProposalClaimed, StaleVersion
from domain.proposal import PresentationStatus, Proposal, ProposalStatus
from domain.timeutil import format_utc
from tests.support.aggregates import (
    AT,
    NOW,
    TTL,
    claim,
    new_proposal,
    present,
    revise,
    version_args,
)
from tests.support.factories import T0
from tests.support.replay import Replay


def refused(proposal: Proposal, command: Callable[[], object]) -> LedgerError:
    version = proposal.version
    statuses = {n: v["status"] for n, v in proposal.versions.items()}
    presentations = {p: v["status"] for p, v in proposal.presentations.items()}
    with pytest.raises(LedgerError) as caught:
        command()
    assert proposal.version == version
    assert {n: v["status"] for n, v in proposal.versions.items()} == statuses
    assert {p: v["status"] for p, v in proposal.presentations.items()} == presentations
    return caught.value


def last_event(replay: Replay, proposal: Proposal) -> Any:
    return replay.events_of(proposal)[-1]


# -- create and revise -------------------------------------------------------------


def test_new_proposal_is_version_one_presented(replay: Replay) -> None:
    proposal = new_proposal(replay)

    assert proposal.id == "prop_1"
    assert proposal.current_version == 1
    assert proposal.version_status(1) is ProposalStatus.PRESENTED
    record = proposal.version_record(1)
    assert record is not None
    assert record["payload_hash"] == version_args()["payload_hash"]
    assert record["attempt_id"] is None
    assert proposal.presentations == {}


def test_revise_supersedes_the_old_version_and_revokes_its_controls_in_one_event(
    replay: Replay,
) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_a")
    present(proposal, "pres_b")
    events_before = len(replay.events_of(proposal))

    new_version = revise(proposal, expected_version=1)

    assert new_version == 2
    assert proposal.current_version == 2
    assert proposal.version_status(1) is ProposalStatus.SUPERSEDED
    assert proposal.version_status(2) is ProposalStatus.PRESENTED
    assert proposal.presentation_status("pres_a", NOW) is PresentationStatus.REVOKED
    assert proposal.presentation_status("pres_b", NOW) is PresentationStatus.REVOKED
    events = replay.events_of(proposal)
    assert len(events) == events_before + 1
    assert type(events[-1]).__name__ == "Revised"
    assert events[-1].revoked == ["pres_a", "pres_b"]
    assert events[-1].superseded_version == 1


def test_revise_without_an_expected_version_revises_the_current_one(replay: Replay) -> None:
    proposal = new_proposal(replay)

    assert revise(proposal, expected_version=None) == 2
    assert revise(proposal, expected_version=None) == 3
    assert proposal.version_status(2) is ProposalStatus.SUPERSEDED


@pytest.mark.parametrize("expected", [0, 2, 7])
def test_revise_with_a_wrong_expected_version_is_stale(replay: Replay, expected: int) -> None:
    proposal = new_proposal(replay)

    error = refused(proposal, lambda: revise(proposal, expected_version=expected))

    assert isinstance(error, StaleVersion)


def test_revise_after_claim_fails_with_proposal_claimed(replay: Replay) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_a")
    claim(proposal, "pres_a")

    error = refused(proposal, lambda: revise(proposal, expected_version=1))

    assert isinstance(error, ProposalClaimed)


def test_revising_a_conflicted_version_starts_a_fresh_presented_one(replay: Replay) -> None:
    proposal = new_proposal(replay)
    proposal.mark_conflicted(version=1, reason="target_drift", at=AT)

    revise(proposal, expected_version=1, target={"id": "task:42", "base_revision": "r8"})

    assert proposal.version_status(1) is ProposalStatus.CONFLICTED
    assert proposal.version_status(2) is ProposalStatus.PRESENTED


# -- present -------------------------------------------------------------------------


def test_presentation_is_bound_to_the_current_view(replay: Replay) -> None:
    proposal = new_proposal(replay)

    present(proposal, "pres_a")

    presentation = proposal.presentations["pres_a"]
    assert presentation["version"] == 1
    assert presentation["actor_id"] == "alice"
    assert presentation["view_hash"] == proposal.versions[1]["view_hash"]
    assert presentation["token_hash"] == "hash-of-pres_a"
    assert proposal.presentation_status("pres_a", NOW) is PresentationStatus.ACTIVE
    assert proposal.active_presentation_ids(1) == ["pres_a"]


def test_only_the_current_version_can_be_presented(replay: Replay) -> None:
    proposal = new_proposal(replay)
    revise(proposal, expected_version=1)

    error = refused(proposal, lambda: present(proposal, "pres_old", version=1))

    assert isinstance(error, StaleVersion)


def test_a_version_that_does_not_exist_cannot_be_presented(replay: Replay) -> None:
    proposal = new_proposal(replay)

    refused(proposal, lambda: present(proposal, "pres_x", version=2))


@pytest.mark.parametrize("state", ["claimed", "conflicted"])
def test_a_version_that_is_no_longer_presented_cannot_be_presented(
    replay: Replay, state: str
) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_a")
    if state == "claimed":
        claim(proposal, "pres_a")
    else:
        proposal.mark_conflicted(version=1, reason="target_drift", at=AT)

    error = refused(proposal, lambda: present(proposal, "pres_b"))

    assert isinstance(error, IllegalTransition)


def test_presentation_ids_are_single_use(replay: Replay) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_a")

    refused(proposal, lambda: present(proposal, "pres_a"))


def test_presentation_expires_exactly_at_its_expiry(replay: Replay) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_a")
    expiry = T0 + TTL

    before = proposal.presentation_status("pres_a", expiry - timedelta(microseconds=1))

    assert before is PresentationStatus.ACTIVE
    assert proposal.presentation_status("pres_a", expiry) is PresentationStatus.EXPIRED


# -- claim ---------------------------------------------------------------------------


def test_claim_consumes_one_presentation_and_revokes_every_sibling_in_one_event(
    replay: Replay,
) -> None:
    proposal = new_proposal(replay)
    for pid in ("pres_a", "pres_b", "pres_c"):
        present(proposal, pid)
    events_before = len(replay.events_of(proposal))

    claim(proposal, "pres_b")

    assert proposal.version_status(1) is ProposalStatus.CLAIMED
    assert proposal.versions[1]["attempt_id"] == "att_1"
    assert proposal.presentation_status("pres_b", NOW) is PresentationStatus.CONSUMED
    assert proposal.presentation_status("pres_a", NOW) is PresentationStatus.REVOKED
    assert proposal.presentation_status("pres_c", NOW) is PresentationStatus.REVOKED
    assert proposal.active_presentation_ids() == []
    events = replay.events_of(proposal)
    assert len(events) == events_before + 1
    assert type(events[-1]).__name__ == "Claimed"
    assert events[-1].presentation_id == "pres_b"
    assert events[-1].revoked == ["pres_a", "pres_c"]


def test_claim_revokes_siblings_that_have_expired_but_were_never_revoked(
    replay: Replay,
) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_old")
    proposal.present(
        presentation_id="pres_new",
        version=1,
        token_hash="h",
        identity_binding_id="ib-alice",
        channel_binding_id="cb-1",
        conversation_key="conv-1",
        expires_at=format_utc(T0 + 2 * TTL),
        at=AT,
    )

    claim(proposal, "pres_new", now=T0 + TTL + timedelta(seconds=1))

    assert proposal.presentations["pres_old"]["status"] == PresentationStatus.REVOKED.value


@pytest.mark.parametrize("late", [timedelta(0), timedelta(seconds=1), timedelta(days=3)])
def test_claim_of_an_expired_presentation_is_illegal(replay: Replay, late: timedelta) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_a")

    error = refused(proposal, lambda: claim(proposal, "pres_a", now=T0 + TTL + late))

    assert isinstance(error, IllegalTransition)
    assert proposal.version_status(1) is ProposalStatus.PRESENTED


def test_claim_of_a_consumed_presentation_is_illegal(replay: Replay) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_a")
    claim(proposal, "pres_a")

    error = refused(proposal, lambda: claim(proposal, "pres_a"))

    assert isinstance(error, IllegalTransition)


def test_claim_of_a_revoked_sibling_is_illegal(replay: Replay) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_a")
    present(proposal, "pres_b")
    claim(proposal, "pres_a")

    error = refused(proposal, lambda: claim(proposal, "pres_b"))

    assert isinstance(error, IllegalTransition)
    assert proposal.versions[1]["attempt_id"] == "att_1"


def test_claim_of_a_superseded_version_is_illegal(replay: Replay) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_v1")
    revise(proposal, expected_version=1)
    present(proposal, "pres_v2")

    error = refused(proposal, lambda: claim(proposal, "pres_v1"))

    assert isinstance(error, IllegalTransition)
    assert proposal.presentation_status("pres_v2", NOW) is PresentationStatus.ACTIVE


def test_claim_of_a_conflicted_version_is_illegal(replay: Replay) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_a")
    proposal.mark_conflicted(version=1, reason="target_drift", at=AT)

    refused(proposal, lambda: claim(proposal, "pres_a"))


def test_claim_of_an_unknown_presentation_is_illegal(replay: Replay) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_a")

    refused(proposal, lambda: claim(proposal, "pres_nope"))


def test_claim_of_a_new_version_after_revision_succeeds(replay: Replay) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_v1")
    revise(proposal, expected_version=1)
    present(proposal, "pres_v2")

    claim(proposal, "pres_v2")

    assert proposal.version_status(2) is ProposalStatus.CLAIMED
    assert proposal.version_status(1) is ProposalStatus.SUPERSEDED


# -- conflicted ------------------------------------------------------------------------


def test_mark_conflicted_revokes_every_active_control(replay: Replay) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_a")
    present(proposal, "pres_b")

    proposal.mark_conflicted(version=1, reason="target_drift", at=AT)

    assert proposal.version_status(1) is ProposalStatus.CONFLICTED
    assert proposal.active_presentation_ids() == []
    event = last_event(replay, proposal)
    assert type(event).__name__ == "Conflicted"
    assert event.revoked == ["pres_a", "pres_b"]


@pytest.mark.parametrize("state", ["claimed", "superseded", "conflicted"])
def test_only_a_presented_version_can_become_conflicted(replay: Replay, state: str) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_a")
    if state == "claimed":
        claim(proposal, "pres_a")
    elif state == "superseded":
        revise(proposal, expected_version=1)
    else:
        proposal.mark_conflicted(version=1, reason="target_drift", at=AT)

    error = refused(proposal, lambda: proposal.mark_conflicted(version=1, reason="again", at=AT))

    assert isinstance(error, IllegalTransition)


# -- replay ----------------------------------------------------------------------------


def test_replay_rebuilds_versions_and_controls_exactly(replay: Replay) -> None:
    proposal = new_proposal(replay)
    present(proposal, "pres_a")
    revise(proposal, expected_version=1)
    present(proposal, "pres_b")
    present(proposal, "pres_c")
    claim(proposal, "pres_c")

    rebuilt = replay.rebuild(proposal)

    assert rebuilt.versions == proposal.versions
    assert rebuilt.presentations == proposal.presentations
    assert rebuilt.current_version == 2
    assert rebuilt.revision == proposal.revision == 6
    assert isinstance(next(iter(rebuilt.versions)), int)
