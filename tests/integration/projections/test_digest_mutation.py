"""Audit digests catch what a per-stream chain alone cannot (design.md 5.11).

After a digest is taken, stored items are tampered with directly, as someone
with write access to the table or file would: the newest events of a proposal,
a directory record and an attempt are edited, deleted, reordered, inserted or
cut off; a whole stream is deleted; a stream is rewritten with a consistent
new chain. Verification must name the stream every time, on SQLite and on the
DynamoDB emulator; an untouched ledger that grew since must verify.

The DynamoDB tables here have 16 head buckets (TEST_LAYOUT) instead of a new table's 512:
every digest and verification reads the head index whole, a query per bucket,
and the tampering is found by its stream whatever bucket holds it (the other
layout tests run a new table's whole layout).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from adapters.audit.digests import verify_consistency, verify_ledger
from adapters.store import LedgerStore
from domain.digest import Digest, build_digest
from domain.directory import DirectoryKind, actor_record_id
from domain.spec import format_utc
from tests.support.raw_views import Row, read_rows, replace_rows, shift_year
from tests.support.worlds.execution import ExecutionWorld

Mutation = Callable[[LedgerStore, str, list[Row]], list[Row]]


def _edit(rows: list[Row], k: int) -> list[Row]:
    version, topic, state = rows[k]
    data = json.loads(state)
    shift_year(data)
    rows[k] = (version, topic, json.dumps(data, separators=(",", ":")).encode())
    return rows


def edit_newest(store: LedgerStore, sid: str, rows: list[Row]) -> list[Row]:
    return _edit(rows, len(rows) - 1)


def edit_middle(store: LedgerStore, sid: str, rows: list[Row]) -> list[Row]:
    return _edit(rows, len(rows) // 2)


def delete_middle(store: LedgerStore, sid: str, rows: list[Row]) -> list[Row]:
    del rows[len(rows) // 2]  # leaves a gap in the versions
    return rows


def reorder_newest(store: LedgerStore, sid: str, rows: list[Row]) -> list[Row]:
    (va, ta, sa), (vb, tb, sb) = rows[-2], rows[-1]
    rows[-2], rows[-1] = (va, tb, sb), (vb, ta, sa)
    return rows


def insert_middle(store: LedgerStore, sid: str, rows: list[Row]) -> list[Row]:
    k = len(rows) // 2
    rows.insert(k, rows[k])
    return [(i + 1, topic, state) for i, (_, topic, state) in enumerate(rows)]


def truncate_newest_1(store: LedgerStore, sid: str, rows: list[Row]) -> list[Row]:
    return rows[:-1]


def truncate_newest_2(store: LedgerStore, sid: str, rows: list[Row]) -> list[Row]:
    return rows[:-2]


def delete_stream(store: LedgerStore, sid: str, rows: list[Row]) -> list[Row]:
    return []


def consistent_rewrite(store: LedgerStore, sid: str, rows: list[Row]) -> list[Row]:
    """Every event re-timed by a second and re-chained: each link holds again."""
    events, _ = store.audit_events(sid)
    forged: list[Row] = []
    previous = None
    for event in events:
        changes = {"timestamp": event.timestamp + timedelta(seconds=1)}
        if previous is not None:
            changes["prev_hash"] = previous.hash()  # type: ignore[assignment]
        new = dataclasses.replace(event, **changes)  # type: ignore[type-var]
        stored = store.mapper.to_stored_event(new)
        forged.append((stored.originator_version, stored.topic, bytes(stored.state)))
        previous = new
    return forged


MUTATIONS: dict[str, tuple[Mutation, str]] = {
    "edit the newest event": (edit_newest, "rewritten"),
    "edit a middle event": (edit_middle, "rewritten"),
    "delete a middle event": (delete_middle, "rewritten"),
    "reorder the newest two": (reorder_newest, "reordered"),
    "insert an event": (insert_middle, "rewritten"),
    "truncate the newest event": (truncate_newest_1, "truncated"),
    "truncate the newest two": (truncate_newest_2, "truncated"),
    "delete the whole stream": (delete_stream, "deleted"),
    "rewrite with a consistent new chain": (consistent_rewrite, "rewritten"),
}
KINDS = ("proposal", "directory record", "attempt")


@pytest.fixture
def store(engine_store: LedgerStore) -> LedgerStore:
    """Tampering needs a real storage engine: SQLite and the DynamoDB emulator."""
    return engine_store


def executed_world(pworld: ExecutionWorld) -> dict[str, str]:
    """An executed attempt, its proposal, and a directory record with four events."""
    attempt_id = pworld.approved("provider_idempotency")
    pworld.worker().process(attempt_id)
    for enabled in (False, True, False):
        pworld.put(DirectoryKind.ACTOR, actor_record_id("bob"), enabled=enabled)
    events, _ = pworld.store.audit_events(attempt_id)
    return {
        "attempt": attempt_id,
        "proposal": str(events[0].data()["proposal_id"]),
        "directory record": actor_record_id("bob"),
    }


def digest_of(store: LedgerStore) -> Digest:
    return build_digest("test", format_utc(datetime.now(UTC)), store.stream_heads())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mutation", list(MUTATIONS))
def test_every_tampering_after_a_digest_is_found_and_named(
    pworld: ExecutionWorld, store: LedgerStore, kind: str, mutation: str
) -> None:
    streams = executed_world(pworld)
    digest = digest_of(store)
    assert verify_ledger(store, digest).ok
    sid = streams[kind]
    rows = read_rows(store, sid)
    assert len(rows) >= 3, rows
    change, expected = MUTATIONS[mutation]
    replace_rows(store, sid, change(store, sid, list(rows)))

    verdict = verify_ledger(store, digest)
    assert not verdict.ok
    assert verdict.finding is not None
    assert (verdict.finding.stream_id, verdict.finding.reason) == (sid, expected), verdict.message
    assert f"stream {sid} was {expected}" in verdict.message


def test_an_untouched_ledger_that_grew_verifies_and_the_newer_digest_extends(
    pworld: ExecutionWorld, store: LedgerStore
) -> None:
    streams = executed_world(pworld)
    digest = digest_of(store)
    more = pworld.approved("provider_idempotency")
    pworld.worker().process(more)
    pworld.put(DirectoryKind.ACTOR, actor_record_id("bob"), enabled=True)
    assert verify_ledger(store, digest).ok
    later = digest_of(store)
    assert later.stream_count > digest.stream_count
    assert verify_consistency(store, digest, later).ok
    assert verify_ledger(store, later).ok
    # ...and the same newer digest no longer holds once the older part is cut.
    replace_rows(store, streams["attempt"], read_rows(store, streams["attempt"])[:-1])
    verdict = verify_ledger(store, later)
    assert not verdict.ok and verdict.finding is not None
    assert verdict.finding.stream_id == streams["attempt"]
