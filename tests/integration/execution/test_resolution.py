"""Scenario 8 (service level): reconcile and resolve under concurrent and repeated calls."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from domain.errors import (
    InvalidInput,
    LedgerError,
    NotOutcomeUnknown,
    ReconcilerUnavailable,
    StaleRevision,
)
from domain.services.resolution import reconcile, resolve
from tests.support.worlds.execution import ExecutionWorld


def unknown_attempt(xworld: ExecutionWorld, mode: str = "operator_reconciliation_only") -> str:
    simulate = (
        "timeout_after_effect" if mode == "operator_reconciliation_only" else ("unsafe_receipt")
    )
    attempt_id = xworld.approved(mode, simulate=simulate)
    xworld.worker().process(attempt_id)
    assert xworld.attempt(attempt_id).status == "outcome_unknown"
    return attempt_id


def test_concurrent_resolutions_one_wins(xworld: ExecutionWorld) -> None:
    attempt_id = unknown_attempt(xworld)
    revision = xworld.attempt(attempt_id).revision
    calls_before = xworld.effects.call_count()
    barrier = threading.Barrier(10)

    def press(i: int) -> str | LedgerError:
        outcome = "effect_applied" if i % 2 else "no_effect"
        barrier.wait()
        try:
            return resolve(
                xworld.ctx,
                attempt_id=attempt_id,
                expected_revision=revision,
                outcome=outcome,
                reason=f"checked provider console ({i})",
                resolved_by=f"admin-{i}",
            ).status.value
        except LedgerError as exc:
            return exc

    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(press, range(10)))
    attempt = xworld.attempt(attempt_id)
    assert attempt.status == "manually_resolved"
    assert xworld.topics(attempt_id).count("ManuallyResolved") == 1
    winner = attempt.resolution
    assert winner is not None
    for i, answer in enumerate(answers):
        agrees = ("effect_applied" if i % 2 else "no_effect") == winner["outcome"]
        if agrees:
            assert answer == "manually_resolved"
        else:
            assert isinstance(answer, NotOutcomeUnknown)
    # a repeat returns the stored truth, whatever revision it carries
    again = resolve(
        xworld.ctx,
        attempt_id=attempt_id,
        expected_revision=revision,
        outcome=winner["outcome"],
        reason="repeat",
        resolved_by="admin-x",
    )
    assert again.resolution == winner
    assert xworld.effects.call_count() == calls_before


def test_resolution_needs_current_revision_and_unknown_status(xworld: ExecutionWorld) -> None:
    attempt_id = unknown_attempt(xworld)
    revision = xworld.attempt(attempt_id).revision
    with pytest.raises(StaleRevision):
        resolve(
            xworld.ctx,
            attempt_id=attempt_id,
            expected_revision=revision - 1,
            outcome="no_effect",
            reason="x",
            resolved_by="admin",
        )
    done = xworld.approved("provider_idempotency")
    xworld.worker().process(done)
    with pytest.raises(NotOutcomeUnknown):
        resolve(
            xworld.ctx,
            attempt_id=done,
            expected_revision=xworld.attempt(done).revision,
            outcome="no_effect",
            reason="x",
            resolved_by="admin",
        )


@pytest.mark.parametrize("reason", ["", "x" * 501, "token=abc123", "Bearer eyJhbGciOi.x"])
def test_resolution_rejects_unsafe_reasons(xworld: ExecutionWorld, reason: str) -> None:
    attempt_id = unknown_attempt(xworld)
    with pytest.raises(InvalidInput):
        resolve(
            xworld.ctx,
            attempt_id=attempt_id,
            expected_revision=xworld.attempt(attempt_id).revision,
            outcome="no_effect",
            reason=reason,
            resolved_by="admin",
        )
    assert xworld.attempt(attempt_id).status == "outcome_unknown"


def test_reconcile_runs_only_the_read_only_lookup(xworld: ExecutionWorld) -> None:
    attempt_id = unknown_attempt(xworld, "correlation_lookup")
    attempt = xworld.attempt(attempt_id)
    calls_before = xworld.effects.call_count()
    barrier = threading.Barrier(6)

    def press(_: int) -> str:
        barrier.wait()
        return reconcile(
            xworld.ctx, attempt_id=attempt_id, expected_revision=attempt.revision
        ).status.value

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(press, range(6)))
    assert set(answers) == {"succeeded"}
    settled = xworld.attempt(attempt_id)
    assert settled.result is not None and settled.result["source"] == "reconciler"
    assert xworld.topics(attempt_id).count("ResultRecorded") == 2
    assert xworld.effects.call_count() == calls_before
    assert attempt.idempotency_key in xworld.effects.lookups


def test_reconcile_without_a_reconciler_is_refused(xworld: ExecutionWorld) -> None:
    attempt_id = unknown_attempt(xworld)
    with pytest.raises(ReconcilerUnavailable):
        reconcile(
            xworld.ctx, attempt_id=attempt_id, expected_revision=xworld.attempt(attempt_id).revision
        )
