"""Scenarios 5 and 6: every crash boundary in every delivery mode.

(a) after approval (the stream record is never delivered), (b) after the lease
before the dispatch marker, (c) after the marker before the call, (d) after the
effect before the response, (e) after the response before the result write.
Never a blind duplicate: one key reused / lookup first / outcome_unknown. And
after an earlier dispatch landed, a refused re-send is never failed_safe.
"""

from __future__ import annotations

from typing import Any

import pytest

from domain.errors import ExecutorKeyReused, ExecutorNoEffect, ExecutorOutcomeUncertain
from domain.ports import ExecutionReceipt, ExecutionRequest
from domain.services.execution import CrashPoint, SimulatedCrash
from domain.services.recovery import run_recovery
from tests.support.worlds.execution import MODES, CrashAfterEffect, CrashAt, ExecutionWorld

# (status after recovery, effects, executor calls) per boundary and mode
EXPECTED = {
    ("a", "provider_idempotency"): ("succeeded", 1, 1),
    ("a", "correlation_lookup"): ("succeeded", 1, 1),
    ("a", "operator_reconciliation_only"): ("succeeded", 1, 1),
    ("b", "provider_idempotency"): ("succeeded", 1, 1),
    ("b", "correlation_lookup"): ("succeeded", 1, 1),
    ("b", "operator_reconciliation_only"): ("succeeded", 1, 1),
    ("c", "provider_idempotency"): ("succeeded", 1, 1),
    ("c", "correlation_lookup"): ("failed_safe", 0, 0),
    ("c", "operator_reconciliation_only"): ("outcome_unknown", 0, 0),
    ("d", "provider_idempotency"): ("succeeded", 1, 2),
    ("d", "correlation_lookup"): ("succeeded", 1, 1),
    ("d", "operator_reconciliation_only"): ("outcome_unknown", 1, 1),
    ("e", "provider_idempotency"): ("succeeded", 1, 2),
    ("e", "correlation_lookup"): ("succeeded", 1, 1),
    ("e", "operator_reconciliation_only"): ("outcome_unknown", 1, 1),
}


def crash(xworld: ExecutionWorld, attempt_id: str, boundary: str, mode: str) -> None:
    if boundary == "a":
        return  # approval committed; the stream record is lost
    if boundary == "d":
        xworld.swap_executor(MODES[mode], CrashAfterEffect)
        worker = xworld.worker()
    else:
        point = {
            "b": CrashPoint.AFTER_LEASE,
            "c": CrashPoint.AFTER_DISPATCH_MARKER,
            "e": CrashPoint.AFTER_RESPONSE,
        }[boundary]
        worker = xworld.worker(CrashAt(point))
    with pytest.raises(SimulatedCrash):
        worker.process(attempt_id)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("boundary", ["a", "b", "c", "d", "e"])
def test_crash_then_recovery_never_blindly_duplicates(
    xworld: ExecutionWorld, boundary: str, mode: str
) -> None:
    attempt_id = xworld.approved(mode)
    crash(xworld, attempt_id, boundary, mode)

    xworld.recover_after_lease()
    # more ticks change nothing: outcome_unknown is never requeued
    xworld.recover_after_lease()
    xworld.recover_after_lease()

    status, effects, calls = EXPECTED[(boundary, mode)]
    attempt = xworld.attempt(attempt_id)
    assert attempt.status == status
    assert xworld.effects.effect_count(attempt.idempotency_key) == effects
    assert xworld.calls_for(attempt_id) == calls
    assert xworld.effects.max_effects_per_key() <= 1
    topics = xworld.topics(attempt_id)
    if boundary == "b":
        assert "Requeued" in topics
    if mode == "correlation_lookup" and boundary in "cde":
        assert attempt.idempotency_key in xworld.effects.lookups  # looked up first
    if mode == "operator_reconciliation_only" and boundary in "cde":
        assert attempt.result is not None
        assert attempt.result["source"] in ("recovery", "worker")
    # never again in the due-work index once settled
    due = {d.attempt_id for d in xworld.store.due_work(xworld.clock.now(), 100).items}
    assert attempt_id not in due


@pytest.mark.parametrize("mode", sorted(MODES))
def test_duplicate_stream_records_lease_once(xworld: ExecutionWorld, mode: str) -> None:
    attempt_id = xworld.approved(mode)
    worker = xworld.worker()
    first = worker.process(attempt_id)
    assert first.value == "succeeded"
    for _ in range(3):
        assert worker.process(attempt_id).value == "skipped"
    run_recovery(worker)
    assert xworld.topics(attempt_id).count("Leased") == 1
    assert xworld.topics(attempt_id).count("DispatchStarted") == 1
    assert xworld.calls_for(attempt_id) == 1


# After an earlier dispatch landed and its answer was lost (the worker died after the
# effect (d), or the call timed out), the provider refuses every later request with the
# key: (status, reason, effects, executor calls) per refusal and mode, with a budget of
# three dispatches. Never failed_safe: the refusal speaks for the re-send alone.
REFUSED_RESEND = {
    ("401", "provider_idempotency"): ("outcome_unknown", "dispatch_limit", 1, 3),
    ("422", "provider_idempotency"): ("outcome_unknown", "resend_key_reused", 1, 2),
    ("400", "provider_idempotency"): ("outcome_unknown", "dispatch_limit", 1, 3),
    **{
        (status, "correlation_lookup"): ("succeeded", None, 1, 1)  # looked up, no re-send
        for status in ("401", "422", "400")
    },
    **{
        (status, "operator_reconciliation_only"): ("outcome_unknown", "lost", 1, 1)
        for status in ("401", "422", "400")
    },
}
# operator_reconciliation_only: who records outcome_unknown, by how the answer was lost
OPERATOR_REASON = {
    "crash": "operator_reconciliation_required",  # recovery, after the lease
    "timeout": "executor_outcome_uncertain",  # the worker, at once
}


class LandsThenRefuses:
    """The first call applies the effect and its answer is lost; every later call with
    the key is refused (a rotated credential, a rule changed, a key the provider will
    not take again)."""

    def __init__(self, inner: Any, refusal: str, lost: str) -> None:
        self.inner = inner
        self.capability = inner.capability
        self.build_digest = inner.build_digest
        self.delivery_mode = inner.delivery_mode
        self.refusal = refusal
        self.lost = lost
        self.landed = False
        self.calls = 0

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        self.calls += 1
        if self.landed:
            reason = f"provider_rejected_{self.refusal}"
            if self.refusal == "422":
                raise ExecutorKeyReused(reason_code=reason)
            raise ExecutorNoEffect(reason_code=reason)
        self.inner.execute(request)
        self.landed = True
        if self.lost == "crash":
            raise SimulatedCrash("after_effect")
        raise ExecutorOutcomeUncertain()


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("refusal", ["401", "422", "400"])
@pytest.mark.parametrize("lost", ["crash", "timeout"])
def test_a_refused_re_send_after_a_landed_dispatch_is_never_failed_safe(
    xworld: ExecutionWorld, lost: str, refusal: str, mode: str
) -> None:
    attempt_id = xworld.approved(mode)
    executor = xworld.swap_executor(
        MODES[mode], lambda inner: LandsThenRefuses(inner, refusal, lost)
    )
    worker = xworld.worker(max_dispatches=3)
    if lost == "crash":
        with pytest.raises(SimulatedCrash):
            worker.process(attempt_id)
    else:
        worker.process(attempt_id)
    for _ in range(5):
        xworld.recover_after_lease(worker)

    status, reason, effects, calls = REFUSED_RESEND[(refusal, mode)]
    reason = OPERATOR_REASON[lost] if reason == "lost" else reason
    attempt = xworld.attempt(attempt_id)
    assert attempt.result is not None
    assert (attempt.status.value, attempt.result.get("reason_code")) == (status, reason)
    assert xworld.effects.effect_count(attempt.idempotency_key) == effects
    assert executor.calls == calls
    assert xworld.effects.max_effects_per_key() <= 1
    due = {d.attempt_id for d in xworld.store.due_work(xworld.clock.now(), 100).items}
    assert attempt_id not in due
