"""A decline races approvals of sibling presentations: exactly one of them wins.

25 threads press approve or decline through three sibling presentations of one
proposal version at once; every round ends with exactly one decision on the
stream (one ``Claimed`` with its one queued attempt, or one ``Declined`` and
no attempt), and every answer agrees with it: approvals that lost to a decline
get the uniform 404, declines that lost to an approval get the stored claim.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from adapters.store import LedgerStore
from domain.errors import ApprovalUnavailable, LedgerError
from domain.services.approval import ApprovalResult, approve
from domain.services.decisions import DeclineResult, decline
from tests.support.worlds.approval import World, check_approval_invariants

THREADS = 25
SKEWS = (0.0, 0.005, 0.02, 0.1, 0.3)

Answer = ApprovalResult | DeclineResult | LedgerError


def rounds_for(backend: str) -> int:
    return 20 if backend == "dynamodb" else 10


def race_once(world: World, skew: float) -> tuple[str, list[tuple[str, Answer]]]:
    """One round; declines start ``skew`` seconds after the approvals (a decline
    commits after one read, an approval after the directory reads, so without a
    skew the decline nearly always wins and the other outcome goes untested)."""
    proposal_id = world.propose()
    presentations = [world.present(proposal_id) for _ in range(3)]
    barrier = threading.Barrier(THREADS)

    def press(i: int) -> tuple[str, Answer]:
        token = presentations[i % len(presentations)].token
        kind = "decline" if i % 2 else "approve"
        barrier.wait()
        if kind == "decline" and skew:
            time.sleep(skew)
        try:
            if kind == "decline":
                return kind, decline(world.ctx, token=token, provenance=world.who)
            return kind, approve(world.ctx, token=token, provenance=world.who)
        except LedgerError as exc:
            return kind, exc

    with ThreadPoolExecutor(THREADS) as pool:
        return proposal_id, list(pool.map(press, range(THREADS)))


def test_a_decline_and_an_approval_of_siblings_never_both_win(
    world: World, store: LedgerStore, request: pytest.FixtureRequest
) -> None:
    backend = request.node.callspec.params["store"]
    proposals = []
    winners: Counter[str] = Counter()
    for number in range(rounds_for(backend)):
        proposal_id, answers = race_once(world, SKEWS[number % len(SKEWS)])
        proposals.append(proposal_id)
        decisions = [
            e.topic.rsplit(".", 1)[-1]
            for e in store.read_stream(proposal_id)
            if e.topic.endswith((".Claimed", ".Declined"))
        ]
        assert len(decisions) == 1, decisions
        winner = decisions[0]
        winners[winner] += 1
        unexpected = [
            a
            for _, a in answers
            if isinstance(a, LedgerError) and not isinstance(a, ApprovalUnavailable)
        ]
        assert not unexpected, unexpected
        if winner == "Claimed":
            attempt_ids = {a.attempt_id for _, a in answers if isinstance(a, ApprovalResult)}
            assert len(attempt_ids) == 1
            for kind, a in answers:
                if kind == "decline":
                    assert isinstance(a, DeclineResult) and a.status == "claimed"
                    assert a.attempt_id in attempt_ids
        else:
            for kind, a in answers:
                if kind == "approve":
                    assert isinstance(a, ApprovalUnavailable)
                else:
                    assert isinstance(a, DeclineResult) and a.status == "declined"
    assert world.executor_calls() == 0
    check_approval_invariants(store, proposals, world.clock.now())
    print(f"\n{backend}: rounds={sum(winners.values())} winners={dict(winners)}")
