"""The status row folded from stored data equals, byte for byte, the row of the
aggregate's own fold, and declines (None) whatever it does not know."""

from __future__ import annotations

import dataclasses
import inspect
import random
from datetime import timedelta
from typing import Any

import pytest
from eventsourcing.domain import decorated_funcs
from eventsourcing.persistence import StoredEvent

from adapters.mapping import make_library_mapper
from adapters.rebuild import canonical, fold_stored_status
from adapters.store import make_mapper
from domain.attempt import AttemptStatus, ExecutionAttempt, Resolution
from domain.directory import DeliveryMode
from domain.errors import LedgerError
from domain.spec import format_utc
from projections.status import status_record
from projections.status_fold import EVENT_TYPES, REQUIRED
from tests.support.factories import T0

MAPPER = make_mapper()


def new_attempt(rng: random.Random, n: int) -> ExecutionAttempt:
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


def random_step(attempt: ExecutionAttempt, rng: random.Random, now: Any) -> None:
    """One command the aggregate may accept or refuse."""
    generation = attempt.lease_generation
    receipt = rng.choice([None, {}, {"provider_id": "task-9", "applied_at": format_utc(now)}])
    step = rng.choices(
        [
            "lease",
            "requeue",
            "dispatch",
            "result",
            "fail_safe",
            "unknown",
            "reconcile",
            "late",
            "resolve",
        ],
        [4, 1, 4, 4, 1, 2, 2, 2, 2],
    )[0]
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
            status=rng.choice([AttemptStatus.SUCCEEDED, AttemptStatus.FAILED_SAFE]),
            now=now,
            reason_code=rng.choice([None, "looked_up"]),
            receipt=receipt,
        )
    elif step == "late":
        attempt.observe_late_result(
            generation=max(0, generation - 1),
            now=now,
            kind=rng.choice(["succeeded", "failed_safe"]),
        )
    else:
        attempt.resolve(
            outcome=rng.choice(list(Resolution)),
            reason="checked by hand",
            resolved_by="admin",
            now=now,
            receipt=receipt,
        )


def stored(events: list[Any]) -> list[StoredEvent]:
    return [MAPPER.to_stored_event(e) for e in events]


def aggregate_row(events: list[StoredEvent]) -> bytes:
    aggregate: Any = None
    for event in events:
        aggregate = MAPPER.to_domain_event(event).mutate(aggregate)
    return canonical(status_record(aggregate))


def test_random_histories_fold_to_the_aggregates_rows_byte_for_byte() -> None:
    rng = random.Random(20261201)
    seen_types: set[str] = set()
    seen_statuses: set[str] = set()
    for n in range(200):
        attempt = new_attempt(rng, n)
        history = attempt.collect_events()
        now = T0
        for _ in range(rng.randint(0, 12)):
            now += timedelta(seconds=rng.choice([1, 1, 1, 30, 61, 120]))
            try:
                random_step(attempt, rng, now)
            except LedgerError:
                continue
            history += attempt.collect_events()
            rows = stored(history)
            row = fold_stored_status(attempt.id, rows)
            assert row is not None, [type(e).__qualname__ for e in history]
            assert canonical(row) == aggregate_row(rows)
            assert canonical(row) == canonical(status_record(attempt))
            seen_statuses.add(attempt.status.value)
        seen_types |= {type(e).__qualname__ for e in history}
    # the walk reached every event type and every status
    assert seen_types == set(EVENT_TYPES.values())
    assert seen_statuses == {s.value for s in AttemptStatus}


def test_the_fold_knows_every_event_of_the_aggregate_and_its_required_arguments() -> None:
    events = {
        name
        for name in dir(ExecutionAttempt)
        if isinstance(getattr(ExecutionAttempt, name), type)
        and issubclass(getattr(ExecutionAttempt, name), ExecutionAttempt.Event)
        and name not in ("Event", "Created")
    }
    assert events == set(REQUIRED)
    for name, required in REQUIRED.items():
        event_class = getattr(ExecutionAttempt, name)
        method = decorated_funcs.get(event_class, ExecutionAttempt.__init__)
        params = inspect.signature(method).parameters.values()
        wanted = {p.name for p in params if p.name != "self" and p.default is p.empty}
        if name == "Queued":
            wanted.add("originator_topic")
        assert required == wanted, name
        fields = {f.name for f in dataclasses.fields(event_class)}
        assert required <= fields


def queued_and_leased() -> tuple[ExecutionAttempt, list[StoredEvent]]:
    attempt = new_attempt(random.Random(1), 1)
    attempt.lease(owner="worker-1", now=T0, lease_seconds=60)
    return attempt, stored(attempt.collect_events())


def replaced(event: StoredEvent, **changes: Any) -> StoredEvent:
    return dataclasses.replace(event, **changes)


@pytest.mark.parametrize(
    "spoil",
    [
        "library form",
        "moved state",
        "unknown topic",
        "version gap",
        "trailing space",
        "unknown mode",
        "missing argument",
        "bad authorized",
        "bad time",
        "not json",
    ],
)
def test_the_fold_declines_what_it_does_not_know(spoil: str) -> None:
    """None, so the rebuild folds that stream through the aggregate (whose answer,
    a row or an error, is then the one given)."""
    attempt, rows = queued_and_leased()
    assert fold_stored_status(attempt.id, rows) is not None
    first, second = rows
    state = first.state.decode()
    if spoil == "library form":
        rows = [make_library_mapper().to_stored_event(MAPPER.to_domain_event(first)), second]
    elif spoil == "moved state":
        rows = [replaced(first, originator_id="att_other"), second]
    elif spoil == "unknown topic":
        rows = [first, replaced(second, topic="domain.attempt:ExecutionAttempt.Renamed")]
    elif spoil == "version gap":
        rows = [first, replaced(second, originator_version=3)]
    elif spoil == "trailing space":
        rows = [replaced(first, state=first.state + b" "), second]
    elif spoil == "unknown mode":
        rows = [
            replaced(
                first, state=state.replace(attempt.delivery_mode.value, "carrier_pigeon").encode()
            ),
            second,
        ]
    elif spoil == "missing argument":
        rows = [replaced(first, state=state.replace('"actor_id":', '"actor_ix":').encode()), second]
    elif spoil == "bad authorized":
        rows = [
            replaced(
                first,
                state=state.replace('"authorized":null', '"authorized":[["actor:alice","one"]]')
                .replace('["grant:alice:tasks.write",2]', '["grant:alice:tasks.write","two"]')
                .encode(),
            ),
            second,
        ]
        assert rows[0].state != first.state
    elif spoil == "bad time":
        rows = [
            first,
            replaced(
                second,
                state=second.state.decode().replace('"timestamp":"', '"timestamp":"x').encode(),
            ),
        ]
    else:
        rows = [first, replaced(second, state=b'{"data":{"at":')]
    assert fold_stored_status(attempt.id, rows) is None
