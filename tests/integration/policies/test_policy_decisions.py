"""Policies in Cedar decide at propose, at approval and at the worker's recheck
(I15, design.md 2.7, 5.1-5.3), on memory, SQLite and the emulator."""

from __future__ import annotations

import pytest

from adapters.store import LedgerStore
from domain.attempt import AttemptStatus, ExecutionAttempt
from domain.directory import POLICY_SET_RECORD_ID, DirectoryKind, actor_record_id
from domain.errors import ApprovalUnavailable, PolicyDenied, PolicyDigestMismatch
from domain.proposal import Proposal, ProposalStatus
from domain.services.approval import approve
from domain.services.proposals import propose
from tests.support.policies import EXAMPLES, NO_DELETIONS, SMALL_TASKS, apply
from tests.support.worlds.approval import World, base_spec
from tests.support.worlds.execution import ExecutionWorld


def spec(world: World, **changes: object) -> dict[str, object]:
    return base_spec(policy_digest=apply(world).digest, **changes)


def test_a_forbid_refuses_the_proposal_naming_the_policy_and_stores_nothing(
    world: World, store: LedgerStore
) -> None:
    with pytest.raises(PolicyDenied) as denied:
        propose(world.ctx, actor_id="alice", spec_data=spec(world, effect="delete"))
    assert denied.value.policy_ids == ("no-deletions",)
    assert "no-deletions" in denied.value.detail
    (proposal_id,) = world.tokens.proposal_ids
    assert store.read_stream(proposal_id) == []


def test_an_auto_approve_permit_claims_in_the_commit_that_stores_the_proposal(
    world: World, store: LedgerStore
) -> None:
    view = apply(world)
    result = propose(world.ctx, actor_id="alice", spec_data=spec(world, content={"minutes": 20}))
    assert result.status == "claimed"
    assert result.approval == {
        "kind": "policy",
        "approvers": [],
        "policy_id": "small-tasks",
        "policy_set_version": view.version,
        "policy_digest": view.digest,
    }
    topics = [e.topic.rsplit(".", 1)[-1] for e in store.read_stream(result.proposal_id)]
    assert topics == ["Proposed", "Claimed"]
    attempt = store.get(ExecutionAttempt, result.attempt_id or "")
    assert attempt is not None and attempt.status is AttemptStatus.QUEUED
    assert attempt.approval == result.approval
    assert [POLICY_SET_RECORD_ID, view.version] in [list(p) for p in attempt.authorized or []]
    due = [d.attempt_id for d in store.due_work(world.clock.now(), 100).items]
    assert result.attempt_id in due
    assert world.executor_calls() == 0  # I6: claiming never calls an executor


def test_without_an_auto_approve_permit_a_person_decides_as_before(world: World) -> None:
    result = propose(world.ctx, actor_id="alice", spec_data=spec(world, content={"minutes": 90}))
    assert result.status == "presented" and result.attempt_id is None
    token = world.present(result.proposal_id).token
    approved = approve(world.ctx, token=token, provenance=world.who)
    attempt = world.store.get(ExecutionAttempt, approved.attempt_id)
    assert attempt is not None
    assert attempt.approval == {"kind": "human", "approvers": ["alice"]}


def test_an_evaluation_error_approves_nothing_by_itself(world: World) -> None:
    """A permit that errors (an attribute without ``has``) is no automatic approval."""
    text = SMALL_TASKS.replace("context.content has minutes && ", "")
    view = apply(world, text)
    result = propose(
        world.ctx,
        actor_id="alice",
        spec_data=base_spec(policy_digest=view.digest, content={"title": "no minutes"}),
    )
    assert result.status == "presented"


def test_the_policy_digest_must_be_the_configured_sets_and_is_free_without_one(
    world: World,
) -> None:
    propose(world.ctx, actor_id="alice", spec_data=base_spec())  # no set: any digest
    apply(world)
    with pytest.raises(PolicyDigestMismatch):
        propose(world.ctx, actor_id="alice", spec_data=base_spec())
    apply(world, "")  # an empty set is no set
    propose(world.ctx, actor_id="alice", spec_data=base_spec())


def test_a_policy_that_forbids_after_presentation_refuses_the_approval_uniformly(
    world: World, store: LedgerStore
) -> None:
    proposal_id = propose(world.ctx, actor_id="alice", spec_data=spec(world)).proposal_id
    token = world.present(proposal_id).token
    forbid_all = '@id("freeze") forbid (principal, action, resource);'
    apply(world, EXAMPLES + forbid_all)
    with pytest.raises(ApprovalUnavailable) as refused:
        approve(world.ctx, token=token, provenance=world.who)
    assert refused.value.reason == "policy_denied"
    proposal = store.get(Proposal, proposal_id)
    assert proposal is not None and proposal.version_status(1) is ProposalStatus.PRESENTED


def test_groups_of_the_actor_are_the_principals_parents(world: World) -> None:
    world.put(DirectoryKind.ACTOR, actor_record_id("alice"), enabled=True, groups=["interns"])
    text = (
        NO_DELETIONS + '@id("no-interns") forbid (principal in Group::"interns", action, resource);'
    )
    view = apply(world, text)
    with pytest.raises(PolicyDenied) as denied:
        propose(world.ctx, actor_id="alice", spec_data=base_spec(policy_digest=view.digest))
    assert denied.value.policy_ids == ("no-interns",)
    world.put(DirectoryKind.ACTOR, actor_record_id("alice"), enabled=True)
    propose(world.ctx, actor_id="alice", spec_data=base_spec(policy_digest=view.digest))


def test_a_revision_is_screened_and_can_be_approved_by_a_policy(world: World) -> None:
    first = propose(world.ctx, actor_id="alice", spec_data=spec(world, content={"minutes": 90}))
    with pytest.raises(PolicyDenied):
        propose(
            world.ctx,
            actor_id="alice",
            spec_data=spec(world, effect="delete"),
            lineage_id=first.proposal_id,
        )
    second = propose(
        world.ctx,
        actor_id="alice",
        spec_data=spec(world, content={"minutes": 5}),
        lineage_id=first.proposal_id,
        expected_version=1,
    )
    assert (second.version, second.status) == (2, "claimed")


# -- the worker's recheck --------------------------------------------------------


def test_a_policy_that_forbids_after_approval_fails_the_attempt_safe_before_dispatch(
    xworld: ExecutionWorld,
) -> None:
    view = apply(xworld)
    proposal_id = xworld.propose(policy_digest=view.digest, content={"minutes": 90})
    token = xworld.present(proposal_id).token
    attempt_id = approve(xworld.ctx, token=token, provenance=xworld.who).attempt_id
    apply(xworld, EXAMPLES + '@id("freeze") forbid (principal, action, resource);')
    xworld.worker().process(attempt_id)
    attempt = xworld.attempt(attempt_id)
    assert attempt.status is AttemptStatus.FAILED_SAFE
    assert (attempt.result or {})["reason_code"] == "policy_denied"
    assert xworld.calls_for(attempt_id) == 0


def test_an_automatic_approval_withdrawn_before_dispatch_fails_safe(
    xworld: ExecutionWorld,
) -> None:
    view = apply(xworld)
    result = propose(
        xworld.ctx,
        actor_id="alice",
        spec_data=base_spec(policy_digest=view.digest, content={"minutes": 10}),
    )
    apply(xworld, NO_DELETIONS)  # the permit is gone: no one approved it any more
    xworld.worker().process(result.attempt_id or "")
    attempt = xworld.attempt(result.attempt_id or "")
    assert attempt.status is AttemptStatus.FAILED_SAFE
    assert (attempt.result or {})["reason_code"] == "policy_approval_withdrawn"
    assert xworld.calls_for(attempt.id) == 0


def test_an_automatic_approval_runs_like_any_other(xworld: ExecutionWorld) -> None:
    view = apply(xworld)
    result = propose(
        xworld.ctx,
        actor_id="alice",
        spec_data=base_spec(
            policy_digest=view.digest, content={"minutes": 10, "simulate": "success"}
        ),
    )
    xworld.worker().process(result.attempt_id or "")
    assert xworld.attempt(result.attempt_id or "").status is AttemptStatus.SUCCEEDED
    assert xworld.calls_for(result.attempt_id or "") == 1
