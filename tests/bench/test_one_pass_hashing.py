"""An event is encoded once: its hash, the next event's link, the head index and
its stored state all come from the same canonical bytes (a performance fix
found by profiling a lifecycle: RFC 8785 encoding was 18% of its time and the
chain hash of the previous event, encoded again on every append, 14%)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import rfc8785
from eventsourcing.persistence import StoredEvent

from adapters.mapping import StateMismatch, make_library_mapper
from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.store import LedgerStore, make_mapper
from domain import base, canonical
from domain.audit import verify_chain
from domain.base import LedgerEvent, event_hash
from domain.directory import DirectoryKind, DirectoryRecord, actor_record_id
from domain.services.directory import put_record
from tests.support.clocks import FixedClock

CLOCK = FixedClock(datetime(2026, 11, 29, 12, 0, tzinfo=UTC))


@pytest.fixture
def encodings(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every canonical encoding of an event body, counted."""
    calls: list[Any] = []
    real = canonical.canonical_json

    def counted(value: Any) -> bytes:
        if isinstance(value, dict) and "stream" in value:
            calls.append(value)
        return real(value)

    monkeypatch.setattr(base, "canonical_json", counted)
    yield calls


def actor_store(versions: int) -> tuple[LedgerStore, str]:
    store = LedgerStore(MemoryLedgerRecorder())
    record_id = actor_record_id("alice")
    for n in range(versions):
        put_record(
            store,
            CLOCK,
            kind=DirectoryKind.ACTOR,
            record_id=record_id,
            values={"enabled": n % 2 == 0},
        )
    return store, record_id


def test_the_stored_state_is_the_canonical_body_the_hash_is_over() -> None:
    store, record_id = actor_store(2)
    for stored in store.read_stream(record_id):
        event = store.mapper.to_domain_event(stored)
        assert isinstance(event, LedgerEvent)
        assert bytes(stored.state) == rfc8785.dumps(event.body())
        assert event.hash() == "sha256:" + hashlib.sha256(stored.state).hexdigest()
        assert event.hash() == event_hash(
            stored.originator_id,
            stored.originator_version,
            type(event).__qualname__,
            event.timestamp,
            event.data(),
        )
    (head,) = store.stream_heads()
    assert head.head == store.events(record_id)[-1].hash()  # type: ignore[attr-defined]


def test_each_appended_event_is_encoded_once(encodings: list[Any]) -> None:
    store, record_id = actor_store(1)
    assert len(encodings) == 1  # created, hashed for the head index and stored: once
    for n in range(3):
        put_record(
            store,
            CLOCK,
            kind=DirectoryKind.ACTOR,
            record_id=record_id,
            values={"enabled": n % 2 == 1},
        )
    # Each append links to the stored predecessor without encoding it again.
    assert len(encodings) == 4
    record = store.get(DirectoryRecord, record_id)
    assert record is not None and record.version == 4
    record.chain_head  # noqa: B018 - hashed from the stored bytes
    events = store.events(record_id)
    assert verify_chain(record_id, events).ok  # type: ignore[arg-type]
    assert len(encodings) == 4


def test_before_one_pass_hashing_every_append_encoded_its_predecessor_again(
    encodings: list[Any],
) -> None:
    """The previous path (the library's stored form), kept for the benchmark."""
    store = LedgerStore(MemoryLedgerRecorder(), mapper=make_library_mapper())
    record_id = actor_record_id("alice")
    for n in range(4):
        put_record(
            store,
            CLOCK,
            kind=DirectoryKind.ACTOR,
            record_id=record_id,
            values={"enabled": n % 2 == 0},
        )
    assert len(encodings) == 7  # four events, three predecessors encoded again


def test_events_in_the_library_form_still_read_and_hash_from_their_fields() -> None:
    library_store = LedgerStore(MemoryLedgerRecorder(), mapper=make_library_mapper())
    record_id = actor_record_id("carol")
    put_record(
        library_store,
        CLOCK,
        kind=DirectoryKind.ACTOR,
        record_id=record_id,
        values={"enabled": True},
    )
    (stored,) = library_store.read_stream(record_id)
    assert stored.state.startswith(b'{"timestamp":')
    old = library_store.mapper.to_domain_event(stored)
    event = make_mapper().to_domain_event(stored)
    assert vars(event) == vars(old)
    assert event.hash() == old.hash()  # type: ignore[attr-defined]


def moved(stored: StoredEvent, version: int) -> StoredEvent:
    return StoredEvent(
        originator_id=stored.originator_id,
        originator_version=version,
        topic=stored.topic,
        state=stored.state,
    )


def test_a_state_moved_to_another_row_is_that_rows_event_hashed_from_its_fields() -> None:
    store, record_id = actor_store(2)
    first, second = store.read_stream(record_id)
    mapper = make_mapper()
    swapped = [mapper.to_domain_event(moved(second, 1)), mapper.to_domain_event(moved(first, 2))]
    assert [e.originator_version for e in swapped] == [1, 2]
    assert swapped[0].hash() != "sha256:" + hashlib.sha256(second.state).hexdigest()
    assert not verify_chain(record_id, swapped).ok


@pytest.mark.parametrize(
    "state",
    [
        b'{"data":{}}',
        b'{"data":[],"stream":"actor:alice","timestamp":"2026-11-29T12:00:00Z","type":"x",'
        b'"version":1}',
        b'{"data":{"originator_id":"x"},"stream":"actor:alice",'
        b'"timestamp":"2026-11-29T12:00:00Z","type":"x","version":1}',
        b'{"data":{},"stream":"actor:alice","timestamp":5,"type":"x","version":1}',
    ],
)
def test_a_state_that_starts_like_a_body_but_is_not_one_does_not_decode(state: bytes) -> None:
    store, record_id = actor_store(1)
    (stored,) = store.read_stream(record_id)
    bad = StoredEvent(
        originator_id=stored.originator_id, originator_version=1, topic=stored.topic, state=state
    )
    with pytest.raises(StateMismatch):
        make_mapper().to_domain_event(bad)


@pytest.mark.parametrize("state", [b'{"data":\xff}', b'{"data":{"a":1},"stream":', b'{"data":{}}'])
def test_the_audit_reports_a_broken_body_as_undecodable_at_its_version(state: bytes) -> None:
    store, record_id = actor_store(2)
    first, second = store.read_stream(record_id)
    recorder = MemoryLedgerRecorder()
    broken = StoredEvent(
        originator_id=record_id, originator_version=2, topic=second.topic, state=state
    )
    recorder.insert_events([first, broken])
    events, undecodable = LedgerStore(recorder).audit_events(record_id)
    assert len(events) == 1 and undecodable == 2


def test_an_equivalent_respelling_of_a_stored_body_breaks_the_chain() -> None:
    store, record_id = actor_store(2)
    first, second = store.read_stream(record_id)
    assert b'"kind":"actor"' in first.state
    respelled = StoredEvent(
        originator_id=record_id,
        originator_version=1,
        topic=first.topic,
        state=first.state.replace(b'"kind":"actor"', b'"kind":"\\u0061ctor"'),
    )
    recorder = MemoryLedgerRecorder()
    recorder.insert_events([respelled, second])
    events, undecodable = LedgerStore(recorder).audit_events(record_id)
    assert undecodable is None and events[0].data()["kind"] == "actor"  # same meaning
    check = verify_chain(record_id, events)
    assert (check.ok, check.first_bad_version, check.reason) == (False, 2, "broken_link")
