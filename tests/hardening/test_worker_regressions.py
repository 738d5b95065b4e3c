"""Regressions found by the chaos simulation (tests/chaos), pinned as plain scenarios."""

from __future__ import annotations

from typing import Any

from domain.attempt import ExecutionAttempt
from domain.ports import Commit, DueWork, ExecutionReceipt, ExecutionRequest
from domain.services.execution import Outcome
from domain.services.recovery import run_recovery
from tests.support.worlds.execution import LEASE, MODES, ExecutionWorld


class FirstCallLosesItsResponse:
    """Generation 1's call applies the effect, but its answer never comes back.

    On the next call (generation 2), ``during_second`` runs after the provider
    answered and before the worker records.
    """

    def __init__(self, inner: Any, during_second: Any) -> None:
        self.inner = inner
        self.capability = inner.capability
        self.build_digest = inner.build_digest
        self.delivery_mode = inner.delivery_mode
        self.during_second = during_second
        self.calls = 0

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        self.calls += 1
        receipt: ExecutionReceipt = self.inner.execute(request)
        if self.calls == 1:
            raise TimeoutError("the response was lost")
        self.during_second()
        return receipt


def test_a_late_observation_cannot_make_the_lease_holder_lose_its_result(
    xworld: ExecutionWorld,
) -> None:
    """Chaos seed 5887: generation 1 reports late (it is observed, never authoritative)
    while generation 2 holds the lease and is in its call. Generation 2's result
    commit then lost the race to that observation and was dropped: the attempt
    stayed executing and needed another dispatch. The holder must re-read and record."""
    attempt_id = xworld.approved("provider_idempotency")

    def generation_one_reports_late() -> None:
        stale = xworld.attempt(attempt_id)
        stale.observe_late_result(generation=1, kind="succeeded", now=xworld.clock.now())
        xworld.store.commit(
            Commit(aggregates=[stale], due=[DueWork(stale.id, stale.next_action_at())])
        )

    xworld.swap_executor(
        MODES["provider_idempotency"],
        lambda inner: FirstCallLosesItsResponse(inner, generation_one_reports_late),
    )
    assert xworld.worker().process(attempt_id) is Outcome.PENDING
    xworld.clock.advance(LEASE + 1)
    report = run_recovery(xworld.worker())

    assert report.outcomes == {"succeeded": 1}
    attempt: ExecutionAttempt = xworld.attempt(attempt_id)
    assert attempt.status == "succeeded"
    assert attempt.lease_generation == 2
    assert xworld.topics(attempt_id) == [
        "Queued",
        "Leased",
        "DispatchStarted",
        "Leased",
        "DispatchStarted",
        "LateResultObserved",
        "ResultRecorded",
    ]
    assert xworld.effects.effect_count(attempt.idempotency_key) == 1
    assert attempt_id not in {
        d.attempt_id for d in xworld.store.due_work(xworld.clock.now(), 100).items
    }


class ClockMovesDuringRead:
    """A store whose read of one record takes long enough for the clock to move."""

    def __init__(self, inner: Any, clock: Any, stream_id: str, seconds: float) -> None:
        self.inner = inner
        self.clock = clock
        self.stream_id = stream_id
        self.seconds = seconds
        self.armed = False

    def get(self, cls: Any, stream_id: str) -> Any:
        if self.armed and stream_id == self.stream_id:
            self.armed = False
            self.clock.advance(self.seconds)
        return self.inner.get(cls, stream_id)

    def events_at(self, keys: Any) -> Any:
        """The recheck's batched read of the versions stored on ``Queued``."""
        if self.armed and any(stream_id == self.stream_id for stream_id, _ in keys):
            self.armed = False
            self.clock.advance(self.seconds)
        return self.inner.events_at(keys)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_spec_that_expires_during_the_recheck_is_never_dispatched(
    xworld: ExecutionWorld,
) -> None:
    """Chaos seed 20332: the pre-dispatch recheck judged the spec's expiry at the
    time it started, then read the directory; the clock passed the expiry during
    those reads and the marker (stamped later) still went out. Expiry is judged
    at the marker's own time."""
    from dataclasses import replace
    from datetime import timedelta

    from adapters.executors.fake import fake_build_digest
    from domain.directory import grant_record_id
    from domain.services.approval import approve
    from domain.services.read_cache import ReadCache
    from domain.spec import format_utc

    expires = xworld.clock.now() + timedelta(seconds=30)
    capability = MODES["provider_idempotency"]
    proposal_id = xworld.propose(
        capability=capability,
        executor_build=fake_build_digest(capability),
        expires_at=format_utc(expires),
    )
    attempt_id = approve(
        xworld.ctx, token=xworld.present(proposal_id).token, provenance=xworld.who
    ).attempt_id
    slow = ClockMovesDuringRead(
        xworld.store, xworld.clock, grant_record_id("alice", "tasks.write"), 40
    )
    # A worker of its own (another process): nothing cached, so it reads.
    xworld.ctx = replace(xworld.ctx, store=slow, cache=ReadCache())
    slow.armed = True

    outcome = xworld.worker().process(attempt_id)

    attempt = xworld.attempt(attempt_id)
    assert outcome is Outcome.FAILED_SAFE
    assert attempt.status == "failed_safe"
    assert attempt.result is not None and attempt.result["reason_code"] == "spec_expired"
    assert "DispatchStarted" not in xworld.topics(attempt_id)
    assert xworld.calls_for(attempt_id) == 0


def test_a_correlation_attempt_without_a_reconciler_does_not_block_recovery(
    xworld: ExecutionWorld,
) -> None:
    """A correlation_lookup build registered without its read-only reconciler
    (approval does not require one): once a call's outcome was uncertain,
    recovery raised ReconcilerUnavailable for that attempt, aborting every tick
    at the oldest due entry, so no other attempt was ever recovered again. The
    attempt becomes outcome_unknown (nothing can settle it automatically) and
    recovery goes on."""
    stuck = xworld.approved("correlation_lookup", simulate="timeout_after_effect")
    assert xworld.worker().process(stuck) is Outcome.PENDING
    assert xworld.registry is not None
    xworld.registry._reconcilers.clear()  # the misconfigured deployment
    xworld.clock.advance(LEASE + 1)
    waiting = xworld.approved("provider_idempotency")  # its stream record was missed

    report = run_recovery(xworld.worker())

    assert report.outcomes == {"outcome_unknown": 1, "succeeded": 1}
    attempt = xworld.attempt(stuck)
    assert attempt.status == "outcome_unknown"
    assert attempt.result is not None and attempt.result["reason_code"] == "reconciler_unavailable"
    assert xworld.attempt(waiting).status == "succeeded"
    assert xworld.calls_for(stuck) == 1  # never called again


def test_one_attempt_that_cannot_be_recovered_does_not_stop_the_tick(
    xworld: ExecutionWorld,
    monkeypatch: Any,
) -> None:
    """Whatever one attempt raises (short of the store being down), the tick
    goes on with the others and reports it."""
    from domain.errors import IllegalTransition
    from domain.services.execution import Worker

    first = xworld.approved("provider_idempotency")
    xworld.clock.advance(1)
    second = xworld.approved("provider_idempotency")
    original = Worker.recover

    def recover(self: Worker, attempt_id: str) -> Outcome:
        if attempt_id == first:
            raise IllegalTransition("poison")
        return original(self, attempt_id)

    monkeypatch.setattr(Worker, "recover", recover)
    report = run_recovery(xworld.worker())
    assert report.outcomes == {"error": 1, "succeeded": 1}
    assert xworld.attempt(second).status == "succeeded"
