"""Random attempt histories: an ``ExecutionAttempt`` driven by random commands
(each one the aggregate may accept or refuse), for the tests that hold the
status fold to the aggregate and the rebuild to the live projector."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from domain.attempt import AttemptStatus, ExecutionAttempt, Resolution
from domain.directory import DeliveryMode
from domain.errors import LedgerError
from domain.spec import format_utc
from tests.support.factories import T0


def new_attempt(rng: random.Random, n: int) -> ExecutionAttempt:
    """A queued attempt ``att_<n>``; half of them carry the later optional fields."""
    extra: dict[str, Any] = {}
    if rng.random() < 0.5:
        extra["authorized"] = [["actor:alice", 1], ["grant:alice:tasks.write", 2]]
        extra["spec"] = {"content": {"title": "Buy milk"}, "sources": ["message:1"]}
        extra["trace_context"] = {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"}
    return ExecutionAttempt(
        attempt_id=f"att_{n:04d}",
        proposal_id=f"prop_{n}",
        proposal_version=rng.randint(1, 3),
        payload_hash="sha256:" + "1" * 64,
        view_hash="sha256:" + "2" * 64,
        idempotency_key=f"idk_{n}",
        capability="fake.provider_idempotency",
        executor_build="sha256:" + "3" * 64,
        delivery_mode=rng.choice(list(DeliveryMode)).value,
        actor_id=f"actor{n % 3}",
        identity_binding_id="ib",
        channel_binding_id="cb",
        conversation_key="conv",
        permission="tasks.write",
        target_id=rng.choice(["task:42", None]),
        target_revision=rng.choice(["r7", None]),
        at=format_utc(T0),
        **extra,
    )


STEPS = [
    "lease",
    "requeue",
    "dispatch",
    "result",
    "fail_safe",
    "unknown",
    "reconcile",
    "late",
    "resolve",
    "look",
    "restore",
    "acknowledge",
]
WEIGHTS: dict[str, list[int]] = {
    # mostly what the state allows next, sometimes what it refuses
    "queued": [8, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
    "leased": [1, 1, 8, 1, 1, 1, 1, 1, 1, 1, 1, 1],
    "dispatched": [1, 1, 1, 8, 1, 2, 2, 1, 1, 1, 1, 1],
    "outcome_unknown": [1, 1, 1, 1, 1, 1, 6, 2, 4, 1, 1, 1],
    "settled": [1, 1, 1, 1, 1, 1, 1, 4, 3, 2, 1, 3],
    "watched": [1, 1, 1, 1, 1, 1, 1, 1, 1, 30, 1, 2],
}
WATCH = (60, 600, 3600)


def _state(attempt: ExecutionAttempt) -> str:
    if attempt.status is AttemptStatus.QUEUED:
        return "queued"
    if attempt.status is AttemptStatus.EXECUTING:
        dispatched = attempt.dispatched_generation == attempt.lease_generation
        return "dispatched" if dispatched else "leased"
    if attempt.status is AttemptStatus.OUTCOME_UNKNOWN:
        return "outcome_unknown"
    if attempt.watch_due_at() is not None:
        return "watched"
    return "settled"


def random_step(attempt: ExecutionAttempt, rng: random.Random, now: datetime) -> None:
    """One command the aggregate may accept or refuse (a ``LedgerError``)."""
    generation = attempt.lease_generation
    receipt = rng.choice([None, {}, {"provider_id": "task-9", "applied_at": format_utc(now)}])
    step = rng.choices(STEPS, WEIGHTS[_state(attempt)])[0]
    if step == "lease":
        attempt.lease(owner=f"worker-{rng.randint(1, 3)}", now=now, lease_seconds=60)
    elif step == "requeue":
        attempt.requeue(
            generation=rng.choice([generation, None]),
            reason="gave_up",
            not_before=now + timedelta(seconds=5),
            now=now,
        )
    elif step == "dispatch":
        deadline = rng.choice([None, now + timedelta(seconds=30)])
        attempt.mark_dispatch(
            generation=generation, now=now, deadline=deadline, settle_seconds=rng.choice([0.0, 2.5])
        )
    elif step == "result":
        attempt.record_result(
            generation=generation,
            now=now,
            receipt=receipt,
            status=rng.choice(
                [AttemptStatus.SUCCEEDED, AttemptStatus.FAILED_SAFE, AttemptStatus.OUTCOME_UNKNOWN]
            ),
            reason_code=rng.choice([None, "provider_error"]),
        )
    elif step == "fail_safe":
        attempt.fail_safe(
            reason_code="grant_revoked", now=now, generation=rng.choice([generation, None])
        )
    elif step == "unknown":
        attempt.record_unknown(
            reason_code="lease_expired_after_dispatch",
            now=now,
            generation=rng.choice([generation, None]),
        )
    elif step == "reconcile":
        attempt.record_reconciled(
            status=rng.choice(
                [AttemptStatus.SUCCEEDED, AttemptStatus.FAILED_SAFE, AttemptStatus.FAILED_SAFE]
            ),
            now=now,
            reason_code=rng.choice([None, "looked_up"]),
            receipt=receipt,
            watch=rng.choice([(), WATCH, WATCH]),
        )
    elif step == "late":
        attempt.observe_late_result(
            generation=max(0, generation - 1),
            now=now,
            kind=rng.choice(["succeeded", "failed_safe"]),
        )
    elif step == "restore":
        attempt.mark_possibly_dispatched(
            restore_id=f"rst_{rng.randint(1, 2)}", now=now, settle_seconds=rng.choice([0.0, 30.0])
        )
    elif step == "look":
        due = attempt.watch_due_at()
        attempt.look_again(
            verdict=rng.choice(["applied", "not_applied", "not_applied", "unknown"]),
            now=now if due is None or rng.random() < 0.2 else max(now, due),
        )
    elif step == "acknowledge":
        attempt.acknowledge(acknowledged_by="admin", note="seen, no effect", now=now)
    else:
        attempt.resolve(
            outcome=rng.choice(list(Resolution)),
            reason="checked by hand",
            resolved_by="admin",
            now=now,
            receipt=receipt,
            watch=rng.choice([(), WATCH, WATCH]),
        )


def random_history(rng: random.Random, n: int, max_steps: int = 12) -> Iterator[ExecutionAttempt]:
    """Attempt ``n`` after its creation and after every accepted command (a
    refused one appends nothing and is skipped), its new events pending: the
    caller collects or commits them before asking for the next."""
    attempt = new_attempt(rng, n)
    yield attempt
    now = T0
    for _ in range(rng.randint(0, max_steps)):
        now += timedelta(seconds=rng.choice([1, 1, 1, 30, 61, 120]))
        try:
            random_step(attempt, rng, now)
        except LedgerError:
            continue
        yield attempt
