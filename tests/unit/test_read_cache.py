"""The read cache: bounded, immutable, no missing records, newest wins, thread-safe."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest

from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.store import LedgerStore
from domain.directory import DirectoryKind, actor_record_id
from domain.errors import ConcurrencyConflict
from domain.ports import Commit, ReadCheck
from domain.proposal import Proposal
from domain.services.directory import put_record
from domain.services.read_cache import (
    DirectorySnapshot,
    ReadCache,
    commit,
    read_directory,
    read_proposal,
)
from tests.support.clocks import FixedClock

CLOCK = FixedClock(datetime(2026, 11, 29, 12, 0, tzinfo=UTC))
SPEC = {"capability": "fake.provider_idempotency", "content": {"title": "x"}}


def snapshot(record_id: str, version: int, **values: object) -> DirectorySnapshot:
    return DirectorySnapshot.of(record_id, version, values)


def test_the_least_recently_used_entry_goes_first_beyond_the_bound() -> None:
    cache = ReadCache(3)
    for name in "abc":
        cache.put(name, snapshot(name, 1))
    assert cache.get("a") is not None  # a is now the most recently used
    cache.put("d", snapshot("d", 1))
    assert len(cache) == 3
    assert cache.get("b") is None
    assert {n for n in "acd" if cache.get(n) is not None} == {"a", "c", "d"}


def test_a_newer_version_is_never_replaced_by_an_older_one() -> None:
    cache = ReadCache()
    cache.put("a", snapshot("a", 3, enabled=True))
    cache.put("a", snapshot("a", 2, enabled=False))
    held = cache.get("a")
    assert held is not None and held.version == 3


def test_a_snapshot_cannot_be_changed() -> None:
    values = {"enabled": True}
    held = DirectorySnapshot.of("actor:a", 1, values)
    values["enabled"] = False  # the snapshot copied it
    assert held.flag("enabled")
    with pytest.raises(TypeError):
        held.values["enabled"] = False  # type: ignore[index]
    with pytest.raises(AttributeError):
        held.version = 2  # type: ignore[misc]


def test_a_missing_record_is_not_cached() -> None:
    store = LedgerStore(MemoryLedgerRecorder())
    cache = ReadCache()
    assert read_directory(store, cache, actor_record_id("nobody")) == (None, False)
    assert len(cache) == 0
    assert read_proposal(store, cache, "prop_missing") is None
    assert len(cache) == 0


def test_a_size_of_zero_caches_nothing() -> None:
    store = LedgerStore(MemoryLedgerRecorder())
    put_record(
        store,
        CLOCK,
        kind=DirectoryKind.ACTOR,
        record_id=actor_record_id("a"),
        values={"enabled": True},
    )
    cache = ReadCache(0)
    found, from_cache = read_directory(store, cache, actor_record_id("a"))
    assert found is not None and not from_cache
    assert len(cache) == 0 and cache.get(actor_record_id("a")) is None


def test_each_cached_proposal_read_is_a_new_aggregate_of_its_own() -> None:
    store = LedgerStore(MemoryLedgerRecorder())
    cache = ReadCache()
    proposal = Proposal(
        proposal_id="prop_1",
        actor_id="alice",
        spec=SPEC,
        payload_hash="p",
        view_hash="v",
        renderer_build="r",
        at="2026-11-29T12:00:00Z",
    )
    commit(store, cache, Commit(aggregates=[proposal]))  # written through
    first = read_proposal(store, cache, "prop_1")
    assert first is not None and cache.hits == 1
    first.cancel(version=1, at="2026-11-29T12:01:00Z")  # changed, never committed
    second = read_proposal(store, cache, "prop_1")
    assert second is not None and second is not first
    assert second.versions[1]["status"] == "presented" and second.version == 1


def test_a_conflicting_commit_drops_every_entry_it_read_or_wrote() -> None:
    store = LedgerStore(MemoryLedgerRecorder())
    cache = ReadCache()
    record_id = actor_record_id("a")
    put_record(
        store, CLOCK, kind=DirectoryKind.ACTOR, record_id=record_id, values={"enabled": True}
    )
    read_directory(store, cache, record_id)
    put_record(
        store, CLOCK, kind=DirectoryKind.ACTOR, record_id=record_id, values={"enabled": False}
    )  # elsewhere: the cache holds version 1
    proposal = Proposal(
        proposal_id="prop_2",
        actor_id="a",
        spec=SPEC,
        payload_hash="p",
        view_hash="v",
        renderer_build="r",
        at="2026-11-29T12:00:00Z",
    )
    with pytest.raises(ConcurrencyConflict):
        commit(store, cache, Commit(aggregates=[proposal], read_set=[ReadCheck(record_id, 1)]))
    assert cache.get(record_id) is None and cache.get("prop_2") is None
    found, from_cache = read_directory(store, cache, record_id)
    assert found is not None and found.version == 2 and not from_cache


def test_many_threads_keep_the_bound_and_every_entry_whole() -> None:
    cache = ReadCache(16)
    errors: list[BaseException] = []

    def hammer(n: int) -> None:
        try:
            for i in range(2000):
                key = f"s{(i * 7 + n) % 40}"
                cache.put(key, snapshot(key, i % 5, n=n))
                held = cache.get(f"s{i % 40}")
                if isinstance(held, DirectorySnapshot):
                    assert held.id == f"s{i % 40}"
                if i % 97 == 0:
                    cache.forget([key])
                assert len(cache) <= 16
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(cache) <= 16


def test_an_empty_cache_is_still_used_where_a_cache_is_optional() -> None:
    """Regression: ``cache or default`` skipped an empty cache (it has a length),
    so a fresh process never filled its cache."""
    store = LedgerStore(MemoryLedgerRecorder())
    cache = ReadCache()
    assert cache and len(cache) == 0
    put_record(
        store,
        CLOCK,
        kind=DirectoryKind.ACTOR,
        record_id=actor_record_id("a"),
        values={"enabled": True},
        cache=cache,
    )
    held = cache.get(actor_record_id("a"))
    assert isinstance(held, DirectorySnapshot) and held.flag("enabled")


def test_every_context_of_a_ledger_shares_its_one_read_cache() -> None:
    from adapters.bootstrap import build_ledger
    from adapters.settings import Settings

    ledger = build_ledger(Settings(store="memory", read_cache_entries=64))
    try:
        first, second = ledger.context, ledger.context
        assert first.cache is second.cache is ledger.read_cache
        assert first.cache.max_entries == 64
        put_record(
            ledger.store,
            CLOCK,
            kind=DirectoryKind.ACTOR,
            record_id=actor_record_id("a"),
            values={"enabled": True},
            cache=ledger.read_cache,
        )
        assert second.cache.get(actor_record_id("a")) is not None
        off = build_ledger(Settings(store="memory", read_cache_entries=0))
        assert not off.context.cache.enabled
        off.close()
    finally:
        ledger.close()


def test_a_proposal_leaves_the_cache_once_its_version_is_decided() -> None:
    """Present and approve read a presented version; once it is claimed (or
    declined, canceled...) nothing reads it from the cache, so it does not stay."""
    store = LedgerStore(MemoryLedgerRecorder())
    cache = ReadCache()
    proposal = Proposal(
        proposal_id="prop_3",
        actor_id="alice",
        spec=SPEC,
        payload_hash="p",
        view_hash="v",
        renderer_build="r",
        at="2026-11-29T12:00:00Z",
    )
    commit(store, cache, Commit(aggregates=[proposal]))
    assert cache.get("prop_3") is not None
    assert proposal.cancel(version=1, at="2026-11-29T12:01:00Z")
    commit(store, cache, Commit(aggregates=[proposal]))
    assert cache.get("prop_3") is None
