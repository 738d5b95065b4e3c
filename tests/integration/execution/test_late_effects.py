"""Issue 14.1: an executor call that outlives its lease and lands its effect late.

Before the fix, recovery's read-only lookup answered "not applied" while the
call was still in flight, recovery recorded terminal ``failed_safe``, the
effect then landed, and the late success was only a ``LateResultObserved``,
off the attention list. Now "not applied" is proof only after the dispatching
call's deadline plus the build's settle window, and a success seen after a
terminal "no effect" moves the attempt to ``effect_after_no_effect``.

Each delivery mode, on memory, SQLite and ministack, with an executor that
applies its effect after its lease has expired: inside the call (the worker
still waiting) and after the worker gave up at the deadline.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from domain.ports import ExecutionReceipt, ExecutionRequest
from domain.services.deadline import LateAnswer, ThreadedCalls
from domain.services.execution import Outcome, Worker, WorkerPolicy
from domain.services.recovery import run_recovery
from domain.services.resolution import resolve
from tests.support.worlds.execution import LEASE, MODES, ExecutionWorld

SETTLE = 120  # the build's settle window after the deadline, in seconds


class LandsLate:
    """Runs ``during`` inside its first call (the lease expires, others act), then
    lets the provider apply the effect and answers: an effect landing after its
    lease expired."""

    def __init__(self, inner: Any, during: Callable[[], None], settle_seconds: float) -> None:
        self.inner = inner
        self.capability = inner.capability
        self.build_digest = inner.build_digest
        self.delivery_mode = inner.delivery_mode
        self.settle_seconds = settle_seconds
        self.during: Callable[[], None] | None = during
        self.release = threading.Event()
        self.blocking = False

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        during, self.during = self.during, None
        if during is not None:
            during()
        if self.blocking and not self.release.is_set():
            assert self.release.wait(30), "the test never released the call"
        answer: ExecutionReceipt = self.inner.execute(request)
        return answer


class GivesUpAtOnce(ThreadedCalls):
    """The worker's real bound, with the deadline reached at once (no real waiting)."""

    def run(self, call: Callable[[], Any], timeout: float, late: LateAnswer) -> Any:
        return super().run(call, 0.01, late)


def lands_late(
    xworld: ExecutionWorld, mode: str, during: Callable[[], None], settle: float
) -> LandsLate:
    wrapped = xworld.swap_executor(MODES[mode], lambda inner: LandsLate(inner, during, settle))
    assert isinstance(wrapped, LandsLate)
    return wrapped


def statuses_seen(xworld: ExecutionWorld, attempt_id: str) -> list[str]:
    return [
        e.data().get("status")
        for e in xworld.store.events(attempt_id)  # type: ignore[attr-defined]
        if "status" in e.data()
    ]


def lease_runs_out_and_recovery_looks(xworld: ExecutionWorld) -> Callable[[], None]:
    def during() -> None:
        xworld.clock.advance(LEASE + 1)
        run_recovery(xworld.worker())

    return during


def test_lookup_before_the_settle_window_is_no_proof(xworld: ExecutionWorld) -> None:
    """correlation_lookup: recovery looks up while the call is in flight; "not applied"
    is not trusted, the effect lands, a later lookup finds it."""
    attempt_id = xworld.approved("correlation_lookup")
    lands_late(xworld, "correlation_lookup", lease_runs_out_and_recovery_looks(xworld), SETTLE)

    xworld.worker().process(attempt_id)

    attempt = xworld.attempt(attempt_id)
    assert attempt.status == "executing", statuses_seen(xworld, attempt_id)
    assert xworld.effects.effect_count(attempt.idempotency_key) == 1
    assert attempt.idempotency_key in xworld.effects.lookups  # it did look, and waited
    assert attempt.next_action_at() == attempt.lookup_trusted_after()
    xworld.clock.advance(SETTLE)
    run_recovery(xworld.worker())
    attempt = xworld.attempt(attempt_id)
    assert attempt.status == "succeeded"
    assert "failed_safe" not in statuses_seen(xworld, attempt_id)


def test_an_effect_after_failed_safe_goes_to_the_attention_list(xworld: ExecutionWorld) -> None:
    """A build with no settle window that still lands late: the success its call
    returns after recovery's failed_safe is never kept silently."""
    attempt_id = xworld.approved("correlation_lookup")
    lands_late(xworld, "correlation_lookup", lease_runs_out_and_recovery_looks(xworld), 0)

    outcome = xworld.worker().process(attempt_id)

    attempt = xworld.attempt(attempt_id)
    assert outcome is Outcome.STALE
    assert xworld.effects.effect_count(attempt.idempotency_key) == 1
    assert attempt.status == "effect_after_no_effect"
    assert "EffectAfterNoEffect" in xworld.topics(attempt_id)
    # an admin settles it: the effect exists
    settled = resolve(
        xworld.ctx,
        attempt_id=attempt_id,
        expected_revision=attempt.revision,
        outcome="effect_applied",
        reason="provider shows the task",
        resolved_by="ops",
    )
    assert settled.status == "manually_resolved"


def test_provider_idempotency_late_call_is_deduplicated(xworld: ExecutionWorld) -> None:
    attempt_id = xworld.approved("provider_idempotency")
    lands_late(xworld, "provider_idempotency", lease_runs_out_and_recovery_looks(xworld), 0)

    xworld.worker().process(attempt_id)

    attempt = xworld.attempt(attempt_id)
    assert attempt.status == "succeeded"
    assert xworld.effects.effect_count(attempt.idempotency_key) == 1
    assert xworld.calls_for(attempt_id) == 2  # the retry reused the key
    assert "LateResultObserved" in xworld.topics(attempt_id)


def test_operator_only_late_success_after_no_effect_resolution(xworld: ExecutionWorld) -> None:
    """Recovery makes it outcome_unknown, an admin wrongly says no_effect while the
    call is in flight; its late success flags the attempt."""
    attempt_id = xworld.approved("operator_reconciliation_only")

    def during() -> None:
        xworld.clock.advance(LEASE + 1)
        run_recovery(xworld.worker())
        unknown = xworld.attempt(attempt_id)
        assert unknown.status == "outcome_unknown"
        resolve(
            xworld.ctx,
            attempt_id=attempt_id,
            expected_revision=unknown.revision,
            outcome="no_effect",
            reason="nothing in the provider console",
            resolved_by="ops",
        )

    lands_late(xworld, "operator_reconciliation_only", during, 0)
    xworld.worker().process(attempt_id)

    attempt = xworld.attempt(attempt_id)
    assert xworld.effects.effect_count(attempt.idempotency_key) == 1
    assert attempt.status == "effect_after_no_effect"


@pytest.mark.parametrize(
    ("settle", "final"), [(SETTLE, "succeeded"), (0, "effect_after_no_effect")]
)
def test_the_worker_gives_up_at_the_deadline_and_the_effect_lands_later(
    xworld: ExecutionWorld, settle: int, final: str
) -> None:
    """The worker stops waiting at the deadline (the call runs on); recovery's lookup
    is trusted only after the settle window; the abandoned call's late answer is
    observed when it comes."""
    attempt_id = xworld.approved("correlation_lookup")
    late = lands_late(xworld, "correlation_lookup", lambda: None, settle)
    late.blocking = True
    calls = GivesUpAtOnce()
    worker = Worker(xworld.ctx, WorkerPolicy(lease_seconds=LEASE), calls=calls)

    assert worker.process(attempt_id) is Outcome.PENDING  # abandoned at the deadline
    assert calls.abandoned() == 1
    xworld.clock.advance(LEASE + 1)
    run_recovery(xworld.worker())
    key = xworld.attempt(attempt_id).idempotency_key
    assert xworld.effects.effect_count(key) == 0
    late.release.set()  # the provider applies it now, long after the caller gave up
    assert calls.wait_abandoned(30)
    assert xworld.effects.effect_count(key) == 1
    xworld.clock.advance(SETTLE + 1)
    run_recovery(xworld.worker())
    assert xworld.attempt(attempt_id).status == final
