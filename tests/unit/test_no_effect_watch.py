"""I12 in the model: a lookup's "not applied" (and an admin's no_effect of a lookup
build) is watched on a bounded plan; only a due look is taken; a look that finds
the effect flags it; the webhook and the setting that go with it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from adapters.settings import SettingsError, load_settings
from domain.attempt import AttemptStatus, ExecutionAttempt, Resolution
from domain.directory import DeliveryMode
from domain.errors import IllegalTransition
from domain.notifications import NotificationType
from projections.labels import event_label
from projections.webhooks import attempt_facts
from tests.support.aggregates import AFTER_EXPIRY, dispatched
from tests.support.replay import Replay

PLAN = (60, 600, 3600, 86400)


def not_applied(replay: Replay, mode: DeliveryMode = DeliveryMode.CORRELATION_LOOKUP) -> Any:
    attempt, _ = dispatched(replay, mode)
    attempt.record_reconciled(
        status=AttemptStatus.FAILED_SAFE,
        now=AFTER_EXPIRY,
        reason_code="reconciled_not_applied",
        watch=PLAN,
    )
    return attempt


def test_a_lookups_not_applied_is_watched_on_its_plan(replay: Replay) -> None:
    attempt = not_applied(replay)
    assert attempt.status is AttemptStatus.FAILED_SAFE
    assert attempt.watch == list(PLAN)
    for step, offset in enumerate(PLAN, 1):
        due = AFTER_EXPIRY + timedelta(seconds=offset)
        assert attempt.next_action_at() == due
        with pytest.raises(IllegalTransition):
            attempt.look_again(verdict="not_applied", now=due - timedelta(milliseconds=1))
        attempt.look_again(verdict="not_applied", now=due)
        assert attempt.watch_looks == step
        assert attempt.status is AttemptStatus.FAILED_SAFE
    assert attempt.next_action_at() is None  # bounded: the watch ends
    with pytest.raises(IllegalTransition):
        attempt.look_again(verdict="applied", now=AFTER_EXPIRY + timedelta(days=30))
    replay.check()


def test_a_look_that_finds_the_effect_flags_it(replay: Replay) -> None:
    attempt = not_applied(replay)
    attempt.look_again(verdict="applied", now=AFTER_EXPIRY + timedelta(seconds=60))
    assert attempt.status is AttemptStatus.EFFECT_AFTER_NO_EFFECT
    assert attempt.next_action_at() is None
    events = replay.events_of(attempt)
    flagged = events[-1]
    assert type(flagged).__qualname__ == "ExecutionAttempt.EffectAfterNoEffect"
    assert flagged.data()["source"] == "watch" and flagged.data()["previous"] == "failed_safe"
    replay.check()


@pytest.mark.parametrize(
    "mode", [DeliveryMode.PROVIDER_IDEMPOTENCY, DeliveryMode.OPERATOR_RECONCILIATION_ONLY]
)
def test_only_a_lookup_build_is_watched(replay: Replay, mode: DeliveryMode) -> None:
    attempt, _ = dispatched(replay, mode)
    attempt.record_unknown(reason_code="operator_reconciliation_required", now=AFTER_EXPIRY)
    attempt.resolve(
        outcome=Resolution.NO_EFFECT, reason="x", resolved_by="ops", now=AFTER_EXPIRY, watch=PLAN
    )
    assert attempt.watch is None and attempt.next_action_at() is None


def test_an_admins_no_effect_of_a_lookup_build_is_watched(replay: Replay) -> None:
    attempt, _ = dispatched(replay, DeliveryMode.CORRELATION_LOOKUP)
    attempt.record_reconciled(
        status=AttemptStatus.OUTCOME_UNKNOWN, now=AFTER_EXPIRY, reason_code="lookup_failed"
    )
    assert attempt.watch is None  # outcome_unknown: an admin decides, nothing watched yet
    attempt.resolve(
        outcome=Resolution.NO_EFFECT, reason="x", resolved_by="ops", now=AFTER_EXPIRY, watch=PLAN
    )
    assert attempt.next_action_at() == AFTER_EXPIRY + timedelta(seconds=60)
    replay.check()


def test_effect_applied_and_a_resolution_after_a_flag_are_not_watched(replay: Replay) -> None:
    attempt = not_applied(replay)
    attempt.look_again(verdict="applied", now=AFTER_EXPIRY + timedelta(seconds=60))
    # the admin has seen the effect flagged: whatever the verdict, nothing to watch
    attempt.resolve(
        outcome=Resolution.NO_EFFECT,
        reason="rolled back at the provider",
        resolved_by="ops",
        now=AFTER_EXPIRY + timedelta(seconds=90),
        watch=PLAN,
    )
    assert attempt.watch is None and attempt.next_action_at() is None


def test_a_result_stored_before_the_watch_existed_replays_unwatched(replay: Replay) -> None:
    attempt = not_applied(replay)
    events = replay.events_of(attempt)
    marker = events[-1]
    state = {k: v for k, v in vars(marker).items() if k != "watch"}
    legacy = object.__new__(type(marker))
    legacy.__dict__.update(state)
    rebuilt: Any = None
    for event in [*events[:-1], legacy]:
        rebuilt = event.mutate(rebuilt)
    assert isinstance(rebuilt, ExecutionAttempt)
    assert rebuilt.status is AttemptStatus.FAILED_SAFE
    assert rebuilt.watch is None and rebuilt.next_action_at() is None


def test_the_flag_has_its_webhook_and_the_looks_their_labels(replay: Replay) -> None:
    attempt = not_applied(replay)
    attempt.look_again(verdict="not_applied", now=AFTER_EXPIRY + timedelta(seconds=60))
    attempt.look_again(verdict="applied", now=AFTER_EXPIRY + timedelta(seconds=600))
    events = replay.events_of(attempt)
    kinds = [f.notification.type for f in attempt_facts(events)]
    assert kinds[-2:] == [
        NotificationType.ATTEMPT_FAILED_SAFE,
        NotificationType.ATTEMPT_EFFECT_AFTER_NO_EFFECT,
    ]
    rows = [
        {"type": type(e).__qualname__.rsplit(".", 1)[-1], "version": v, "data": e.data()}
        for v, e in enumerate(events, 1)
    ]
    assert event_label(rows[-2]).endswith("looked again (look 1: not_applied)")
    assert event_label(rows[-1]).endswith("(found by the watch)")


@pytest.mark.parametrize(
    ("value", "plan"),
    [("60,600,3600,86400", (60, 600, 3600, 86400)), ("30", (30,)), (" 5, 50 ", (5, 50))],
)
def test_the_watch_plan_is_a_setting(
    monkeypatch: pytest.MonkeyPatch, value: str, plan: tuple[int, ...]
) -> None:
    monkeypatch.setenv("LEDGER_NO_EFFECT_WATCH_SECONDS", value)
    assert load_settings().no_effect_watch_seconds == plan


def test_the_default_plan_is_1_min_10_min_1_h_24_h(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEDGER_NO_EFFECT_WATCH_SECONDS", raising=False)
    assert load_settings().no_effect_watch_seconds == (60, 600, 3600, 86400)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "must name 1 to 10 looks"),
        ("60,abc", "whole seconds"),
        ("600,60", "increasing order"),
        ("0", "1..2592000 seconds"),
        ("9999999", "1..2592000 seconds"),
        (",".join(str(n) for n in range(1, 12)), "must name 1 to 10 looks"),
    ],
)
def test_a_bad_watch_plan_is_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, value: str, message: str
) -> None:
    monkeypatch.setenv("LEDGER_NO_EFFECT_WATCH_SECONDS", value)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    text = str(caught.value)
    assert "LEDGER_NO_EFFECT_WATCH_SECONDS" in text and message in text
    assert "\n" not in text
