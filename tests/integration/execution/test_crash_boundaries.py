"""Scenarios 5 and 6: every crash boundary in every delivery mode.

(a) after approval (the stream record is never delivered), (b) after the lease
before the dispatch marker, (c) after the marker before the call, (d) after the
effect before the response, (e) after the response before the result write.
Never a blind duplicate: one key reused / lookup first / outcome_unknown.
"""

from __future__ import annotations

import pytest

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
