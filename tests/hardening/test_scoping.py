"""Callers are scoped (issue 26, finding 3), on memory, SQLite and the emulator.

- A lineage belongs to the proposer that created it: another proposer gets the
  uniform NotFound on read, revise, present and cancel; admins read and cancel
  any; the channel of the proposal's actor reads it.
- A presentation is for the proposal's own actor, through that actor's identity
  binding and the conversation's channel binding on the same channel; anything
  else is refused before it is counted, so controls that can never be approved
  cannot lock the owner out with ``too_many_presentations``.
- Idempotency keys are namespaced per caller: one caller's key never refuses,
  nor answers, another caller's request.
- An idempotency key read after its expiry is absent: the key can be used again.

Before: another proposer read, presented (20 live tokens) and canceled the
owner's proposal, and its 20 presentations locked the owner out (409); a key
another caller had used answered 422.
"""

from __future__ import annotations

import pytest

from domain.errors import (
    IdempotencyKeyRefused,
    InvalidInput,
    NotFound,
    TooManyPresentations,
)
from domain.proposal import Proposal
from domain.services.approval import Provenance
from domain.services.idempotency import KEEP
from domain.services.presentation_bindings import NOT_THE_ACTORS, NOT_THE_CONVERSATIONS
from tests.support.scoping import Scoped

MAX_ACTIVE = 20


def test_another_proposer_gets_not_found_on_read_revise_present_and_cancel(
    scoped: Scoped,
) -> None:
    owner, other = scoped.proposer("backend-a"), scoped.proposer("backend-b")
    created = owner.propose("alice", scoped.spec())
    lineage = created.proposal_id
    stored = scoped.host.wiring.store.get(Proposal, lineage)
    assert stored is not None and stored.proposer == "backend-a"

    for refused in (
        lambda: other.get_proposal(lineage),
        lambda: scoped.present_to(other, lineage, scoped.alice),
        lambda: other.cancel(lineage, version=1),
        lambda: other.propose("alice", scoped.spec(content={"n": 2}), lineage_id=lineage),
    ):
        with pytest.raises(NotFound) as caught:
            refused()
        assert caught.value.detail == NotFound().detail  # as for a missing id
    with pytest.raises(NotFound):
        other.get_proposal("prop_" + "0" * 32)

    after = scoped.host.wiring.store.get(Proposal, lineage)
    assert after is not None and after.version == stored.version  # nothing was appended
    assert owner.get_proposal(lineage).proposal_id == lineage
    assert scoped.admin.get_proposal(lineage).proposal_id == lineage
    assert scoped.channel(scoped.alice).get_proposal(lineage).proposal_id == lineage
    with pytest.raises(NotFound):
        scoped.channel(scoped.bob).get_proposal(lineage)
    revised = owner.propose("alice", scoped.spec(content={"n": 2}), lineage_id=lineage)
    assert revised.version == 2
    assert scoped.present_to(owner, lineage, scoped.alice, version=2).token
    assert scoped.admin.cancel(lineage, version=2).versions[-1].status == "canceled"


def test_another_proposer_cannot_lock_the_owner_out_with_presentations(scoped: Scoped) -> None:
    owner, other = scoped.proposer("backend-a"), scoped.proposer("backend-b")
    lineage = owner.propose("alice", scoped.spec()).proposal_id

    refused = 0
    for _ in range(MAX_ACTIVE + 5):
        try:
            scoped.present_to(other, lineage, scoped.alice)
        except NotFound:
            refused += 1
    assert refused == MAX_ACTIVE + 5

    shown = scoped.present_to(owner, lineage, scoped.alice)
    assert scoped.channel(scoped.alice).approve(shown.token).attempt_id


def test_presentations_to_another_actors_bindings_are_refused_before_counting(
    scoped: Scoped,
) -> None:
    owner = scoped.proposer("backend-a")
    lineage = owner.propose("alice", scoped.spec()).proposal_id
    alice, bob = scoped.alice, scoped.bob
    other_conversation = Provenance(
        alice.actor_id, alice.identity_binding_id, alice.channel_binding_id, "conv-elsewhere"
    )
    cases = [
        (bob, NOT_THE_ACTORS),  # bob's identity binding
        (Provenance("alice", "ib-nobody", alice.channel_binding_id, "conv-alice"), NOT_THE_ACTORS),
        (other_conversation, NOT_THE_CONVERSATIONS),
    ]
    for _ in range(MAX_ACTIVE):
        for who, detail in cases:
            with pytest.raises(InvalidInput) as caught:
                scoped.present_to(owner, lineage, who)
            assert caught.value.detail == detail

    proposal = scoped.host.wiring.store.get(Proposal, lineage)
    assert proposal is not None and proposal.presentations == {}
    tokens = [scoped.present_to(owner, lineage, alice).token for _ in range(MAX_ACTIVE)]
    with pytest.raises(TooManyPresentations):  # the bound still holds for the owner's own
        scoped.present_to(owner, lineage, alice)
    assert scoped.channel(alice).approve(tokens[0]).attempt_id


def test_a_binding_on_another_channel_than_the_identity_is_refused(scoped: Scoped) -> None:
    scoped.host.put_channel_binding("cb-alice-sms", conversation_key="conv-alice", channel="sms")
    owner = scoped.proposer("backend-a")
    lineage = owner.propose("alice", scoped.spec()).proposal_id
    who = Provenance("alice", scoped.alice.identity_binding_id, "cb-alice-sms", "conv-alice")
    with pytest.raises(InvalidInput) as caught:
        scoped.present_to(owner, lineage, who)
    assert caught.value.detail == NOT_THE_CONVERSATIONS


def test_idempotency_keys_are_namespaced_per_caller(scoped: Scoped) -> None:
    first, second = scoped.proposer("backend-a"), scoped.proposer("backend-b")
    mine = first.propose("alice", scoped.spec(), idempotency_key="retry-1")
    # the same key, another caller, another body: its own request, not a refusal
    theirs = second.propose("alice", scoped.spec(content={"n": 2}), idempotency_key="retry-1")
    assert theirs.proposal_id != mine.proposal_id
    # the same key and body as the first caller's: still its own proposal
    same_body = scoped.proposer("backend-c").propose(
        "alice", scoped.spec(), idempotency_key="retry-1"
    )
    assert same_body.proposal_id not in (mine.proposal_id, theirs.proposal_id)
    # each caller's retry gets its own first answer
    assert first.propose("alice", scoped.spec(), idempotency_key="retry-1") == mine
    again = second.propose("alice", scoped.spec(content={"n": 2}), idempotency_key="retry-1")
    assert again == theirs
    with pytest.raises(IdempotencyKeyRefused):  # the same caller, another request: as ever
        first.propose("alice", scoped.spec(content={"n": 3}), idempotency_key="retry-1")
    # presentations and cancels too
    shown = first.present(
        mine.proposal_id,
        version=1,
        identity_binding_id=scoped.alice.identity_binding_id,
        channel_binding_id=scoped.alice.channel_binding_id,
        conversation_key=scoped.alice.conversation_key,
        idempotency_key="show-1",
    )
    other_shown = second.present(
        theirs.proposal_id,
        version=1,
        identity_binding_id=scoped.alice.identity_binding_id,
        channel_binding_id=scoped.alice.channel_binding_id,
        conversation_key=scoped.alice.conversation_key,
        idempotency_key="show-1",
    )
    assert other_shown.presentation_id != shown.presentation_id


def test_an_idempotency_key_read_after_its_expiry_is_absent(scoped: Scoped) -> None:
    caller = scoped.proposer("backend-a")
    first = caller.propose("alice", scoped.spec(), idempotency_key="daily")
    assert caller.propose("alice", scoped.spec(), idempotency_key="daily") == first
    scoped.host.advance(KEEP.total_seconds() - 1)
    with pytest.raises(IdempotencyKeyRefused):  # kept at least 24 hours
        caller.propose("alice", scoped.spec(content={"n": 2}), idempotency_key="daily")
    scoped.host.advance(1)
    later = caller.propose("alice", scoped.spec(content={"n": 2}), idempotency_key="daily")
    assert later.proposal_id != first.proposal_id
    assert caller.propose("alice", scoped.spec(content={"n": 2}), idempotency_key="daily") == later
