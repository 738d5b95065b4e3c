"""Scenario 2: 25 simultaneous approvals plus duplicate retries -> one commit."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from adapters.store import LedgerStore
from domain.attempt import ExecutionAttempt
from domain.errors import LedgerError
from domain.proposal import PresentationStatus, Proposal
from domain.services.approval import ApprovalResult, approve
from tests.support.worlds.approval import World, check_approval_invariants

THREADS = 25


def rounds_for(backend: str) -> int:
    return 20 if backend == "dynamodb" else 10


def race_once(world: World) -> tuple[str, list[ApprovalResult | LedgerError]]:
    proposal_id = world.propose()
    presentations = [world.present(proposal_id) for _ in range(3)]
    barrier = threading.Barrier(THREADS)

    def press(i: int) -> ApprovalResult | LedgerError:
        token = presentations[i % len(presentations)].token
        barrier.wait()
        try:
            return approve(world.ctx, token=token, provenance=world.who)
        except LedgerError as exc:  # pragma: no cover - asserted below
            return exc

    with ThreadPoolExecutor(THREADS) as pool:
        answers = list(pool.map(press, range(THREADS)))
    # duplicate retries after the race, through every presentation
    for presentation in presentations:
        answers.append(approve(world.ctx, token=presentation.token, provenance=world.who))
    return proposal_id, answers


@pytest.mark.slow
def test_concurrent_approvals_make_one_attempt(
    world: World, store: LedgerStore, request: pytest.FixtureRequest
) -> None:
    backend = request.node.callspec.params["store"]
    rounds = rounds_for(backend)
    proposals = []
    for _ in range(rounds):
        proposal_id, answers = race_once(world)
        proposals.append(proposal_id)
        errors = [a for a in answers if isinstance(a, LedgerError)]
        assert not errors, errors
        attempt_ids = {a.attempt_id for a in answers if isinstance(a, ApprovalResult)}
        assert len(attempt_ids) == 1
        (attempt_id,) = attempt_ids
        assert all(a.status == "execution_pending" for a in answers)  # type: ignore[union-attr]

        events = store.read_stream(attempt_id)
        assert [e.originator_version for e in events] == [1]
        assert events[0].topic.endswith("ExecutionAttempt.Queued")

        due = [
            d for d in store.due_work(world.clock.now(), 1000).items if d.attempt_id == attempt_id
        ]
        assert len(due) == 1

        proposal = store.get(Proposal, proposal_id)
        assert proposal is not None
        statuses = sorted(p["status"] for p in proposal.presentations.values())
        assert (
            statuses == [PresentationStatus.CONSUMED.value] + [PresentationStatus.REVOKED.value] * 2
        )
        claimed = [e for e in store.read_stream(proposal_id) if e.topic.endswith(".Claimed")]
        assert len(claimed) == 1
        attempt = store.get(ExecutionAttempt, attempt_id)
        assert attempt is not None and attempt.status == "queued"
    assert world.executor_calls() == 0
    check_approval_invariants(store, proposals, world.clock.now())
