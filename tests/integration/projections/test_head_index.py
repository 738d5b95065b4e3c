"""The head index: moved by every commit on every backend, and filled in once for
streams written before it existed (`ledger audit reindex`)."""

from __future__ import annotations

from datetime import UTC, datetime

from adapters.audit.digests import verify_ledger
from adapters.store import LedgerStore
from domain.digest import build_digest
from domain.directory import DirectoryRecord
from domain.ports import Commit
from domain.spec import format_utc
from tests.support.stores import store_before_head_index

AT = "2026-01-01T00:00:00Z"


def record(store: LedgerStore, rid: str, changes: int) -> DirectoryRecord:
    found = store.get(DirectoryRecord, rid) or DirectoryRecord(
        record_id=rid, kind="actor", values={"n": 0}, at=AT
    )
    for _ in range(changes):
        found.update({"n": found.values["n"] + 1}, AT)
    store.commit(Commit(aggregates=[found]))
    return found


def test_every_commit_moves_the_heads_of_its_streams_atomically(store: LedgerStore) -> None:
    a = record(store, "actor:a", 2)
    b = DirectoryRecord(record_id="actor:b", kind="actor", values={}, at=AT)
    a.update({"n": 99}, AT)
    store.commit(Commit(aggregates=[a, b]))  # two streams in one commit
    heads = {h.stream_id: h for h in store.stream_heads()}
    assert (heads["actor:a"].version, heads["actor:a"].head) == (4, a.chain_head)
    assert (heads["actor:b"].version, heads["actor:b"].head) == (1, b.chain_head)
    assert [h.stream_id for h in store.stream_heads()] == sorted(heads)


def test_reindex_fills_in_streams_written_without_the_index(store: LedgerStore) -> None:
    legacy = store_before_head_index(store.recorder)
    record(legacy, "actor:old", 2)
    record(legacy, "target:old", 0)
    record(store, "actor:new", 1)
    assert [h.stream_id for h in store.stream_heads()] == ["actor:new"]

    seen, added, skipped = store.index_missing_heads()
    assert (seen, added, skipped) == (3, 2, [])
    digest = build_digest("t", format_utc(datetime.now(UTC)), store.stream_heads())
    assert [h.stream_id for h in digest.heads] == ["actor:new", "actor:old", "target:old"]
    assert verify_ledger(store, digest).ok
    assert store.index_missing_heads() == (3, 0, [])  # idempotent, never overwrites
