"""I11: an attempt is never failed because of which worker saw it.

A worker leases only attempts whose exact build it hosts; any other worker
leaves them as they are (no event, the due-work entry untouched, nothing
counted against the pre-dispatch budget), on every store. Only the
directory's word (the build withdrawn) lets a worker without the build settle
an attempt, as the hosting worker's recheck would.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from domain.attempt import AttemptStatus
from domain.directory import DirectoryKind, executor_build_record_id
from domain.services.execution import CrashPoint, Outcome, SimulatedCrash, Worker, WorkerPolicy
from domain.services.recovery import run_recovery
from tests.support.worlds.builds import (
    allow_v2,
    approved_v2,
    registry_with,
    v2_digest,
    worker_hosting,
)
from tests.support.worlds.execution import LEASE, MODES, CrashAt, ExecutionWorld


def due_ids(world: ExecutionWorld) -> list[str]:
    page = world.store.due_work(world.clock.now() + timedelta(days=365), 1000)
    return [item.attempt_id for item in page.items]


def withdraw_v2(world: ExecutionWorld, mode: str) -> None:
    capability = MODES[mode]
    world.put(
        DirectoryKind.EXECUTOR_BUILD,
        executor_build_record_id(capability, v2_digest(capability)),
        delivery_mode=mode,
        available=False,
    )


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_worker_without_the_build_leaves_the_attempt_to_one_with_it(
    xworld: ExecutionWorld, mode: str
) -> None:
    allow_v2(xworld)
    attempt_id = approved_v2(xworld, mode)
    v1_only = worker_hosting(xworld, registry_with(xworld, v1=True), max_predispatch_leases=1)
    both = worker_hosting(xworld, registry_with(xworld, v1=True, v2=True), max_predispatch_leases=1)

    for _ in range(5):  # the feed and recovery alike, as often as they like
        assert v1_only.process(attempt_id) is Outcome.NOT_HOSTED
        assert run_recovery(v1_only).outcomes == {"not_hosted": 1}
    assert xworld.topics(attempt_id) == ["Queued"]  # nothing written: no lease, no backoff
    assert attempt_id in due_ids(xworld)  # still due now, for every worker
    assert xworld.attempt(attempt_id).predispatch_leases == 0

    assert both.process(attempt_id) is Outcome.SUCCEEDED  # a budget of one lease: enough
    assert xworld.effects.effect_count(xworld.attempt(attempt_id).idempotency_key) == 1


def test_unservable_attempts_at_the_head_of_the_index_starve_nothing(
    xworld: ExecutionWorld,
) -> None:
    allow_v2(xworld)
    waiting = [approved_v2(xworld, "provider_idempotency") for _ in range(3)]
    xworld.clock.advance(1)  # the servable one is due after them: the index's last entry
    servable = xworld.approved("provider_idempotency")
    v1_only = worker_hosting(xworld, registry_with(xworld, v1=True))

    report = run_recovery(v1_only, page_size=2, max_items=1)

    assert report.outcomes == {"not_hosted": 3, "succeeded": 1}
    assert xworld.attempt(servable).status is AttemptStatus.SUCCEEDED
    assert all(xworld.attempt(a).status is AttemptStatus.QUEUED for a in waiting)
    bounded = run_recovery(v1_only, max_not_hosted=2)
    assert bounded.outcomes == {"not_hosted": 2}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_only_a_withdrawn_build_lets_a_worker_without_it_fail_the_attempt(
    xworld: ExecutionWorld, mode: str
) -> None:
    allow_v2(xworld)
    attempt_id = approved_v2(xworld, mode)
    v1_only = worker_hosting(xworld, registry_with(xworld, v1=True))
    withdraw_v2(xworld, mode)

    assert v1_only.process(attempt_id) is Outcome.FAILED_SAFE

    attempt = xworld.attempt(attempt_id)
    assert attempt.result == {
        "kind": "failed_safe",
        "source": "worker",
        "reason_code": "executor_build_unavailable",
    }
    assert xworld.effects.call_count() == 0
    assert attempt_id not in due_ids(xworld)


def test_an_expired_lease_is_returned_by_any_worker_and_run_by_a_hosting_one(
    xworld: ExecutionWorld,
) -> None:
    allow_v2(xworld)
    attempt_id = approved_v2(xworld, "provider_idempotency")
    hosting = registry_with(xworld, v1=True, v2=True)
    crashing = Worker(
        worker_hosting(xworld, hosting).ctx,
        WorkerPolicy(lease_seconds=LEASE),
        crash_hook=CrashAt(CrashPoint.AFTER_LEASE),
    )
    with pytest.raises(SimulatedCrash):
        crashing.process(attempt_id)
    xworld.clock.advance(LEASE + 1)
    v1_only = worker_hosting(xworld, registry_with(xworld, v1=True))

    assert run_recovery(v1_only).outcomes == {"not_hosted": 1}
    assert xworld.topics(attempt_id) == ["Queued", "Leased", "Requeued"]
    assert worker_hosting(xworld, hosting).process(attempt_id) is Outcome.SUCCEEDED


@pytest.mark.parametrize("mode", ["provider_idempotency", "correlation_lookup"])
def test_after_a_dispatch_only_a_hosting_worker_retries_or_looks_up(
    xworld: ExecutionWorld, mode: str
) -> None:
    allow_v2(xworld)
    attempt_id = approved_v2(xworld, mode)
    hosting = registry_with(xworld, v1=True, v2=True)
    crashing = Worker(
        worker_hosting(xworld, hosting).ctx,
        WorkerPolicy(lease_seconds=LEASE),
        crash_hook=CrashAt(CrashPoint.AFTER_DISPATCH_MARKER),
    )
    with pytest.raises(SimulatedCrash):
        crashing.process(attempt_id)
    xworld.clock.advance(LEASE + 1)
    written = xworld.topics(attempt_id)
    v1_only = worker_hosting(xworld, registry_with(xworld, v1=True))

    assert run_recovery(v1_only).outcomes == {"not_hosted": 1}
    assert xworld.topics(attempt_id) == written
    assert xworld.effects.lookups == [] and xworld.effects.call_count() == 0

    # past the build's settle window (a lookup build has one by default: design.md 11.4)
    xworld.clock.advance(3600)
    run_recovery(worker_hosting(xworld, hosting))
    status = xworld.attempt(attempt_id).status
    # provider_idempotency: the retry with the same key; correlation_lookup: the
    # lookup finds nothing (the call never went out) once the window has passed
    assert status in (AttemptStatus.SUCCEEDED, AttemptStatus.FAILED_SAFE)
    if mode == "provider_idempotency":
        assert status is AttemptStatus.SUCCEEDED
        assert xworld.effects.effect_count(xworld.attempt(attempt_id).idempotency_key) == 1


def test_a_withdrawn_build_after_a_dispatch_goes_to_a_human(xworld: ExecutionWorld) -> None:
    allow_v2(xworld)
    attempt_id = approved_v2(xworld, "provider_idempotency")
    crashing = Worker(
        worker_hosting(xworld, registry_with(xworld, v1=True, v2=True)).ctx,
        WorkerPolicy(lease_seconds=LEASE),
        crash_hook=CrashAt(CrashPoint.AFTER_DISPATCH_MARKER),
    )
    with pytest.raises(SimulatedCrash):
        crashing.process(attempt_id)
    withdraw_v2(xworld, "provider_idempotency")
    xworld.clock.advance(LEASE + 1)

    outcome = run_recovery(worker_hosting(xworld, registry_with(xworld, v1=True)))

    assert outcome.outcomes == {"outcome_unknown": 1}
    result = xworld.attempt(attempt_id).result
    assert result is not None and result["reason_code"] == "executor_build_unavailable"


@pytest.mark.parametrize("round_number", range(2))
def test_many_workers_some_without_the_build_settle_everything_once(
    xworld: ExecutionWorld, round_number: int
) -> None:
    """Six worker threads, four of which host v1 only, run the feed and recovery
    over attempts of both builds at once: every attempt succeeds, one effect per
    key, none failed for where it ran."""
    allow_v2(xworld)
    count = 6
    attempts = [approved_v2(xworld, "provider_idempotency") for _ in range(count)]
    attempts += [xworld.approved("provider_idempotency") for _ in range(count)]
    workers = [worker_hosting(xworld, registry_with(xworld, v1=True)) for _ in range(4)]
    workers += [worker_hosting(xworld, registry_with(xworld, v1=True, v2=True)) for _ in range(2)]
    errors: list[BaseException] = []
    start = threading.Barrier(len(workers))

    def run(worker: Worker, offset: int) -> None:
        try:
            start.wait()
            for n in range(len(attempts)):
                worker.process(attempts[(n + offset) % len(attempts)])
            run_recovery(worker)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w, 3 * i)) for i, w in enumerate(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    run_recovery(workers[-1])  # whatever a lost race left queued

    for attempt_id in attempts:
        attempt = xworld.attempt(attempt_id)
        assert attempt.status is AttemptStatus.SUCCEEDED, attempt.result
        assert xworld.effects.effect_count(attempt.idempotency_key) == 1
    assert xworld.effects.max_effects_per_key() == 1
