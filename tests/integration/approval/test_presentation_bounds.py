"""Bounded presentations and bounded events, on memory, SQLite and DynamoDB.

Found by the adversarial pass: every presentation made the next request replay
a longer stream, and the ``Claimed`` event listed every revoked sibling (120 KB
at 3,000), which would pass DynamoDB's 400 KB item limit near 10,000 and make
the claim impossible.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from adapters.store import MAX_EVENT_BYTES, LedgerStore, check_event_size
from domain.errors import ApprovalUnavailable, EventTooLarge, TooManyPresentations
from domain.proposal import PresentationStatus, Proposal
from domain.services.approval import approve
from domain.services.proposals import propose
from tests.support.worlds.approval import World, base_spec

LIMIT = 5
LONG_TTL = 86400


@pytest.fixture
def bounded(world: World) -> World:
    world.ctx = replace(world.ctx, max_active_presentations=LIMIT)
    return world


def test_a_version_has_at_most_the_configured_live_presentations(bounded: World) -> None:
    proposal_id = bounded.propose()
    for _ in range(LIMIT):
        bounded.present(proposal_id)
    before = bounded.store.version_of(proposal_id)
    with pytest.raises(TooManyPresentations):
        bounded.present(proposal_id)
    assert bounded.store.version_of(proposal_id) == before  # nothing written


def test_expired_presentations_are_retired_by_the_next_one_in_the_same_commit(
    bounded: World,
) -> None:
    proposal_id = bounded.propose()
    # one long-lived presentation keeps the version presented (a version whose every
    # presentation has expired is expired itself, and is never presented again)
    keeper = bounded.present(proposal_id, ttl_seconds=LONG_TTL)
    first = [bounded.present(proposal_id, ttl_seconds=60) for _ in range(LIMIT - 1)]
    bounded.clock.advance(61)
    before = bounded.store.version_of(proposal_id)
    fresh = bounded.present(proposal_id)
    events = bounded.store.read_stream(proposal_id, gt=before)
    assert [e.topic.rsplit(".", 1)[-1] for e in events] == ["PresentationsLapsed", "Presented"]
    proposal = bounded.store.get(Proposal, proposal_id)
    assert proposal is not None
    assert proposal.active_presentation_ids(1) == sorted(
        [keeper.presentation_id, fresh.presentation_id]
    )
    for old in first:
        assert proposal.presentations[old.presentation_id]["status"] == (
            PresentationStatus.EXPIRED.value
        )
    # a retired presentation stays refused, exactly like an expired one
    with pytest.raises(ApprovalUnavailable):
        approve(bounded.ctx, token=first[0].token, provenance=bounded.who)


def test_many_presentation_rounds_keep_every_event_and_the_replay_bounded(
    bounded: World,
) -> None:
    """200 presentations over 40 expiry rounds: the claim lists at most LIMIT - 1
    siblings and the stream holds no event larger than the first proposal's."""
    proposal_id = bounded.propose()
    keeper = bounded.present(proposal_id, ttl_seconds=LONG_TTL)
    presentations = []
    for _ in range(40):
        presentations += [bounded.present(proposal_id, ttl_seconds=60) for _ in range(LIMIT - 1)]
        bounded.clock.advance(61)
    last = [bounded.present(proposal_id) for _ in range(LIMIT - 1)]
    approve(bounded.ctx, token=last[0].token, provenance=bounded.who)
    events = bounded.store.read_stream(proposal_id)
    claimed = bounded.store.events(proposal_id)[-1].data()  # type: ignore[attr-defined]
    assert events[-1].topic.endswith(".Claimed")
    assert len(claimed["revoked"]) == LIMIT - 1
    assert keeper.presentation_id in claimed["revoked"]
    assert max(len(e.state) for e in events[1:]) < len(events[0].state)
    proposal = bounded.store.get(Proposal, proposal_id)
    assert proposal is not None
    assert not proposal.active_presentation_ids()


def test_an_event_over_the_stated_size_fails_clearly_and_writes_nothing(world: World) -> None:
    small = LedgerStore(world.store.recorder, max_event_bytes=4096)
    ctx = replace(world.ctx, store=small)
    with pytest.raises(EventTooLarge) as raised:
        propose(ctx, actor_id="alice", spec_data=base_spec(content={"text": "x" * 5000}))
    assert "Proposed event" in raised.value.detail and "4096" in raised.value.detail
    assert "xxxx" not in raised.value.detail
    assert world.tokens.proposal_ids
    assert world.store.read_stream(world.tokens.proposal_ids[-1]) == []
    world.tokens.proposal_ids.pop()  # nothing to check: it was never written


def test_the_largest_valid_proposal_fits_well_under_the_stated_size(world: World) -> None:
    """Content at its 16 KiB canonical limit and 64 sources of 256 four-byte
    characters: about the biggest Proposed (or Revised) event a spec can make,
    even without the 64 KiB body limit of the HTTP API in front of it."""
    wide = "\U0001f600" * 256
    content = {f"k{i}": "\u00e9" * 4000 for i in range(2)}
    spec = base_spec(
        content=content,
        sources=[wide] * 64,
        destination=wide,
        target={"id": wide, "base_revision": "r7"},
    )
    result = propose(world.ctx, actor_id="alice", spec_data=spec)
    stored = world.store.read_stream(result.proposal_id)[0]
    check_event_size(stored)
    assert len(stored.state) < MAX_EVENT_BYTES * 3 // 4, len(stored.state)
