"""I13 under concurrency: 25 members voting at once on a proposal that needs 3
give exactly one claim, exactly 3 counted distinct votes and no attempt before
the third, on memory, SQLite and the emulator, round after round; a member
voting through two presentations at once still counts once."""

from __future__ import annotations

import dataclasses
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from adapters.store import LedgerStore
from domain.attempt import ExecutionAttempt
from domain.errors import ApprovalUnavailable
from domain.proposal import Proposal, ProposalStatus
from domain.services.approval import ApprovalResult, Provenance, approve
from domain.services.proposals import propose
from domain.spec import derive_attempt_id
from tests.support.policies import apply, enrol_members, present_to, quorum_policy
from tests.support.worlds.approval import World, base_spec

MEMBERS = 25
REQUIRED = 3


def rounds_for(backend: str) -> int:
    return 2 if backend == "dynamodb" else 5


def race_once(
    world: World, digest: str | None, voters: list[Provenance]
) -> tuple[str, list[ApprovalResult | ApprovalUnavailable]]:
    proposal_id = propose(
        world.ctx, actor_id="alice", spec_data=base_spec(policy_digest=digest)
    ).proposal_id
    tokens = [(who, present_to(world, proposal_id, who)) for who in voters]
    barrier = threading.Barrier(len(tokens))

    def press(entry: tuple[Provenance, str]) -> ApprovalResult | ApprovalUnavailable:
        who, token = entry
        barrier.wait()
        try:
            return approve(world.ctx, token=token, provenance=who)
        except ApprovalUnavailable as refused:  # contention: the vote was not recorded
            return refused

    with ThreadPoolExecutor(len(tokens)) as pool:
        return proposal_id, list(pool.map(press, tokens))


@pytest.mark.slow
def test_25_members_voting_at_once_make_exactly_one_claim_of_3_votes(
    world: World, store: LedgerStore, request: pytest.FixtureRequest
) -> None:
    # each member has their own live presentation: more than the default 20 at once
    world.ctx = dataclasses.replace(world.ctx, max_active_presentations=MEMBERS + 1)
    view = apply(world, quorum_policy(REQUIRED))
    members = enrol_members(world, MEMBERS)
    # the last member votes through two presentations at once: never twice
    voters = [*members, members[-1]]
    for _ in range(rounds_for(request.node.callspec.params["store"])):
        proposal_id, answers = race_once(world, view.digest, voters)
        done = [a for a in answers if isinstance(a, ApprovalResult)]
        pending = {a.attempt_id for a in done if a.status == "execution_pending"}
        assert len(pending) == 1, answers  # exactly one claim, every later vote converges
        (attempt_id,) = pending
        recorded = sorted(a.votes or 0 for a in done if a.status == "vote_recorded")
        assert all(0 < n < REQUIRED for n in recorded)
        proposal = store.get(Proposal, proposal_id)
        assert proposal is not None and proposal.version_status(1) is ProposalStatus.CLAIMED
        attempt = store.get(ExecutionAttempt, str(attempt_id))
        assert attempt is not None and attempt.approval is not None
        approvers = attempt.approval["approvers"]
        assert len(approvers) == len(set(approvers)) == REQUIRED
        assert "alice" not in approvers
        # the votes before the claim: exactly M - 1 distinct, none after it
        assert [v["actor_id"] for v in proposal.votes(1)] == approvers[:-1]
        stream = store.read_stream(attempt.id)
        assert [e.topic.rsplit(".", 1)[-1] for e in stream] == ["Queued"]
        assert derive_attempt_id(proposal_id, 1, proposal.versions[1]["payload_hash"]) == attempt.id
    assert world.executor_calls() == 0
