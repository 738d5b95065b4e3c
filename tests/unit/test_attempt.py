"""The ExecutionAttempt state machine (design.md 5.3, I5, I8), driven by a fixed clock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from domain.attempt import (
    MAX_LEASE_HISTORY,
    AttemptStatus,
    ExecutionAttempt,
    Resolution,
)
from domain.directory import DeliveryMode
from domain.errors import IllegalTransition, LedgerError, NotOutcomeUnknown, StaleRevision
from domain.timeutil import format_utc
from tests.support.aggregates import (
    AFTER_EXPIRY,
    LEASE,
    RECEIPT,
    dispatched,
    leased,
    new_attempt,
    outcome_unknown,
)
from tests.support.factories import T0
from tests.support.replay import Replay


def refused(attempt: ExecutionAttempt, command: Callable[[], object]) -> LedgerError:
    """Run a command that must be refused; nothing may change."""
    version, status = attempt.version, attempt.status
    with pytest.raises(LedgerError) as caught:
        command()
    assert attempt.version == version
    assert attempt.status is status
    return caught.value


# -- queued ---------------------------------------------------------------------


def test_new_attempt_is_queued_and_due_immediately(replay: Replay) -> None:
    attempt = new_attempt(replay)

    assert attempt.status is AttemptStatus.QUEUED
    assert attempt.revision == 1
    assert attempt.lease_generation == 0
    assert not attempt.dispatched
    assert attempt.next_action_at() == T0


def test_lease_moves_queued_attempt_to_executing_with_the_next_generation(
    replay: Replay,
) -> None:
    attempt = new_attempt(replay)

    generation = attempt.lease(owner="worker-a", now=T0, lease_seconds=LEASE)

    assert generation == 1
    assert attempt.status is AttemptStatus.EXECUTING
    assert attempt.lease_owner == "worker-a"
    assert attempt.lease_expires_at == format_utc(AFTER_EXPIRY)
    assert attempt.holds_lease(1, T0)
    assert attempt.predispatch_leases == 1
    assert attempt.lease_history == [
        {
            "generation": 1,
            "owner": "worker-a",
            "at": format_utc(T0),
            "expires_at": format_utc(AFTER_EXPIRY),
        }
    ]


def test_live_lease_cannot_be_taken_again(replay: Replay) -> None:
    attempt, _ = leased(replay)

    error = refused(attempt, lambda: attempt.lease(owner="worker-b", now=T0, lease_seconds=LEASE))

    assert isinstance(error, IllegalTransition)
    assert attempt.lease_owner == "worker-a"


# -- the happy paths ---------------------------------------------------------------


def test_dispatch_then_success_is_terminal(replay: Replay) -> None:
    attempt, gen = dispatched(replay)

    attempt.record_result(
        generation=gen,
        status=AttemptStatus.SUCCEEDED,
        now=T0 + timedelta(seconds=2),
        receipt=RECEIPT,
    )

    assert attempt.status is AttemptStatus.SUCCEEDED
    assert attempt.is_terminal
    assert attempt.result == {"kind": "succeeded", "source": "executor", "receipt": RECEIPT}
    assert attempt.lease_owner is None
    assert attempt.next_action_at() is None


def test_dispatch_then_proved_no_write_is_failed_safe(replay: Replay) -> None:
    attempt, gen = dispatched(replay)

    attempt.record_result(
        generation=gen,
        status=AttemptStatus.FAILED_SAFE,
        now=T0 + timedelta(seconds=2),
        reason_code="provider_rejected",
    )

    assert attempt.status is AttemptStatus.FAILED_SAFE
    assert attempt.result == {
        "kind": "failed_safe",
        "source": "executor",
        "reason_code": "provider_rejected",
    }


def test_dispatch_then_lost_response_is_outcome_unknown(replay: Replay) -> None:
    attempt, gen = dispatched(replay)

    attempt.record_result(
        generation=gen,
        status=AttemptStatus.OUTCOME_UNKNOWN,
        now=T0 + timedelta(seconds=2),
        reason_code="timeout_after_dispatch",
    )

    assert attempt.status is AttemptStatus.OUTCOME_UNKNOWN
    assert not attempt.is_terminal
    assert attempt.next_action_at() is None


def test_dispatch_marker_records_the_generation_and_counts(replay: Replay) -> None:
    attempt, gen = dispatched(replay)

    assert attempt.dispatched
    assert attempt.dispatched_generation == gen
    assert attempt.dispatch_count == 1
    assert attempt.dispatch_started_at == format_utc(T0 + timedelta(seconds=1))


def test_holder_records_failed_safe_when_the_recheck_fails_before_dispatch(
    replay: Replay,
) -> None:
    attempt, gen = leased(replay)

    attempt.fail_safe(reason_code="permission_revoked", now=T0, generation=gen)

    assert attempt.status is AttemptStatus.FAILED_SAFE
    assert attempt.result == {
        "kind": "failed_safe",
        "source": "worker",
        "reason_code": "permission_revoked",
    }


def test_recovery_fails_safe_a_queued_attempt_out_of_leases(replay: Replay) -> None:
    attempt = new_attempt(replay)

    attempt.fail_safe(reason_code="max_predispatch_leases", now=T0)

    assert attempt.status is AttemptStatus.FAILED_SAFE


# -- requeue before dispatch ---------------------------------------------------------


def test_holder_requeues_before_dispatch_and_backs_off(replay: Replay) -> None:
    attempt, gen = leased(replay)
    not_before = T0 + timedelta(seconds=5)

    attempt.requeue(generation=gen, reason="transient", not_before=not_before, now=T0)

    assert attempt.status is AttemptStatus.QUEUED
    assert attempt.lease_owner is None
    assert attempt.lease_expires_at is None
    assert attempt.next_action_at() == not_before
    refused(
        attempt,
        lambda: attempt.lease(
            owner="w", now=not_before - timedelta(microseconds=1), lease_seconds=LEASE
        ),
    )
    assert attempt.lease(owner="worker-b", now=not_before, lease_seconds=LEASE) == 2
    assert attempt.predispatch_leases == 2


def test_recovery_requeues_an_expired_lease_without_dispatch(replay: Replay) -> None:
    attempt, _ = leased(replay)

    attempt.requeue(
        generation=None, reason="lease_expired", not_before=AFTER_EXPIRY, now=AFTER_EXPIRY
    )

    assert attempt.status is AttemptStatus.QUEUED
    assert attempt.next_action_at() == AFTER_EXPIRY


def test_recovery_cannot_requeue_a_live_lease(replay: Replay) -> None:
    attempt, _ = leased(replay)
    just_before = AFTER_EXPIRY - timedelta(microseconds=1)

    refused(
        attempt,
        lambda: attempt.requeue(generation=None, reason="r", not_before=T0, now=just_before),
    )


@pytest.mark.parametrize("by_holder", [True, False], ids=["holder", "recovery"])
def test_requeue_is_refused_after_dispatch(replay: Replay, by_holder: bool) -> None:
    attempt, gen = dispatched(replay)
    now = T0 + timedelta(seconds=2) if by_holder else AFTER_EXPIRY

    refused(
        attempt,
        lambda: attempt.requeue(
            generation=gen if by_holder else None, reason="r", not_before=now, now=now
        ),
    )


def test_requeue_by_an_expired_holder_is_refused(replay: Replay) -> None:
    attempt, gen = leased(replay)

    refused(
        attempt,
        lambda: attempt.requeue(generation=gen, reason="r", not_before=T0, now=AFTER_EXPIRY),
    )


def test_requeue_of_a_queued_attempt_is_refused(replay: Replay) -> None:
    attempt = new_attempt(replay)

    refused(
        attempt,
        lambda: attempt.requeue(generation=None, reason="r", not_before=T0, now=AFTER_EXPIRY),
    )


def test_expired_undispatched_lease_must_be_requeued_not_re_leased(replay: Replay) -> None:
    attempt, _ = leased(replay)

    refused(attempt, lambda: attempt.lease(owner="b", now=AFTER_EXPIRY, lease_seconds=LEASE))


# -- I5: only the current, unexpired generation ----------------------------------------


def test_lease_ends_exactly_at_its_expiry(replay: Replay) -> None:
    attempt, gen = leased(replay)

    assert attempt.holds_lease(gen, AFTER_EXPIRY - timedelta(microseconds=1))
    assert not attempt.holds_lease(gen, AFTER_EXPIRY)


def test_expired_generation_cannot_mark_dispatch(replay: Replay) -> None:
    attempt, gen = leased(replay)

    refused(attempt, lambda: attempt.mark_dispatch(generation=gen, now=AFTER_EXPIRY))

    assert not attempt.dispatched


def test_unknown_generation_cannot_mark_dispatch(replay: Replay) -> None:
    attempt, gen = leased(replay)

    refused(attempt, lambda: attempt.mark_dispatch(generation=gen + 1, now=T0))


def test_dispatch_is_marked_once_per_generation(replay: Replay) -> None:
    attempt, gen = dispatched(replay)

    refused(attempt, lambda: attempt.mark_dispatch(generation=gen, now=T0 + timedelta(seconds=2)))

    assert attempt.dispatch_count == 1


@pytest.mark.parametrize(
    "status", [AttemptStatus.SUCCEEDED, AttemptStatus.FAILED_SAFE, AttemptStatus.OUTCOME_UNKNOWN]
)
def test_expired_generation_cannot_record_a_result(replay: Replay, status: AttemptStatus) -> None:
    attempt, gen = dispatched(replay)

    refused(attempt, lambda: attempt.record_result(generation=gen, status=status, now=AFTER_EXPIRY))

    assert attempt.status is AttemptStatus.EXECUTING


@pytest.mark.parametrize("status", [AttemptStatus.SUCCEEDED, AttemptStatus.OUTCOME_UNKNOWN])
def test_a_result_needs_this_generations_dispatch_marker(
    replay: Replay, status: AttemptStatus
) -> None:
    attempt, gen = leased(replay)

    refused(attempt, lambda: attempt.record_result(generation=gen, status=status, now=T0))


@pytest.mark.parametrize(
    "status",
    [AttemptStatus.QUEUED, AttemptStatus.EXECUTING, AttemptStatus.MANUALLY_RESOLVED],
)
def test_record_result_accepts_only_result_statuses(replay: Replay, status: AttemptStatus) -> None:
    attempt, gen = dispatched(replay)

    refused(attempt, lambda: attempt.record_result(generation=gen, status=status, now=T0))


def _re_leased(replay: Replay) -> tuple[ExecutionAttempt, int, int]:
    """Generation 1 dispatched and expired; generation 2 holds the lease now."""
    attempt, first = dispatched(replay, DeliveryMode.PROVIDER_IDEMPOTENCY)
    second = attempt.lease(owner="worker-b", now=AFTER_EXPIRY, lease_seconds=LEASE)
    return attempt, first, second


def test_provider_idempotency_attempt_is_re_leased_after_dispatch_expiry(
    replay: Replay,
) -> None:
    attempt, first, second = _re_leased(replay)

    assert second == first + 1
    assert attempt.lease_owner == "worker-b"
    assert attempt.predispatch_leases == 1  # the retry is after dispatch
    attempt.mark_dispatch(generation=second, now=AFTER_EXPIRY)
    attempt.record_result(
        generation=second, status=AttemptStatus.SUCCEEDED, now=AFTER_EXPIRY, receipt=RECEIPT
    )
    assert attempt.status is AttemptStatus.SUCCEEDED
    assert attempt.dispatch_count == 2


def test_a_no_write_is_proof_of_no_effect_on_the_first_dispatch_only(replay: Replay) -> None:
    first, _ = dispatched(replay, DeliveryMode.PROVIDER_IDEMPOTENCY)
    assert first.no_write_is_proof
    attempt, _, second = _re_leased(replay)
    attempt.mark_dispatch(generation=second, now=AFTER_EXPIRY)

    assert attempt.dispatch_count == 2
    assert not attempt.no_write_is_proof
    error = refused(
        attempt,
        lambda: attempt.record_result(
            generation=second, status=AttemptStatus.FAILED_SAFE, now=AFTER_EXPIRY
        ),
    )
    assert isinstance(error, IllegalTransition)
    attempt.record_result(
        generation=second,
        status=AttemptStatus.OUTCOME_UNKNOWN,
        now=AFTER_EXPIRY,
        reason_code="resend_key_reused",
    )
    assert attempt.status is AttemptStatus.OUTCOME_UNKNOWN
    assert replay.rebuild(attempt).no_write_is_proof is False  # counted from the stored markers


@pytest.mark.parametrize(
    "mode", [DeliveryMode.CORRELATION_LOOKUP, DeliveryMode.OPERATOR_RECONCILIATION_ONLY]
)
def test_other_delivery_modes_are_never_re_leased_after_dispatch(
    replay: Replay, mode: DeliveryMode
) -> None:
    attempt, _ = dispatched(replay, mode)

    refused(attempt, lambda: attempt.lease(owner="b", now=AFTER_EXPIRY, lease_seconds=LEASE))


def test_stale_generation_cannot_dispatch_or_record_after_a_re_lease(replay: Replay) -> None:
    attempt, first, _ = _re_leased(replay)

    refused(attempt, lambda: attempt.mark_dispatch(generation=first, now=AFTER_EXPIRY))
    for status in (AttemptStatus.SUCCEEDED, AttemptStatus.FAILED_SAFE):
        refused(
            attempt,
            lambda s=status: attempt.record_result(  # type: ignore[misc]
                generation=first, status=s, now=AFTER_EXPIRY
            ),
        )
    refused(attempt, lambda: attempt.fail_safe(reason_code="x", now=AFTER_EXPIRY, generation=first))


def test_re_leased_generation_cannot_claim_failed_safe_after_an_earlier_dispatch(
    replay: Replay,
) -> None:
    # Generation 1 dispatched: an effect may exist, so "provably no effect" is
    # not something generation 2 can record without dispatching itself.
    attempt, _, second = _re_leased(replay)

    refused(
        attempt,
        lambda: attempt.record_result(
            generation=second,
            status=AttemptStatus.FAILED_SAFE,
            now=AFTER_EXPIRY,
            reason_code="permission_revoked",
        ),
    )
    refused(
        attempt,
        lambda: attempt.fail_safe(
            reason_code="permission_revoked", now=AFTER_EXPIRY, generation=second
        ),
    )


def test_re_leased_holder_records_unknown_when_its_recheck_fails(replay: Replay) -> None:
    attempt, _, second = _re_leased(replay)

    attempt.record_unknown(reason_code="permission_revoked", now=AFTER_EXPIRY, generation=second)

    assert attempt.status is AttemptStatus.OUTCOME_UNKNOWN
    assert attempt.result == {
        "kind": "outcome_unknown",
        "source": "worker",
        "reason_code": "permission_revoked",
    }


# -- I8: late results are observed, never authoritative ------------------------------


def test_stale_generation_may_only_observe_its_late_result(replay: Replay) -> None:
    attempt, first, second = _re_leased(replay)
    before = attempt.version

    attempt.observe_late_result(generation=first, kind="succeeded", now=AFTER_EXPIRY)

    assert attempt.version == before + 1
    assert attempt.observations == 1
    assert attempt.status is AttemptStatus.EXECUTING
    assert attempt.holds_lease(second, AFTER_EXPIRY)


def test_expired_current_generation_may_only_observe(replay: Replay) -> None:
    attempt, gen = dispatched(replay)

    attempt.observe_late_result(generation=gen, kind="succeeded", now=AFTER_EXPIRY)

    assert attempt.status is AttemptStatus.EXECUTING
    assert attempt.observations == 1


def test_current_holder_records_rather_than_observes(replay: Replay) -> None:
    attempt, gen = dispatched(replay)

    refused(attempt, lambda: attempt.observe_late_result(generation=gen, kind="succeeded", now=T0))


def test_late_result_after_a_terminal_outcome_never_overwrites_it(replay: Replay) -> None:
    attempt, first, second = _re_leased(replay)
    attempt.mark_dispatch(generation=second, now=AFTER_EXPIRY)
    attempt.record_result(
        generation=second, status=AttemptStatus.SUCCEEDED, now=AFTER_EXPIRY, receipt=RECEIPT
    )
    result = attempt.result

    attempt.observe_late_result(generation=first, kind="failed_safe", now=AFTER_EXPIRY)

    assert attempt.status is AttemptStatus.SUCCEEDED
    assert attempt.result == result
    assert attempt.observations == 1


# -- fail_safe and record_unknown --------------------------------------------------------


@pytest.mark.parametrize("by_holder", [True, False], ids=["holder", "recovery"])
def test_fail_safe_is_refused_once_dispatched(replay: Replay, by_holder: bool) -> None:
    attempt, gen = dispatched(replay)
    now = T0 + timedelta(seconds=2) if by_holder else AFTER_EXPIRY

    refused(
        attempt,
        lambda: attempt.fail_safe(reason_code="x", now=now, generation=gen if by_holder else None),
    )


def test_fail_safe_by_an_expired_holder_is_refused(replay: Replay) -> None:
    attempt, gen = leased(replay)

    refused(attempt, lambda: attempt.fail_safe(reason_code="x", now=AFTER_EXPIRY, generation=gen))


def test_fail_safe_is_refused_from_outcome_unknown(replay: Replay) -> None:
    attempt = outcome_unknown(replay)

    refused(attempt, lambda: attempt.fail_safe(reason_code="x", now=AFTER_EXPIRY))


def test_recovery_records_unknown_after_dispatch_and_lease_expiry(replay: Replay) -> None:
    attempt, _ = dispatched(replay, DeliveryMode.OPERATOR_RECONCILIATION_ONLY)

    attempt.record_unknown(reason_code="lease_expired_after_dispatch", now=AFTER_EXPIRY)

    assert attempt.status is AttemptStatus.OUTCOME_UNKNOWN
    assert attempt.result == {
        "kind": "outcome_unknown",
        "source": "recovery",
        "reason_code": "lease_expired_after_dispatch",
    }


def test_record_unknown_needs_the_lease_to_have_expired(replay: Replay) -> None:
    attempt, _ = dispatched(replay)

    refused(
        attempt,
        lambda: attempt.record_unknown(
            reason_code="x", now=AFTER_EXPIRY - timedelta(microseconds=1)
        ),
    )


def test_record_unknown_needs_a_dispatch(replay: Replay) -> None:
    attempt, gen = leased(replay)

    refused(attempt, lambda: attempt.record_unknown(reason_code="x", now=AFTER_EXPIRY))
    refused(attempt, lambda: attempt.record_unknown(reason_code="x", now=T0, generation=gen))


def test_record_unknown_is_refused_for_a_queued_attempt(replay: Replay) -> None:
    attempt = new_attempt(replay)

    refused(attempt, lambda: attempt.record_unknown(reason_code="x", now=AFTER_EXPIRY))


# -- reconciliation ------------------------------------------------------------------------


@pytest.mark.parametrize("status", [AttemptStatus.SUCCEEDED, AttemptStatus.FAILED_SAFE])
def test_reconciliation_settles_outcome_unknown(replay: Replay, status: AttemptStatus) -> None:
    attempt = outcome_unknown(replay)

    attempt.record_reconciled(status=status, now=AFTER_EXPIRY, reason_code="lookup")

    assert attempt.status is status
    assert attempt.result == {"kind": status.value, "source": "reconciler", "reason_code": "lookup"}


@pytest.mark.parametrize(
    "status", [AttemptStatus.OUTCOME_UNKNOWN, AttemptStatus.QUEUED, AttemptStatus.EXECUTING]
)
def test_reconciliation_of_outcome_unknown_must_settle_it(
    replay: Replay, status: AttemptStatus
) -> None:
    attempt = outcome_unknown(replay)

    refused(attempt, lambda: attempt.record_reconciled(status=status, now=AFTER_EXPIRY))


@pytest.mark.parametrize(
    "status", [AttemptStatus.SUCCEEDED, AttemptStatus.FAILED_SAFE, AttemptStatus.OUTCOME_UNKNOWN]
)
def test_reconciliation_records_any_result_for_an_expired_dispatched_attempt(
    replay: Replay, status: AttemptStatus
) -> None:
    attempt, _ = dispatched(replay, DeliveryMode.CORRELATION_LOOKUP)

    attempt.record_reconciled(status=status, now=AFTER_EXPIRY, receipt=RECEIPT)

    assert attempt.status is status
    assert attempt.result == {"kind": status.value, "source": "reconciler", "receipt": RECEIPT}


def test_reconciliation_is_refused_while_the_lease_is_live(replay: Replay) -> None:
    attempt, _ = dispatched(replay, DeliveryMode.CORRELATION_LOOKUP)

    refused(
        attempt,
        lambda: attempt.record_reconciled(
            status=AttemptStatus.SUCCEEDED, now=T0 + timedelta(seconds=2)
        ),
    )


def test_reconciliation_is_refused_without_a_dispatch(replay: Replay) -> None:
    attempt, _ = leased(replay, DeliveryMode.CORRELATION_LOOKUP)

    refused(
        attempt,
        lambda: attempt.record_reconciled(status=AttemptStatus.FAILED_SAFE, now=AFTER_EXPIRY),
    )


def test_reconciliation_is_refused_for_a_queued_attempt(replay: Replay) -> None:
    attempt = new_attempt(replay)

    refused(
        attempt,
        lambda: attempt.record_reconciled(status=AttemptStatus.FAILED_SAFE, now=AFTER_EXPIRY),
    )


# -- resolution ----------------------------------------------------------------------------


@pytest.mark.parametrize("outcome", list(Resolution))
def test_admin_resolves_outcome_unknown(replay: Replay, outcome: Resolution) -> None:
    attempt = outcome_unknown(replay)
    revision = attempt.revision

    attempt.check_revision(revision)
    attempt.resolve(
        outcome=outcome,
        reason="checked the provider console",
        resolved_by="admin-1",
        now=AFTER_EXPIRY,
    )

    assert attempt.status is AttemptStatus.MANUALLY_RESOLVED
    assert attempt.is_terminal
    assert attempt.resolution == {
        "outcome": outcome.value,
        "reason": "checked the provider console",
        "resolved_by": "admin-1",
        "resolved_at": format_utc(AFTER_EXPIRY),
    }
    assert attempt.revision == revision + 1


def test_resolution_keeps_an_admin_supplied_receipt(replay: Replay) -> None:
    attempt = outcome_unknown(replay)

    attempt.resolve(
        outcome=Resolution.EFFECT_APPLIED,
        reason="r",
        resolved_by="admin-1",
        now=AFTER_EXPIRY,
        receipt=RECEIPT,
    )

    assert attempt.resolution is not None
    assert attempt.resolution["receipt"] == RECEIPT


def test_check_revision_rejects_a_stale_revision(replay: Replay) -> None:
    attempt = outcome_unknown(replay)

    with pytest.raises(StaleRevision):
        attempt.check_revision(attempt.revision - 1)
    with pytest.raises(StaleRevision):
        attempt.check_revision(attempt.revision + 1)


def _succeeded(replay: Replay) -> ExecutionAttempt:
    attempt, gen = dispatched(replay)
    attempt.record_result(generation=gen, status=AttemptStatus.SUCCEEDED, now=T0, receipt=RECEIPT)
    return attempt


def _failed_safe_after_dispatch(replay: Replay) -> ExecutionAttempt:
    attempt, gen = dispatched(replay)
    attempt.record_result(generation=gen, status=AttemptStatus.FAILED_SAFE, now=T0)
    return attempt


def _failed_safe_before_dispatch(replay: Replay) -> ExecutionAttempt:
    attempt, gen = leased(replay)
    attempt.fail_safe(reason_code="actor_disabled", now=T0, generation=gen)
    return attempt


def _manually_resolved(replay: Replay) -> ExecutionAttempt:
    attempt = outcome_unknown(replay)
    attempt.resolve(
        outcome=Resolution.NO_EFFECT, reason="r", resolved_by="admin-1", now=AFTER_EXPIRY
    )
    return attempt


def _reconciled_success(replay: Replay) -> ExecutionAttempt:
    attempt = outcome_unknown(replay)
    attempt.record_reconciled(status=AttemptStatus.SUCCEEDED, now=AFTER_EXPIRY)
    return attempt


NOT_UNKNOWN: dict[str, Callable[[Replay], ExecutionAttempt]] = {
    "queued": new_attempt,
    "executing": lambda r: leased(r)[0],
    "dispatched": lambda r: dispatched(r)[0],
    "succeeded": _succeeded,
    "failed_safe": _failed_safe_before_dispatch,
    "manually_resolved": _manually_resolved,
}


@pytest.mark.parametrize("state", sorted(NOT_UNKNOWN))
def test_resolution_is_only_from_outcome_unknown(replay: Replay, state: str) -> None:
    attempt = NOT_UNKNOWN[state](replay)

    error = refused(
        attempt,
        lambda: attempt.resolve(
            outcome=Resolution.NO_EFFECT, reason="r", resolved_by="admin-1", now=AFTER_EXPIRY
        ),
    )

    assert isinstance(error, NotOutcomeUnknown)


# -- terminal states refuse everything -------------------------------------------------------

TERMINAL_STATES: dict[str, Callable[[Replay], ExecutionAttempt]] = {
    "succeeded": _succeeded,
    "failed_safe_after_dispatch": _failed_safe_after_dispatch,
    "failed_safe_before_dispatch": _failed_safe_before_dispatch,
    "manually_resolved": _manually_resolved,
    "reconciled_success": _reconciled_success,
}

LATER = AFTER_EXPIRY + timedelta(days=1)

COMMANDS: dict[str, Callable[[ExecutionAttempt], object]] = {
    "lease": lambda a: a.lease(owner="w", now=LATER, lease_seconds=LEASE),
    "requeue_holder": lambda a: a.requeue(
        generation=a.lease_generation, reason="r", not_before=LATER, now=LATER
    ),
    "requeue_recovery": lambda a: a.requeue(
        generation=None, reason="r", not_before=LATER, now=LATER
    ),
    "mark_dispatch": lambda a: a.mark_dispatch(generation=a.lease_generation, now=LATER),
    "record_result": lambda a: a.record_result(
        generation=a.lease_generation, status=AttemptStatus.SUCCEEDED, now=LATER
    ),
    "fail_safe": lambda a: a.fail_safe(reason_code="x", now=LATER),
    "record_unknown": lambda a: a.record_unknown(reason_code="x", now=LATER),
    "record_reconciled": lambda a: a.record_reconciled(status=AttemptStatus.FAILED_SAFE, now=LATER),
    "resolve": lambda a: a.resolve(
        outcome=Resolution.NO_EFFECT, reason="r", resolved_by="admin-1", now=LATER
    ),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("state", sorted(TERMINAL_STATES))
def test_terminal_states_refuse_every_command(replay: Replay, state: str, command: str) -> None:
    attempt = TERMINAL_STATES[state](replay)
    assert attempt.is_terminal
    result, resolution = attempt.result, attempt.resolution

    refused(attempt, lambda: COMMANDS[command](attempt))

    assert attempt.result == result
    assert attempt.resolution == resolution
    assert attempt.next_action_at() is None


# -- scheduling and history ------------------------------------------------------------------


def test_next_action_at_follows_the_status(replay: Replay) -> None:
    attempt = new_attempt(replay)
    assert attempt.next_action_at() == T0

    gen = attempt.lease(owner="w", now=T0, lease_seconds=LEASE)
    assert attempt.next_action_at() == AFTER_EXPIRY

    backoff = T0 + timedelta(seconds=4)
    attempt.requeue(generation=gen, reason="transient", not_before=backoff, now=T0)
    assert attempt.next_action_at() == backoff

    gen = attempt.lease(owner="w", now=backoff, lease_seconds=LEASE)
    attempt.mark_dispatch(generation=gen, now=backoff)
    assert attempt.next_action_at() == backoff + timedelta(seconds=LEASE)

    attempt.record_result(generation=gen, status=AttemptStatus.OUTCOME_UNKNOWN, now=backoff)
    assert attempt.next_action_at() is None  # outcome_unknown is never requeued


def test_lease_history_keeps_only_the_latest_entries(replay: Replay) -> None:
    attempt = new_attempt(replay)
    now: datetime = T0
    cycles = MAX_LEASE_HISTORY + 4
    for _ in range(cycles):
        gen = attempt.lease(owner=f"worker-{_}", now=now, lease_seconds=LEASE)
        attempt.requeue(generation=gen, reason="transient", not_before=now, now=now)
        now += timedelta(seconds=1)

    assert attempt.lease_generation == cycles
    assert len(attempt.lease_history) == MAX_LEASE_HISTORY
    assert [h["generation"] for h in attempt.lease_history] == list(
        range(cycles - MAX_LEASE_HISTORY + 1, cycles + 1)
    )
    assert attempt.predispatch_leases == cycles


def test_every_transition_is_one_appended_event(replay: Replay) -> None:
    attempt, gen = dispatched(replay)
    attempt.record_result(generation=gen, status=AttemptStatus.SUCCEEDED, now=T0, receipt=RECEIPT)

    names = [type(e).__name__ for e in replay.events_of(attempt)]

    assert names == ["Queued", "Leased", "DispatchStarted", "ResultRecorded"]
    assert attempt.revision == 4


def test_replay_rebuilds_a_long_history_exactly(replay: Replay) -> None:
    attempt, first, second = _re_leased(replay)
    attempt.observe_late_result(generation=first, kind="succeeded", now=AFTER_EXPIRY)
    attempt.mark_dispatch(generation=second, now=AFTER_EXPIRY)
    attempt.record_result(
        generation=second,
        status=AttemptStatus.OUTCOME_UNKNOWN,
        now=AFTER_EXPIRY,
        reason_code="timeout",
    )
    attempt.resolve(
        outcome=Resolution.EFFECT_APPLIED,
        reason="r",
        resolved_by="admin-1",
        now=LATER,
        receipt=RECEIPT,
    )

    rebuilt = replay.rebuild(attempt)

    assert rebuilt.status is AttemptStatus.MANUALLY_RESOLVED
    assert rebuilt.delivery_mode is DeliveryMode.PROVIDER_IDEMPOTENCY
    assert rebuilt.revision == attempt.revision == 8
    assert rebuilt.lease_history == attempt.lease_history


def test_holder_may_record_failed_safe_without_a_marker_while_nothing_was_dispatched(
    replay: Replay,
) -> None:
    attempt, gen = leased(replay)

    attempt.record_result(
        generation=gen, status=AttemptStatus.FAILED_SAFE, now=T0, reason_code="recheck_failed"
    )

    assert attempt.status is AttemptStatus.FAILED_SAFE
