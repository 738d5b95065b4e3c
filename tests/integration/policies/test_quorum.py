"""Quorum (I13): M distinct members of a group approve, each through their own
presentation; the M-th vote claims in one commit that checks every counted
voter. On memory, SQLite and the emulator."""

from __future__ import annotations

import pytest

from adapters.store import LedgerStore
from domain.attempt import ExecutionAttempt
from domain.directory import DirectoryKind, actor_record_id, target_record_id
from domain.errors import (
    ApprovalUnavailable,
    InvalidInput,
    InvalidPolicySet,
    ProposalConflicted,
)
from domain.notifications import proposal_notifications
from domain.policy import compile_policies
from domain.proposal import Proposal, ProposalStatus
from domain.quorum import MAX_QUORUM
from domain.services.approval import approve
from domain.services.authorization import AuthorizationFailed
from domain.services.decisions import decline
from domain.services.directory import put_record
from domain.services.proposals import propose
from domain.services.recheck import recheck
from tests.support.policies import (
    TWO_PERSON,
    apply,
    enrol_members,
    member,
    present_to,
    quorum_policy,
)
from tests.support.worlds.approval import World, base_spec


def proposed(world: World, digest: str | None, **content: object) -> str:
    spec = base_spec(policy_digest=digest, content={"title": "Pay the supplier", **content})
    result = propose(world.ctx, actor_id="alice", spec_data=spec)
    assert result.status == "presented"
    return result.proposal_id


def test_two_people_approve_a_payment_over_500(world: World, store: LedgerStore) -> None:
    view = apply(world, TWO_PERSON)
    m1, m2, _ = enrol_members(world, 3)
    proposal_id = proposed(world, view.digest, amount=900)
    # the requesting actor never counts for their own proposal
    own = world.present(proposal_id).token
    with pytest.raises(ApprovalUnavailable):
        approve(world.ctx, token=own, provenance=world.who)
    first = present_to(world, proposal_id, m1)
    vote = approve(world.ctx, token=first, provenance=m1)
    assert (vote.status, vote.votes, vote.required, vote.attempt_id) == (
        "vote_recorded",
        1,
        2,
        None,
    )
    # a replay, and the same member through a second presentation: still one vote
    assert approve(world.ctx, token=first, provenance=m1).votes == 1
    again = approve(world.ctx, token=present_to(world, proposal_id, m1), provenance=m1)
    assert (again.status, again.votes) == ("vote_recorded", 1)
    # another member's token is theirs alone
    second = present_to(world, proposal_id, m2)
    with pytest.raises(ApprovalUnavailable):
        approve(world.ctx, token=second, provenance=m1)
    done = approve(world.ctx, token=second, provenance=m2)
    assert done.status == "execution_pending" and done.attempt_id
    attempt = store.get(ExecutionAttempt, done.attempt_id)
    assert attempt is not None and attempt.approval is not None
    assert attempt.approval["kind"] == "quorum"
    assert attempt.approval["approvers"] == ["m1", "m2"]
    assert (attempt.approval["group"], attempt.approval["required"]) == ("finance", 2)
    # the claim's answer converges for everyone after it
    assert approve(world.ctx, token=first, provenance=m1).attempt_id == done.attempt_id
    stored = store.get(Proposal, proposal_id)
    assert stored is not None and stored.version_status(1) is ProposalStatus.CLAIMED
    assert [v["actor_id"] for v in stored.votes(1)] == ["m1"]
    # the webhooks: one proposal.vote_recorded per recorded vote, then the approval
    told = proposal_notifications(stored, world.clock.now())
    assert [n.type.value for n in told] == ["proposal.vote_recorded", "proposal.approved"]
    assert len({n.id for n in told}) == 2
    assert world.executor_calls() == 0


def test_a_small_payment_is_one_approval_and_no_member_can_take_it(world: World) -> None:
    view = apply(world, TWO_PERSON)
    enrol_members(world, 1)
    proposal_id = proposed(world, view.digest, amount=20)
    with pytest.raises(InvalidInput, match="quorum"):
        present_to(world, proposal_id, member(1))
    token = world.present(proposal_id).token
    assert approve(world.ctx, token=token, provenance=world.who).status == "execution_pending"


def test_a_voter_disabled_before_the_last_vote_is_not_counted(
    world: World, store: LedgerStore
) -> None:
    view = apply(world, quorum_policy(3))
    members = enrol_members(world, 4)
    proposal_id = proposed(world, view.digest)
    tokens = [present_to(world, proposal_id, m) for m in members]
    assert approve(world.ctx, token=tokens[0], provenance=members[0]).votes == 1
    assert approve(world.ctx, token=tokens[1], provenance=members[1]).votes == 2
    world.put(DirectoryKind.ACTOR, actor_record_id("m1"), enabled=False, groups=["finance"])
    third = approve(world.ctx, token=tokens[2], provenance=members[2])
    assert (third.status, third.votes) == ("vote_recorded", 2)  # m1 no longer counts
    done = approve(world.ctx, token=tokens[3], provenance=members[3])
    assert done.status == "execution_pending" and done.attempt_id
    attempt = store.get(ExecutionAttempt, done.attempt_id)
    assert attempt is not None and attempt.approval is not None
    assert attempt.approval["approvers"] == ["m2", "m3", "m4"]
    # a counted voter disabled after the claim fails the recheck before dispatch
    world.put(DirectoryKind.ACTOR, actor_record_id("m3"), enabled=False, groups=["finance"])
    with pytest.raises(AuthorizationFailed, match="voter_disabled"):
        recheck(world.ctx, attempt, world.clock.now(), fresh=True)


def test_a_voter_disabled_after_voting_is_refused_when_voting_again(world: World) -> None:
    """Their earlier vote no longer counts, so a second press is not 'recorded'."""
    view = apply(world, quorum_policy(2))
    m1, _ = enrol_members(world, 2)
    proposal_id = proposed(world, view.digest)
    assert approve(world.ctx, token=present_to(world, proposal_id, m1), provenance=m1).votes == 1
    put_record(  # an admin of this process: its read cache sees the change at once
        world.store,
        world.clock,
        kind=DirectoryKind.ACTOR,
        record_id=actor_record_id("m1"),
        values={"enabled": False, "groups": ["finance"]},
        cache=world.ctx.cache,
    )
    with pytest.raises(ApprovalUnavailable):
        approve(world.ctx, token=present_to(world, proposal_id, m1), provenance=m1)


def test_recorded_votes_reaching_a_lowered_quorum_claim_on_a_repeat(
    world: World, store: LedgerStore
) -> None:
    """Two of three voted, then the set asks two: a voter's second press, through
    a new presentation, claims with the recorded votes (each counted once); a
    replay of a consumed one is refused."""
    view = apply(world, quorum_policy(3))
    m1, m2, _ = enrol_members(world, 3)
    proposal_id = proposed(world, view.digest)
    first = present_to(world, proposal_id, m1)
    assert approve(world.ctx, token=first, provenance=m1).votes == 1
    assert approve(world.ctx, token=present_to(world, proposal_id, m2), provenance=m2).votes == 2
    repeat = present_to(world, proposal_id, m1)
    assert approve(world.ctx, token=repeat, provenance=m1).votes == 2  # m1 again: not twice
    apply(world, quorum_policy(2))
    with pytest.raises(ApprovalUnavailable):  # m1's consumed presentation, replayed
        approve(world.ctx, token=first, provenance=m1)
    again = present_to(world, proposal_id, m2)
    done = approve(world.ctx, token=again, provenance=m2)
    assert (done.status, done.votes, done.required) == ("execution_pending", 2, 2)
    assert done.attempt_id
    attempt = store.get(ExecutionAttempt, done.attempt_id)
    assert attempt is not None and attempt.approval is not None
    assert attempt.approval["approvers"] == ["m1", "m2"]
    stored = store.get(Proposal, proposal_id)
    assert stored is not None
    assert stored.versions[1]["status"] == ProposalStatus.CLAIMED.value
    recheck(world.ctx, attempt, world.clock.now(), fresh=True)


def test_a_vote_replayed_after_the_version_conflicted_is_refused(world: World) -> None:
    view = apply(world, quorum_policy(2))
    m1, m2 = enrol_members(world, 2)
    proposal_id = proposed(world, view.digest)
    first = present_to(world, proposal_id, m1)
    assert approve(world.ctx, token=first, provenance=m1).votes == 1
    world.put(DirectoryKind.TARGET, target_record_id("task:42"), revision="r8")
    with pytest.raises(ProposalConflicted):
        approve(world.ctx, token=present_to(world, proposal_id, m2), provenance=m2)
    with pytest.raises(ApprovalUnavailable):  # not an error about the conflicted version
        approve(world.ctx, token=first, provenance=m1)


def test_a_members_decline_declines_and_a_non_member_cannot_vote(world: World) -> None:
    view = apply(world, quorum_policy(2))
    members = enrol_members(world, 2)
    world.put(DirectoryKind.ACTOR, actor_record_id("m2"), enabled=True, groups=["sales"])
    proposal_id = proposed(world, view.digest)
    with pytest.raises(ApprovalUnavailable):  # m2 is not in the group
        approve(world.ctx, token=present_to(world, proposal_id, members[1]), provenance=members[1])
    token = present_to(world, proposal_id, members[0])
    assert decline(world.ctx, token=token, provenance=members[0]).status == "declined"


def test_the_largest_quorum_is_what_one_transaction_can_check() -> None:
    assert MAX_QUORUM == 30
    compile_policies(quorum_policy(MAX_QUORUM))
    for bad in (
        quorum_policy(MAX_QUORUM + 1),
        quorum_policy(0),
        '@id("q") @quorum("2") permit (principal, action, resource);',
        '@id("q") @quorum("2") @group("g") forbid (principal, action, resource);',
        '@id("q") @quorum("2") @group("g") @auto_approve permit (principal, action, resource);',
    ):
        with pytest.raises(InvalidPolicySet):
            compile_policies(bad)
