"""The status fold: the one way every status row is made (by the live projector
from decoded events, by the rebuild from the stored bytes), held byte for byte
to the aggregate's own fields, and refusing what the aggregate refuses."""

from __future__ import annotations

import dataclasses
import inspect
import random
from collections.abc import Callable
from typing import Any

import pytest
from eventsourcing.domain import decorated_funcs
from eventsourcing.persistence import StoredEvent

from adapters.bootstrap import backend_for, build_ledger
from adapters.mapping import make_library_mapper
from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.rebuild import canonical, fold_stored_status, rebuild
from adapters.settings import load_settings
from adapters.store import LedgerStore, make_mapper
from api.http.schemas.attempts import AttemptOut
from domain.attempt import AttemptStatus, ExecutionAttempt
from projections.projector import Projector
from projections.status import (
    ROW_ONLY_FIELDS,
    STATUS_VIEW,
    VIEW_FIELDS,
    AttemptStatusView,
    public_view,
    status_record,
)
from projections.status_fold import (
    CHANGES,
    EVENT_TYPES,
    REQUIRED,
    UnreadableHistory,
    fold_events,
    read_status,
)
from tests.support.attempt_histories import new_attempt, random_history
from tests.support.factories import T0

MAPPER = make_mapper()


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
        history: list[Any] = []
        for attempt in random_history(rng, n):
            history += attempt.collect_events()
            rows = stored(history)
            from_bytes = fold_stored_status(attempt.id, rows)
            decoded = fold_events(attempt.id, [MAPPER.to_domain_event(r) for r in rows])
            assert from_bytes is not None and decoded is not None
            assert canonical(from_bytes) == aggregate_row(rows)
            assert canonical(from_bytes) == canonical(status_record(attempt))
            assert canonical(decoded) == canonical(from_bytes)
            seen_statuses.add(attempt.status.value)
        seen_types |= {type(e).__qualname__ for e in history}
    # the walk reached every event type and every status
    assert seen_types == set(EVENT_TYPES.values())
    assert seen_statuses == {s.value for s in AttemptStatus}


def test_every_row_shows_exactly_the_fields_of_the_response_model() -> None:
    """The model lists the view's fields once: the fold writes no field it does
    not list, in its order, and every row it makes is a valid response."""
    assert AttemptOut.model_fields.keys() == AttemptStatusView.model_fields.keys()
    rng = random.Random(7)
    for n in range(60):
        history: list[Any] = []
        for attempt in random_history(rng, n):
            history += attempt.collect_events()
            row = fold_stored_status(attempt.id, stored(history))
            assert row is not None
            names = list(row.data)
            assert names[-len(ROW_ONLY_FIELDS) :] == list(ROW_ONLY_FIELDS)
            shown = names[: -len(ROW_ONLY_FIELDS)]
            assert shown == [f for f in VIEW_FIELDS if f in shown]
            out = AttemptOut.model_validate(public_view(row.data))
            assert out.model_dump(exclude_none=True) == public_view(row.data)


def test_the_fold_knows_every_event_of_the_aggregate_and_its_required_arguments() -> None:
    events = {
        name
        for name in dir(ExecutionAttempt)
        if isinstance(getattr(ExecutionAttempt, name), type)
        and issubclass(getattr(ExecutionAttempt, name), ExecutionAttempt.Event)
        and name not in ("Event", "Created")
    }
    assert events == set(CHANGES) == set(REQUIRED)
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


def edited(event: StoredEvent, old: str, new: str) -> StoredEvent:
    state = event.state.decode()
    assert old in state
    return replaced(event, state=state.replace(old, new).encode())


def spoiled(spoil: str, attempt: ExecutionAttempt, rows: list[StoredEvent]) -> list[StoredEvent]:
    first, second = rows
    if spoil == "library form":
        return [make_library_mapper().to_stored_event(MAPPER.to_domain_event(first)), second]
    if spoil == "moved state":  # the first state of another attempt, in this row
        other = stored(new_attempt(random.Random(2), 2).collect_events())[0]
        return [replaced(other, originator_id=attempt.id), second]
    if spoil == "unknown topic":
        return [first, replaced(second, topic="domain.attempt:ExecutionAttempt.Renamed")]
    if spoil == "version gap":
        return [first, replaced(second, originator_version=3)]
    if spoil == "trailing space":
        return [replaced(first, state=first.state + b" "), second]
    if spoil == "bad time":
        return [first, edited(second, '"timestamp":"', '"timestamp":"x')]
    if spoil == "not json":
        return [first, replaced(second, state=b'{"data":{"at":')]
    if spoil == "unknown mode":
        return [edited(first, attempt.delivery_mode.value, "carrier_pigeon"), second]
    if spoil == "missing argument":
        return [edited(first, '"actor_id":', '"actor_ix":'), second]
    if spoil == "unknown status":
        attempt.mark_dispatch(generation=1, now=T0)
        attempt.record_result(generation=1, status=AttemptStatus.SUCCEEDED, now=T0)
        rest = stored(attempt.collect_events())
        return [first, second, rest[0], edited(rest[1], '"succeeded"', '"carrier_pigeon"')]
    if spoil == "second queued":
        return [first, replaced(first, originator_version=2)]
    assert spoil == "bad authorized"
    state = first.state.decode()
    if '"authorized":null' in state:
        return [edited(first, '"authorized":null', '"authorized":[["actor:alice","one"]]'), second]
    return [
        edited(first, '["grant:alice:tasks.write",2]', '["grant:alice:tasks.write","x"]'),
        second,
    ]


def answer(produce: Callable[[], Any]) -> tuple[str, Any]:
    """A row's bytes, or the error's type and message."""
    try:
        return "row", canonical(produce())
    except Exception as exc:
        return type(exc).__name__, str(exc)


def live_and_rebuilt(attempt_id: str, rows: list[StoredEvent]) -> tuple[Any, Any]:
    """What the live projector and the rebuild make of the stream ``rows``."""
    store = LedgerStore(MemoryLedgerRecorder())
    store.recorder.insert_events(rows)
    live_views = backend_for(store.recorder).views
    live = Projector(store, live_views)
    ledger = build_ledger(
        load_settings(store="memory", env="test"), backend=backend_for(store.recorder)
    )

    def projected() -> Any:
        live.project_attempt(attempt_id)
        return live_views.get_view(STATUS_VIEW, attempt_id)

    def rebuilt() -> Any:
        rebuild(ledger, "status")
        assert ledger.views is not None
        return ledger.views.get_view(STATUS_VIEW, attempt_id)

    return answer(projected), answer(rebuilt)


STORED_FORMS = [
    "library form",
    "moved state",
    "unknown topic",
    "version gap",
    "trailing space",
    "bad time",
    "not json",
    "second queued",
]
REFUSED_VALUES = [
    "unknown mode",
    "missing argument",
    "unknown status",
    "bad authorized",
]


@pytest.mark.parametrize("spoil", STORED_FORMS + REFUSED_VALUES)
def test_the_rebuild_and_the_live_projector_give_the_same_answer_for_any_stream(
    spoil: str,
) -> None:
    """Bytes the rebuild cannot take straight are read as the live projector
    reads them; values the aggregate refuses, both refuse with the same message."""
    attempt, rows = queued_and_leased()
    assert fold_stored_status(attempt.id, rows) is not None
    rows = spoiled(spoil, attempt, rows)
    if spoil in STORED_FORMS:
        assert fold_stored_status(attempt.id, rows) is None  # the rebuild reads it as live does
    else:
        with pytest.raises(UnreadableHistory, match=f"^{attempt.id} version "):
            fold_stored_status(attempt.id, rows)
    live, rebuilt = live_and_rebuilt(attempt.id, rows)
    assert live == rebuilt
    store = LedgerStore(MemoryLedgerRecorder())
    store.recorder.insert_events(rows)
    by_aggregate = answer(lambda: status_record(store.get(ExecutionAttempt, attempt.id)))
    if by_aggregate[0] == "row":
        assert live == by_aggregate
    else:  # the aggregate cannot replay it either
        kind, message = live
        assert kind == "UnreadableHistory" and message.startswith(f"{attempt.id} version ")
        assert "carrier_pigeon" not in message and "actor:alice" not in message


def test_a_stream_that_creates_another_aggregate_has_no_status_row() -> None:
    attempt, rows = queued_and_leased()
    first = rows[0]
    rows = [
        edited(
            first,
            '"originator_topic":"domain.attempt:ExecutionAttempt"',
            '"originator_topic":"domain.proposal:Proposal"',
        )
    ]
    assert fold_stored_status(attempt.id, rows) is None
    store = LedgerStore(MemoryLedgerRecorder())
    store.recorder.insert_events(rows)
    assert read_status(store, attempt.id) is None
    assert read_status(store, "att_missing") is None
