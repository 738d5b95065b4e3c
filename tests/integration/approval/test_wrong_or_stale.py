"""Scenario 3: wrong or stale approvals create no attempt and reveal nothing."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from domain.directory import (
    DirectoryKind,
    actor_record_id,
    channel_binding_record_id,
    executor_build_record_id,
    grant_record_id,
    identity_binding_record_id,
    target_record_id,
)
from domain.errors import ApprovalUnavailable, ProposalConflicted
from domain.proposal import PresentationStatus, Proposal, ProposalStatus
from domain.services.approval import Provenance, approve
from domain.services.proposals import propose
from tests.support.worlds.approval import (
    BUILD,
    CAPABILITY,
    World,
    base_spec,
    check_approval_invariants,
)


def unknown_token_failure(world: World) -> ApprovalUnavailable:
    with pytest.raises(ApprovalUnavailable) as caught:
        approve(world.ctx, token="x" * 43, provenance=world.who)
    return caught.value


def same_as_unknown(world: World, error: ApprovalUnavailable) -> None:
    reference = unknown_token_failure(world)
    assert (error.code, error.detail, str(error)) == (
        reference.code,
        reference.detail,
        str(reference),
    )


Setup = Callable[[World, str], Provenance | None]


def wrong_actor(w: World, pid: str) -> Provenance:
    return Provenance("bob", "ib-bob", "cb1", "conv-1")


def wrong_channel_binding(w: World, pid: str) -> Provenance:
    return Provenance("alice", "ib1", "cb2", "conv-2")


def wrong_conversation(w: World, pid: str) -> Provenance:
    return Provenance("alice", "ib1", "cb1", "conv-2")


def wrong_identity_binding(w: World, pid: str) -> Provenance:
    return Provenance("alice", "ib-bob", "cb1", "conv-1")


def disabled_actor(w: World, pid: str) -> None:
    w.put(DirectoryKind.ACTOR, actor_record_id("alice"), enabled=False)


def disabled_identity(w: World, pid: str) -> None:
    w.put(
        DirectoryKind.IDENTITY_BINDING,
        identity_binding_record_id("ib1"),
        actor_id="alice",
        channel="slack",
        external_id="U1",
        active=False,
    )


def identity_moved_to_other_actor(w: World, pid: str) -> None:
    w.put(
        DirectoryKind.IDENTITY_BINDING,
        identity_binding_record_id("ib1"),
        actor_id="bob",
        channel="slack",
        external_id="U1",
        active=True,
    )


def disabled_channel_binding(w: World, pid: str) -> None:
    w.put(
        DirectoryKind.CHANNEL_BINDING,
        channel_binding_record_id("cb1"),
        conversation_key="conv-1",
        channel="slack",
        active=False,
    )


def revoked_permission(w: World, pid: str) -> None:
    w.put(DirectoryKind.PERMISSION_GRANT, grant_record_id("alice", "tasks.write"), granted=False)


def withdrawn_executor_build(w: World, pid: str) -> None:
    w.put(
        DirectoryKind.EXECUTOR_BUILD,
        executor_build_record_id(CAPABILITY, BUILD),
        delivery_mode="provider_idempotency",
        available=False,
    )


def expired_token(w: World, pid: str) -> None:
    w.clock.advance(w.ctx.presentation_ttl_seconds + 1)


def expired_spec(w: World, pid: str) -> None:
    w.clock.advance(3 * 86400)


def superseded_proposal(w: World, pid: str) -> None:
    propose(w.ctx, actor_id="alice", spec_data=base_spec(content={"title": "v2"}), lineage_id=pid)


CASES: dict[str, Setup] = {
    "wrong_actor": wrong_actor,
    "wrong_channel_binding": wrong_channel_binding,
    "wrong_conversation": wrong_conversation,
    "wrong_identity_binding": wrong_identity_binding,
    "disabled_actor": disabled_actor,
    "disabled_identity": disabled_identity,
    "identity_moved_to_other_actor": identity_moved_to_other_actor,
    "disabled_channel_binding": disabled_channel_binding,
    "revoked_permission": revoked_permission,
    "withdrawn_executor_build": withdrawn_executor_build,
    "expired_token": expired_token,
    "expired_spec": expired_spec,
    "superseded_proposal": superseded_proposal,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_wrong_or_stale_approval_fails_closed(world: World, case: str) -> None:
    proposal_id = world.propose()
    presentation = world.present(proposal_id)
    who = CASES[case](world, proposal_id) or world.who
    with pytest.raises(ApprovalUnavailable) as caught:
        approve(world.ctx, token=presentation.token, provenance=who)
    same_as_unknown(world, caught.value)
    check_approval_invariants(world.store, [proposal_id], world.clock.now())
    proposal = world.store.get(Proposal, proposal_id)
    assert proposal is not None
    assert all(v["attempt_id"] is None for v in proposal.versions.values())
    assert world.executor_calls() == 0


def test_consumed_token_presented_by_another_caller_fails_closed(world: World) -> None:
    proposal_id = world.propose()
    presentation = world.present(proposal_id)
    approve(world.ctx, token=presentation.token, provenance=world.who)
    with pytest.raises(ApprovalUnavailable) as caught:
        approve(
            world.ctx,
            token=presentation.token,
            provenance=Provenance("bob", "ib-bob", "cb1", "conv-1"),
        )
    same_as_unknown(world, caught.value)
    check_approval_invariants(world.store, [proposal_id], world.clock.now())


def test_revoked_sibling_of_unclaimed_revision_fails_closed(world: World) -> None:
    proposal_id = world.propose()
    old = world.present(proposal_id)
    superseded_proposal(world, proposal_id)
    new = world.present(proposal_id, version=2)
    with pytest.raises(ApprovalUnavailable):
        approve(world.ctx, token=old.token, provenance=world.who)
    result = approve(world.ctx, token=new.token, provenance=world.who)
    assert result.attempt_revision == 1
    check_approval_invariants(world.store, [proposal_id], world.clock.now())


def test_target_drift_marks_conflicted_and_queues_nothing(world: World) -> None:
    proposal_id = world.propose()
    first = world.present(proposal_id)
    second = world.present(proposal_id)
    world.put(DirectoryKind.TARGET, target_record_id("task:42"), revision="r8")
    with pytest.raises(ProposalConflicted):
        approve(world.ctx, token=first.token, provenance=world.who)
    proposal = world.store.get(Proposal, proposal_id)
    assert proposal is not None
    assert proposal.version_status(1) is ProposalStatus.CONFLICTED
    assert {p["status"] for p in proposal.presentations.values()} == {
        PresentationStatus.REVOKED.value
    }
    with pytest.raises(ApprovalUnavailable):
        approve(world.ctx, token=second.token, provenance=world.who)
    check_approval_invariants(world.store, [proposal_id], world.clock.now())
    assert world.executor_calls() == 0


def test_unknown_token_fails_closed(world: World) -> None:
    error = unknown_token_failure(world)
    assert error.code == "approval_unavailable"
