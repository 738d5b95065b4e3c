"""The chain head is hashed when asked for, not on every replay (a performance
fix found by bench/bench_embedded.py: hashing every event of every stream read
was a fifth of a lifecycle's CPU time)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.store import LedgerStore
from domain.audit import verify_chain
from domain.base import LedgerEvent
from domain.directory import DirectoryKind, DirectoryRecord, actor_record_id
from domain.services.directory import put_record
from tests.support.clocks import FixedClock

CLOCK = FixedClock(datetime(2026, 11, 29, 12, 0, tzinfo=UTC))


def test_replay_hashes_nothing_until_the_chain_head_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = LedgerStore(MemoryLedgerRecorder())
    record_id = actor_record_id("alice")
    for enabled in (True, False, True):
        put_record(
            store, CLOCK, kind=DirectoryKind.ACTOR, record_id=record_id, values={"enabled": enabled}
        )
    real_hash = LedgerEvent.hash
    calls: list[Any] = []

    def counted(self: LedgerEvent) -> str:
        calls.append(self)
        return real_hash(self)

    monkeypatch.setattr(LedgerEvent, "hash", counted)
    record = store.get(DirectoryRecord, record_id)
    assert record is not None and record.version == 3
    assert calls == []  # reading state hashes nothing

    events = store.events(record_id)
    head = record.chain_head
    assert head == real_hash(events[-1])  # type: ignore[arg-type]
    assert len(calls) == 1
    assert record.chain_head == head and len(calls) == 1  # computed once

    assert verify_chain(record_id, events, (3, head)).ok  # type: ignore[arg-type]
    put_record(
        store, CLOCK, kind=DirectoryKind.ACTOR, record_id=record_id, values={"enabled": False}
    )
    newest = store.events(record_id)[-1]
    assert newest.prev_hash == head  # type: ignore[attr-defined]


def test_replayed_aggregates_compare_equal_by_chain_head() -> None:
    store = LedgerStore(MemoryLedgerRecorder())
    record_id = actor_record_id("bob")
    put_record(
        store, CLOCK, kind=DirectoryKind.ACTOR, record_id=record_id, values={"enabled": True}
    )
    first = store.get(DirectoryRecord, record_id)
    second = store.get(DirectoryRecord, record_id)
    assert first is not None and second is not None
    first.chain_head  # noqa: B018 - one computed, one not
    assert vars(first) == vars(second)
