"""Old events read into a newer event class: the library's ``class_version`` and
``upcast_vX_vY`` apply to canonical states as to the library's own form, and
an upcast event keeps the hash it was written with (its chain still verifies)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import get_topic

from adapters.mapping import LedgerMapper, StateMismatch, make_library_mapper
from domain.audit import verify_chain
from domain.base import LedgerEvent, event_body, genesis_hash
from domain.canonical import canonical_json

STREAM = "note:1"
WRITTEN = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


class Noted(LedgerEvent):
    """Version 2 of a test event: version 1 had no ``priority``."""

    class_version = 2
    title: str
    priority: int

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["priority"] = 0


@dataclass(frozen=True)
class Foreign:
    """An event of another library: a header like a ledger event's, no chain."""

    originator_id: str
    originator_version: int
    timestamp: datetime


def written_at_v1() -> bytes:
    """The canonical state a version 1 event was stored with."""
    data = {"prev_hash": genesis_hash(STREAM), "title": "buy milk"}
    return canonical_json(event_body(STREAM, 1, "Noted", WRITTEN, data))


def stored(state: bytes, topic: str | None = None) -> StoredEvent:
    return StoredEvent(
        originator_id=STREAM,
        originator_version=1,
        topic=topic or get_topic(Noted),
        state=state,
    )


def test_a_canonical_state_of_an_older_class_version_is_upcast_and_keeps_its_hash() -> None:
    state = written_at_v1()
    event = LedgerMapper().to_domain_event(stored(state))
    assert isinstance(event, Noted)
    assert (event.title, event.priority, event.timestamp) == ("buy milk", 0, WRITTEN)
    # the hash is the one written (over the version 1 bytes), so the chain holds
    assert event.hash() == "sha256:" + hashlib.sha256(state).hexdigest()
    assert verify_chain(STREAM, [event]).ok


def test_the_library_form_of_an_older_class_version_is_upcast_too() -> None:
    v1 = {"timestamp": WRITTEN, "prev_hash": genesis_hash(STREAM), "title": "buy milk"}
    state = make_library_mapper().transcoder.encode(v1)
    event = LedgerMapper().to_domain_event(stored(state))
    assert isinstance(event, Noted) and event.priority == 0


def test_a_newer_class_version_is_written_in_the_library_form_with_its_version() -> None:
    event = Noted(
        originator_id=STREAM,
        originator_version=1,
        timestamp=WRITTEN,
        prev_hash=genesis_hash(STREAM),
        title="buy milk",
        priority=3,
    )
    mapper = LedgerMapper()
    written = mapper.to_stored_event(event)
    assert not written.state.startswith(b'{"data":')
    again = mapper.to_domain_event(written)
    assert isinstance(again, Noted) and again.priority == 3  # not upcast a second time


def test_a_canonical_state_of_a_class_that_is_no_ledger_event_does_not_decode() -> None:
    state = written_at_v1()
    with pytest.raises(StateMismatch):
        LedgerMapper().to_domain_event(stored(state, topic=get_topic(Foreign)))
