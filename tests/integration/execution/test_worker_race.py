"""Scenario 4: duplicate deliveries, two workers, an expired lease, a late result."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from adapters.store import LedgerStore
from domain.errors import IllegalTransition
from domain.ports import Commit
from domain.services.execution import Outcome, Worker
from domain.services.recovery import run_recovery
from tests.support.worlds.execution import LEASE, MODES, DuringCall, ExecutionWorld


def deliver(job: tuple[str, Worker, threading.Barrier]) -> Outcome:
    attempt_id, worker, barrier = job
    barrier.wait()
    return worker.process(attempt_id)


def rounds_for(store_param: str) -> int:
    return 20 if store_param == "dynamodb" else 10


@pytest.mark.slow
@pytest.mark.parametrize("mode", sorted(MODES))
def test_two_workers_racing_dispatch_once(
    xworld: ExecutionWorld, mode: str, request: pytest.FixtureRequest
) -> None:
    rounds = rounds_for(request.node.callspec.params["store"])
    for _ in range(rounds):
        attempt_id = xworld.approved(mode)
        workers = [xworld.worker(), xworld.worker()]
        barrier = threading.Barrier(4)

        with ThreadPoolExecutor(4) as pool:
            outcomes = list(
                pool.map(deliver, [(attempt_id, workers[i % 2], barrier) for i in range(4)])
            )
        assert outcomes.count(Outcome.SUCCEEDED) == 1, outcomes
        assert xworld.topics(attempt_id).count("DispatchStarted") == 1
        assert xworld.calls_for(attempt_id) == 1
        assert xworld.attempt(attempt_id).status == "succeeded"
    assert xworld.effects.max_effects_per_key() == 1


def test_late_result_of_expired_lease_never_overwrites(xworld: ExecutionWorld) -> None:
    """Worker A's call outlives its lease; recovery re-leases and finishes with the
    same key; A's late result is only observed."""
    attempt_id = xworld.approved("provider_idempotency")
    rescuer = xworld.worker()
    rescued: list[object] = []

    def lease_expires_and_recovery_runs() -> None:
        # run recovery on a separate thread so it does not share A's call stack state
        xworld.clock.advance(LEASE + 1)
        with ThreadPoolExecutor(1) as pool:
            rescued.append(pool.submit(run_recovery, rescuer).result())

    xworld.swap_executor(
        MODES["provider_idempotency"],
        lambda inner: DuringCall(inner, lease_expires_and_recovery_runs),
    )
    outcome = xworld.worker().process(attempt_id)
    assert outcome is Outcome.STALE
    attempt = xworld.attempt(attempt_id)
    assert attempt.status == "succeeded"
    assert attempt.lease_generation == 2
    assert attempt.result is not None and attempt.result["source"] == "executor"
    topics = xworld.topics(attempt_id)
    assert topics.count("ResultRecorded") == 1
    assert topics[-1] == "LateResultObserved"
    assert xworld.effects.effect_count(attempt.idempotency_key) == 1
    assert xworld.keys_called(attempt_id) == {attempt.idempotency_key}


def test_stale_generation_cannot_mark_dispatch(xworld: ExecutionWorld, store: LedgerStore) -> None:
    attempt_id = xworld.approved("provider_idempotency")
    a = xworld.attempt(attempt_id)
    generation = a.lease(owner="a", now=xworld.clock.now(), lease_seconds=LEASE)
    store.commit(Commit(aggregates=[a]))
    xworld.clock.advance(LEASE + 1)
    with pytest.raises(IllegalTransition):
        a.mark_dispatch(generation=generation, now=xworld.clock.now())
    # recovery returns the expired, undispatched lease to the queue and runs it
    report = run_recovery(xworld.worker())
    assert report.outcomes["succeeded"] == 1
    assert "Requeued" in xworld.topics(attempt_id)
