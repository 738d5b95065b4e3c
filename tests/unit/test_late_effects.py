"""Issue 14.1 in the model: the settle window, the late-effect state, the call bound."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from domain.attempt import AttemptStatus, ExecutionAttempt, Resolution
from domain.directory import DeliveryMode
from domain.errors import NotOutcomeUnknown
from domain.services.deadline import DeadlineExceeded, InlineCalls, ThreadedCalls
from domain.services.execution import settle_seconds
from domain.services.worker_policy import MAX_SETTLE_SECONDS, SETTLE_FLOOR_SECONDS
from tests.support.aggregates import AFTER_EXPIRY, LEASE, leased, outcome_unknown
from tests.support.factories import T0
from tests.support.replay import Replay

DEADLINE = T0 + timedelta(seconds=LEASE - 2)


def dispatched_with_window(replay: Replay, settle: float) -> ExecutionAttempt:
    attempt, gen = leased(replay, DeliveryMode.CORRELATION_LOOKUP)
    attempt.mark_dispatch(
        generation=gen, now=T0 + timedelta(seconds=1), deadline=DEADLINE, settle_seconds=settle
    )
    return attempt


def test_not_applied_is_no_proof_before_deadline_plus_settle(replay: Replay) -> None:
    attempt = dispatched_with_window(replay, 120)
    settles = DEADLINE + timedelta(seconds=120)
    assert attempt.lookup_trusted_after() == settles
    assert not attempt.not_applied_is_proof(AFTER_EXPIRY)
    assert not attempt.not_applied_is_proof(settles - timedelta(milliseconds=1))
    assert attempt.not_applied_is_proof(settles)
    # recovery is not due before a lookup could prove anything
    assert attempt.next_action_at() == settles


def test_without_a_window_recovery_is_due_at_lease_expiry(replay: Replay) -> None:
    attempt = dispatched_with_window(replay, 0)
    assert attempt.next_action_at() == T0 + timedelta(seconds=LEASE)
    assert attempt.not_applied_is_proof(AFTER_EXPIRY)


def test_a_late_success_after_failed_safe_moves_to_the_attention_state(replay: Replay) -> None:
    attempt = dispatched_with_window(replay, 0)
    attempt.record_reconciled(
        status=AttemptStatus.FAILED_SAFE, now=AFTER_EXPIRY, reason_code="reconciled_not_applied"
    )
    attempt.observe_late_result(generation=1, kind="failed_safe", now=AFTER_EXPIRY)
    assert attempt.status is AttemptStatus.FAILED_SAFE  # agreeing news changes nothing
    attempt.observe_late_result(generation=1, kind="succeeded", now=AFTER_EXPIRY)
    assert attempt.status is AttemptStatus.EFFECT_AFTER_NO_EFFECT
    assert attempt.is_terminal and attempt.next_action_at() is None
    attempt.resolve(
        outcome=Resolution.EFFECT_APPLIED,
        reason="seen at the provider",
        resolved_by="ops",
        now=AFTER_EXPIRY,
    )
    assert attempt.status is AttemptStatus.MANUALLY_RESOLVED


def test_a_late_success_after_no_effect_resolution_is_flagged(replay: Replay) -> None:
    attempt = outcome_unknown(replay)
    attempt.resolve(
        outcome=Resolution.NO_EFFECT, reason="nothing there", resolved_by="ops", now=AFTER_EXPIRY
    )
    attempt.observe_late_result(generation=1, kind="succeeded", now=AFTER_EXPIRY)
    assert attempt.status is AttemptStatus.EFFECT_AFTER_NO_EFFECT


def test_a_late_success_after_effect_applied_is_only_observed(replay: Replay) -> None:
    attempt = outcome_unknown(replay)
    attempt.resolve(
        outcome=Resolution.EFFECT_APPLIED, reason="there", resolved_by="ops", now=AFTER_EXPIRY
    )
    attempt.observe_late_result(generation=1, kind="succeeded", now=AFTER_EXPIRY)
    assert attempt.status is AttemptStatus.MANUALLY_RESOLVED
    with pytest.raises(NotOutcomeUnknown):
        attempt.resolve(
            outcome=Resolution.NO_EFFECT, reason="x", resolved_by="ops", now=AFTER_EXPIRY
        )


def test_a_dispatch_marker_stored_before_the_window_existed_replays() -> None:
    """Events stored without ``deadline``/``settles_at`` keep their hash and replay
    with no window (the rule that was in force when they were written)."""
    attempt, gen = leased(Replay(), DeliveryMode.CORRELATION_LOOKUP)
    attempt.mark_dispatch(generation=gen, now=T0)
    events = attempt.collect_events()
    marker = events[-1]
    state = {k: v for k, v in vars(marker).items() if k not in ("deadline", "settles_at")}
    legacy = object.__new__(type(marker))
    legacy.__dict__.update(state)
    rebuilt: Any = None
    for event in [*events[:-1], legacy]:
        rebuilt = event.mutate(rebuilt)
    assert rebuilt.dispatched and rebuilt.settles_at is None
    assert rebuilt.next_action_at() == T0 + timedelta(seconds=LEASE)
    assert "deadline" not in legacy.data()


@pytest.mark.parametrize(
    ("declared", "window"),
    [
        (None, 0.0),
        (0, 0.0),
        (30, 30.0),
        (2.5, 2.5),
        (10**9, MAX_SETTLE_SECONDS),
        (-1, MAX_SETTLE_SECONDS),
        (float("nan"), MAX_SETTLE_SECONDS),
        ("30", MAX_SETTLE_SECONDS),
        (True, MAX_SETTLE_SECONDS),
    ],
)
def test_settle_window_is_read_defensively(declared: object, window: float) -> None:
    class Executor:
        capability = "x"

    executor = Executor()
    if declared is not None:
        executor.settle_seconds = declared  # type: ignore[attr-defined]
    assert settle_seconds(executor) == window  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("mode", "declared", "call_seconds", "window"),
    [
        # a lookup build that declares nothing: at least its call, at least the floor
        (DeliveryMode.CORRELATION_LOOKUP, None, 2.0, SETTLE_FLOOR_SECONDS),
        (DeliveryMode.CORRELATION_LOOKUP, None, 58.0, 58.0),
        (DeliveryMode.CORRELATION_LOOKUP, None, float("nan"), SETTLE_FLOOR_SECONDS),
        (DeliveryMode.CORRELATION_LOOKUP, None, 10.0**9, MAX_SETTLE_SECONDS),
        # 0 only when declared so
        (DeliveryMode.CORRELATION_LOOKUP, 0, 58.0, 0.0),
        (DeliveryMode.CORRELATION_LOOKUP, 5, 58.0, 5.0),
        # the other modes never wait on a lookup: no default window
        (DeliveryMode.PROVIDER_IDEMPOTENCY, None, 58.0, 0.0),
        (DeliveryMode.OPERATOR_RECONCILIATION_ONLY, None, 58.0, 0.0),
    ],
)
def test_a_lookup_build_that_declares_no_window_gets_a_safe_default(
    mode: DeliveryMode, declared: object, call_seconds: float, window: float
) -> None:
    class Executor:
        capability = "x"
        delivery_mode = mode

    executor = Executor()
    executor.settle_seconds = declared  # type: ignore[attr-defined]
    assert settle_seconds(executor, call_seconds) == window  # type: ignore[arg-type]


def test_the_fake_lookup_build_waits_for_the_default_window(replay: Replay) -> None:
    """The worker records the default window on the marker: "not applied" right after
    the deadline proves nothing; it does after the window."""
    from adapters.executors.fake import EffectLedger, FakeExecutor

    fake = FakeExecutor("fake.correlation_lookup", EffectLedger())
    call = (DEADLINE - (T0 + timedelta(seconds=1))).total_seconds()
    attempt = dispatched_with_window(replay, settle_seconds(fake, call))
    settles = DEADLINE + timedelta(seconds=max(SETTLE_FLOOR_SECONDS, call))
    assert attempt.lookup_trusted_after() == settles
    assert not attempt.not_applied_is_proof(DEADLINE + timedelta(seconds=1))


def test_threaded_calls_answer_in_time_and_pass_errors_through() -> None:
    calls = ThreadedCalls()
    assert calls.run(lambda: 42, 5, lambda *_: None) == 42

    def boom() -> None:
        raise ValueError("provider error")

    with pytest.raises(ValueError, match="provider error"):
        calls.run(boom, 5, lambda *_: None)
    assert InlineCalls().run(lambda: 7, 0, lambda *_: None) == 7


def test_threaded_calls_abandon_at_the_deadline_and_report_the_late_answer() -> None:
    calls = ThreadedCalls()
    release = threading.Event()
    answers: list[tuple[object, BaseException | None]] = []

    def slow() -> str:
        assert release.wait(30)
        return "landed"

    with pytest.raises(DeadlineExceeded):
        calls.run(slow, 0.01, lambda result, error: answers.append((result, error)))
    assert calls.abandoned() == 1 and answers == []
    release.set()
    assert calls.wait_abandoned(30)
    assert answers == [("landed", None)]
