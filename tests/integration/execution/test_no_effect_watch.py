"""Issue 25.3: a late effect is never left recorded as "no effect" (I12).

The case of the issue, with default settings: a ``correlation_lookup`` build that
declares no settle window, whose provider applies the effect some time after
the client gave up, and whose answer is lost (the connection is gone). On
main, the lookup after the lease answered "not applied", the attempt ended
``failed_safe`` and nothing looked again. Now the build gets a default settle
window (a provider that applies within it is found by the first lookup), and
a "not applied" is watched: recovery, driven by the due-work index, looks
again 1 min, 10 min, 1 h and 24 h later and flags ``effect_after_no_effect``
when the effect is there. The clock is injected; on memory, SQLite and the
emulator.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from domain.errors import ExecutorOutcomeUncertain
from domain.ports import ExecutionReceipt, ExecutionRequest
from domain.services.recovery import run_recovery
from domain.services.resolution import resolve
from tests.support.worlds.execution import MODES, ExecutionWorld

HORIZON = timedelta(days=3650)


class ClientGivesUp:
    """The provider takes the request, the client gives up at once with no answer
    (an ambiguous call), and the provider applies the effect ``delay`` seconds
    after it received the request: its answer reaches nobody."""

    def __init__(self, inner: Any, world: ExecutionWorld, delay: float) -> None:
        self.inner = inner
        self.capability = inner.capability
        self.build_digest = inner.build_digest
        self.delivery_mode = inner.delivery_mode
        self.settle_seconds = inner.settle_seconds  # the default: None
        self.world = world
        self.delay = delay
        self.lands_at: datetime | None = None
        self.request: ExecutionRequest | None = None

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        self.world.effects.record_call(self.capability, request.idempotency_key)
        self.request = request
        self.lands_at = self.world.clock.now() + timedelta(seconds=self.delay)
        raise ExecutorOutcomeUncertain()

    def land_if_due(self) -> bool:
        if self.lands_at is None or self.request is None or self.world.clock.now() < self.lands_at:
            return False
        key = self.request.idempotency_key
        self.world.effects.apply(key, {"provider_id": "task_" + key[4:12]})
        self.lands_at = None
        return True


def next_due(xworld: ExecutionWorld) -> datetime | None:
    """The earliest entry of the due-work index (the query recovery runs)."""
    page = xworld.store.due_work(xworld.clock.now() + HORIZON, 1)
    return page.items[0].next_action_at if page.items else None


def run_until_quiet(xworld: ExecutionWorld, late: ClientGivesUp | None = None) -> list[str]:
    """Move the clock from due entry to due entry (and to the provider's landing),
    running recovery at each: what recovery did, tick by tick."""
    outcomes: list[str] = []
    for _ in range(50):
        due = next_due(xworld)
        moments = [m for m in (due, late.lands_at if late else None) if m is not None]
        if not moments:
            return outcomes
        moment = min(moments)
        if moment > xworld.clock.now():
            xworld.clock.advance((moment - xworld.clock.now()).total_seconds())
        if late is not None and late.land_if_due():
            outcomes.append("provider applied")
            continue
        report = run_recovery(xworld.worker())
        outcomes.extend(sorted(report.outcomes.elements()))
    raise AssertionError(f"recovery never went quiet: {outcomes[-10:]}")


def gives_up(xworld: ExecutionWorld, delay: float) -> ClientGivesUp:
    wrapped = xworld.swap_executor(
        MODES["correlation_lookup"], lambda inner: ClientGivesUp(inner, xworld, delay)
    )
    assert isinstance(wrapped, ClientGivesUp)
    return wrapped


def statuses(xworld: ExecutionWorld, attempt_id: str) -> list[str]:
    found = []
    for event in xworld.store.events(attempt_id):  # type: ignore[attr-defined]
        data = event.data()
        kind = type(event).__qualname__.rsplit(".", 1)[-1]
        if kind == "ResultRecorded":
            found.append(data["status"])
        elif kind in ("EffectAfterNoEffect", "LookedAgain", "ManuallyResolved"):
            found.append(kind)
    return found


@pytest.mark.parametrize(
    ("delay", "final", "looks"),
    [
        (7, "succeeded", 0),  # the provider: inside the default settle window
        (100, "succeeded", 0),  # still inside it (the fake's call is given 58 s)
        (300, "effect_after_no_effect", 1),  # found by the 10 min look
        (7200, "effect_after_no_effect", 3),  # by the 24 h look
        (86_000, "effect_after_no_effect", 3),  # just inside the last look
    ],
)
def test_a_late_effect_is_never_left_as_no_effect(
    xworld: ExecutionWorld, delay: int, final: str, looks: int
) -> None:
    attempt_id = xworld.approved("correlation_lookup")
    late = gives_up(xworld, delay)

    xworld.worker().process(attempt_id)  # dispatched; the client gave up
    outcomes = run_until_quiet(xworld, late)

    attempt = xworld.attempt(attempt_id)
    key = attempt.idempotency_key
    assert xworld.effects.effect_count(key) == 1
    assert attempt.status == final, (statuses(xworld, attempt_id), outcomes)
    assert statuses(xworld, attempt_id).count("LookedAgain") == looks
    assert xworld.calls_for(attempt_id) == 1  # the watch only looks up (I6)
    assert next_due(xworld) is None  # nothing left to watch: the plan is bounded
    if final == "effect_after_no_effect":
        assert "effect_after_no_effect" in outcomes  # found by recovery's query


def test_the_watch_follows_its_schedule_and_then_ends(xworld: ExecutionWorld) -> None:
    """No effect ever lands: looks at 1 min, 10 min, 1 h and 24 h after the
    failed_safe, each a due entry written with the transition, then nothing."""
    attempt_id = xworld.approved("correlation_lookup")
    gives_up(xworld, 10**9)
    xworld.worker().process(attempt_id)
    run_until_quiet(xworld)

    attempt = xworld.attempt(attempt_id)
    assert attempt.status == "failed_safe"
    assert attempt.watch == [60, 600, 3600, 86400]
    assert attempt.watch_from is not None
    looks = [
        e
        for e in xworld.store.events(attempt_id)  # type: ignore[attr-defined]
        if type(e).__qualname__.endswith("LookedAgain")
    ]
    settled = datetime.fromisoformat(attempt.watch_from.replace("Z", "+00:00"))
    assert [
        (datetime.fromisoformat(e.data()["at"].replace("Z", "+00:00")) - settled).total_seconds()
        for e in looks
    ] == [60, 600, 3600, 86400]
    assert [e.data()["verdict"] for e in looks] == ["not_applied"] * 4
    assert next_due(xworld) is None
    # at lease expiry (before the settle window: proves nothing), after it, 4 looks
    assert xworld.effects.lookups.count(attempt.idempotency_key) == 6


def test_a_watch_look_is_taken_once_however_often_recovery_runs(xworld: ExecutionWorld) -> None:
    """Duplicate recovery ticks at the same moment take one look per step (I8)."""
    attempt_id = xworld.approved("correlation_lookup")
    gives_up(xworld, 10**9)
    xworld.worker().process(attempt_id)
    for _ in range(4):  # lease expiry, the settle window's end, two looks
        due = next_due(xworld)
        assert due is not None
        xworld.clock.advance(max(0.0, (due - xworld.clock.now()).total_seconds()))
        for _ in range(3):
            run_recovery(xworld.worker())
    assert statuses(xworld, attempt_id) == ["failed_safe", "LookedAgain", "LookedAgain"]


def test_an_admins_no_effect_is_watched_too(
    xworld: ExecutionWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lookup fails, the attempt is outcome_unknown, an admin resolves no_effect;
    the provider applies later: the watch flags it."""
    attempt_id = xworld.approved("correlation_lookup")
    late = gives_up(xworld, 4000)
    xworld.worker().process(attempt_id)

    real_first = xworld.effects.first

    def lookup_fails(key: str) -> Any:
        raise OSError("provider lookup unavailable")

    monkeypatch.setattr(xworld.effects, "first", lookup_fails)
    due = next_due(xworld)
    assert due is not None
    xworld.clock.advance((due - xworld.clock.now()).total_seconds())
    run_recovery(xworld.worker())
    unknown = xworld.attempt(attempt_id)
    assert unknown.status == "outcome_unknown"
    monkeypatch.setattr(xworld.effects, "first", real_first)

    resolve(
        xworld.ctx,
        attempt_id=attempt_id,
        expected_revision=unknown.revision,
        outcome="no_effect",
        reason="nothing in the provider console yet",
        resolved_by="ops",
    )
    run_until_quiet(xworld, late)

    attempt = xworld.attempt(attempt_id)
    assert attempt.status == "effect_after_no_effect"
    assert xworld.calls_for(attempt_id) == 1


@pytest.mark.parametrize("mode", ["operator_reconciliation_only", "provider_idempotency"])
def test_a_no_effect_without_a_lookup_has_nothing_to_watch(
    xworld: ExecutionWorld, mode: str
) -> None:
    """Only a lookup can look again: an operator-only or provider-idempotent attempt
    resolved no_effect rests on the admin's word; no due entry, no lookup."""
    attempt_id = xworld.approved(mode, simulate="timeout_after_effect")
    xworld.worker(max_dispatches=1).process(attempt_id)
    if xworld.attempt(attempt_id).status != "outcome_unknown":
        xworld.recover_after_lease(xworld.worker(max_dispatches=1))
    unknown = xworld.attempt(attempt_id)
    assert unknown.status == "outcome_unknown"
    resolved = resolve(
        xworld.ctx,
        attempt_id=attempt_id,
        expected_revision=unknown.revision,
        outcome="no_effect",
        reason="checked by hand",
        resolved_by="ops",
    )
    assert resolved.watch is None
    assert next_due(xworld) is None
    assert xworld.effects.lookups == []
