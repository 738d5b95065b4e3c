"""The LedgerRecorder extras, through ``LedgerStore``, on every backend.

The library's cases (test_recorder_conformance.py) cover events; this suite
covers what the ledger adds: read-set checks, create-only lookups, due work,
and the all-or-nothing commit that binds them to the events.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from eventsourcing.persistence import StoredEvent

from adapters.dynamodb.items import TTL_ATTRIBUTE, lookup_key
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.recorder import LedgerRecorder
from adapters.store import LedgerStore
from domain.directory import DirectoryKind, DirectoryRecord
from domain.errors import ConcurrencyConflict, LookupConflict
from domain.ports import Commit, DueWork, Lookup, ReadCheck
from domain.proposal import Proposal
from domain.spec import parse_spec, payload_hash
from domain.timeutil import format_utc
from tests.conformance.backends import new_sqlite_recorder, new_stream_id
from tests.support.factories import spec_data
from tests.support.replay import state_of

T0 = datetime(2026, 3, 1, 9, 0, 0, tzinfo=UTC)
AT = format_utc(T0)


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        pytest.param("dynamodb", marks=pytest.mark.dynamodb),
    ]
)
def ledger_recorder(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerRecorder]:
    """A fresh, empty recorder of each backend."""
    if request.param == "memory":
        yield MemoryLedgerRecorder()
    elif request.param == "sqlite":
        recorder = new_sqlite_recorder(tmp_path)
        yield recorder
        recorder.close()
    else:
        try:
            recorder = request.getfixturevalue("dynamodb_recorder")
        except pytest.FixtureLookupError:
            pytest.skip("the dynamodb_recorder fixture is not available")
        yield recorder


@pytest.fixture
def store(ledger_recorder: LedgerRecorder) -> LedgerStore:
    return LedgerStore(ledger_recorder)


def new_record(values: dict[str, object] | None = None) -> DirectoryRecord:
    return DirectoryRecord(
        record_id=f"target:{new_stream_id()}",
        kind=DirectoryKind.TARGET.value,
        values=values or {"revision": "r1"},
        at=AT,
    )


def saved_record(store: LedgerStore, changes: int = 0) -> DirectoryRecord:
    """A record committed at version ``1 + changes``."""
    record = new_record()
    for n in range(changes):
        record.update({"revision": f"r{n + 2}"}, at=AT)
    store.commit(Commit(aggregates=[record]))
    return record


def moved_on(store: LedgerStore, record_id: str) -> None:
    """Another writer appends one event to the record's stream."""
    other = store.get(DirectoryRecord, record_id)
    assert other is not None
    other.update({"revision": f"moved-{other.revision}"}, at=AT)
    store.commit(Commit(aggregates=[other]))


def ms(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def all_due(store: LedgerStore, now: datetime) -> list[DueWork]:
    page = store.due_work(now, limit=1000)
    assert page.cursor is None
    return list(page.items)


# -- events through the store ------------------------------------------------------------


def test_committed_aggregate_reads_back_equal(store: LedgerStore) -> None:
    spec = parse_spec(spec_data(content={"title": "Cr\u00e8me", "n": 2**53 - 1, "x": None}))
    proposal = Proposal(
        proposal_id=f"prop_{new_stream_id()}",
        actor_id="alice",
        spec=spec.canonical_dict(),
        payload_hash=payload_hash(spec),
        view_hash=payload_hash(spec),
        renderer_build="r1",
        at=AT,
    )
    proposal.revise(
        spec=spec.canonical_dict(),
        payload_hash=payload_hash(spec),
        view_hash=payload_hash(spec),
        renderer_build="r2",
        expected_version=1,
        at=AT,
    )

    store.commit(Commit(aggregates=[proposal]))
    loaded = store.get(Proposal, proposal.id)

    assert loaded is not None
    assert state_of(loaded) == state_of(proposal)
    assert store.version_of(proposal.id) == 2


def test_missing_stream_reads_as_none_and_version_zero(store: LedgerStore) -> None:
    stream = new_stream_id()

    assert store.get(DirectoryRecord, stream) is None
    assert store.version_of(stream) == 0
    assert store.read_stream(stream) == []


def test_stream_reads_back_in_version_order_with_exact_bytes(store: LedgerStore) -> None:
    record = new_record()
    for n in range(4):
        record.update({"revision": f"r{n + 2}"}, at=AT)
    stored = [store.mapper.to_stored_event(e) for e in record.collect_events()]
    store.recorder.insert_events(stored)

    read = store.read_stream(record.id)

    assert [s.originator_version for s in read] == [1, 2, 3, 4, 5]
    assert [s.state for s in read] == [s.state for s in stored]
    assert [s.originator_version for s in store.read_stream(record.id, gt=2, lte=4)] == [3, 4]


def test_second_writer_of_the_same_version_gets_a_conflict_naming_the_stream(
    store: LedgerStore,
) -> None:
    record = saved_record(store)
    first = store.get(DirectoryRecord, record.id)
    second = store.get(DirectoryRecord, record.id)
    assert first is not None and second is not None
    first.update({"revision": "first"}, at=AT)
    second.update({"revision": "second"}, at=AT)
    store.commit(Commit(aggregates=[first]))

    with pytest.raises(ConcurrencyConflict) as caught:
        store.commit(Commit(aggregates=[second]))

    assert caught.value.stream_id == record.id
    loaded = store.get(DirectoryRecord, record.id)
    assert loaded is not None and loaded.text("revision") == "first"


def test_creating_an_existing_stream_is_a_conflict(store: LedgerStore) -> None:
    record = saved_record(store)
    again = DirectoryRecord(record_id=record.id, kind="target", values={"revision": "x"}, at=AT)

    with pytest.raises(ConcurrencyConflict):
        store.commit(Commit(aggregates=[again]))

    assert store.version_of(record.id) == 1


def test_one_commit_appends_to_several_streams(store: LedgerStore) -> None:
    first, second = new_record(), new_record()
    lookup = Lookup(key=f"token#{new_stream_id()}", value={"proposal_id": "p1"})
    due = DueWork(f"att_{new_stream_id()}", ms(5))

    store.commit(Commit(aggregates=[first, second], lookups=[lookup], due=[due]))

    assert store.version_of(first.id) == 1
    assert store.version_of(second.id) == 1
    assert store.get_lookup(lookup.key) == {"proposal_id": "p1"}
    assert all_due(store, ms(5)) == [due]


# -- read-set checks ------------------------------------------------------------------------


def test_read_check_at_the_current_version_passes(store: LedgerStore) -> None:
    read = saved_record(store, changes=2)
    written = new_record()

    store.commit(Commit(aggregates=[written], read_set=[ReadCheck(read.id, 3)]))

    assert store.version_of(written.id) == 1


def test_read_check_of_a_stream_that_moved_is_a_conflict_naming_it(store: LedgerStore) -> None:
    read = saved_record(store)
    moved_on(store, read.id)
    written = new_record()

    with pytest.raises(ConcurrencyConflict) as caught:
        store.commit(Commit(aggregates=[written], read_set=[ReadCheck(read.id, 1)]))

    assert caught.value.stream_id == read.id
    assert store.version_of(written.id) == 0


def test_read_check_at_version_zero_means_the_stream_must_not_exist(store: LedgerStore) -> None:
    absent = new_stream_id()
    existing = saved_record(store)

    store.commit(Commit(aggregates=[new_record()], read_set=[ReadCheck(absent, 0)]))
    with pytest.raises(ConcurrencyConflict):
        store.commit(Commit(aggregates=[new_record()], read_set=[ReadCheck(existing.id, 0)]))


def test_read_check_on_a_stream_the_commit_also_appends_to(store: LedgerStore) -> None:
    record = saved_record(store)
    loaded = store.get(DirectoryRecord, record.id)
    assert loaded is not None
    loaded.update({"revision": "r9"}, at=AT)

    store.commit(Commit(aggregates=[loaded], read_set=[ReadCheck(record.id, 1)]))

    assert store.version_of(record.id) == 2


def test_read_checks_with_due_work_and_no_events_still_guard_the_commit(
    store: LedgerStore,
) -> None:
    read = saved_record(store)
    moved_on(store, read.id)
    due = DueWork(f"att_{new_stream_id()}", ms(1))

    with pytest.raises(ConcurrencyConflict):
        store.commit(Commit(read_set=[ReadCheck(read.id, 1)], due=[due]))

    assert all_due(store, ms(10)) == []


# -- create-only lookups ---------------------------------------------------------------------


def test_lookup_is_written_once_and_read_back(store: LedgerStore) -> None:
    key = f"token#{new_stream_id()}"
    value = {"proposal_id": "prop_1", "presentation_id": "pres_\u00e9"}

    store.commit(Commit(lookups=[Lookup(key=key, value=value, expires_at=ms(1800))]))

    assert store.get_lookup(key) == value
    assert store.get_lookup(f"token#{new_stream_id()}") is None


def test_existing_lookup_is_a_conflict_and_keeps_its_value(store: LedgerStore) -> None:
    key = f"token#{new_stream_id()}"
    store.commit(Commit(lookups=[Lookup(key=key, value={"proposal_id": "first"})]))

    with pytest.raises(LookupConflict) as caught:
        store.commit(Commit(lookups=[Lookup(key=key, value={"proposal_id": "second"})]))

    assert caught.value.key == key
    assert store.get_lookup(key) == {"proposal_id": "first"}


def test_the_same_lookup_key_twice_in_one_commit_writes_nothing(store: LedgerStore) -> None:
    key = f"token#{new_stream_id()}"
    record = new_record()

    with pytest.raises(LookupConflict):
        store.commit(
            Commit(
                aggregates=[record],
                lookups=[Lookup(key=key, value={"n": "1"}), Lookup(key=key, value={"n": "2"})],
            )
        )

    assert store.get_lookup(key) is None
    assert store.version_of(record.id) == 0


# -- expiring lookups: absent once expired, replaced by a new item of their key, swept -------


def later(days: float) -> datetime:
    """A time past the real clock: the emulator's TTL reaps the items whose
    expiry has really passed, so the expiries here lie ahead of it."""
    return datetime.now(UTC).replace(microsecond=0) + timedelta(days=days)


def test_a_lookup_read_after_its_expiry_is_absent(store: LedgerStore) -> None:
    key, forever = f"idem#{new_stream_id()}", f"token#{new_stream_id()}"
    expires = later(1)
    store.commit(
        Commit(
            lookups=[
                Lookup(key=key, value={"n": "1"}, expires_at=expires),
                Lookup(key=forever, value={"n": "2"}),
            ]
        )
    )

    assert store.get_lookup(key, now=expires - timedelta(seconds=1)) == {"n": "1"}
    assert store.get_lookup(key, now=expires) is None
    assert store.get_lookup(key, now=expires + timedelta(days=30)) is None
    assert store.get_lookup(forever, now=expires + timedelta(days=30)) == {"n": "2"}
    assert store.get_lookup(key) == {"n": "1"}  # without a time: as stored, until swept


def test_a_key_written_after_its_item_expired_replaces_it_and_not_before(
    store: LedgerStore,
) -> None:
    key = f"idem#{new_stream_id()}"
    expires = later(1)
    store.commit(Commit(lookups=[Lookup(key=key, value={"n": "old"}, expires_at=expires)]))
    early = expires - timedelta(seconds=1)

    with pytest.raises(LookupConflict):
        store.commit(Commit(lookups=[Lookup(key, {"n": "early"}, expires_at=later(2), now=early)]))
    with pytest.raises(LookupConflict):  # without its time: create-only, as ever
        store.commit(Commit(lookups=[Lookup(key, {"n": "timeless"}, expires_at=later(2))]))
    store.commit(Commit(lookups=[Lookup(key, {"n": "new"}, expires_at=later(2), now=expires)]))

    assert store.get_lookup(key, now=expires) == {"n": "new"}
    with pytest.raises(LookupConflict):  # the new one is live: a clash again
        store.commit(Commit(lookups=[Lookup(key, {"n": "third"}, now=expires)]))


def test_the_sweep_deletes_expired_lookups_a_bounded_batch_at_a_time(
    store: LedgerStore, ledger_recorder: LedgerRecorder
) -> None:
    expires = later(1)
    expired = [f"idem#{new_stream_id()}" for _ in range(5)]
    live = [f"token#{new_stream_id()}" for _ in range(2)]
    forever = f"token#{new_stream_id()}"
    store.commit(
        Commit(
            lookups=[Lookup(k, {"k": k}, expires_at=expires) for k in expired]
            + [Lookup(k, {"k": k}, expires_at=later(5)) for k in live]
            + [Lookup(forever, {"k": forever})]
        )
    )
    if isinstance(ledger_recorder, DynamoDBLedgerRecorder):
        # DynamoDB's TTL deletes them: each expiring item carries its attribute
        assert store.sweep_lookups(expires, 10) == 0
        for key in expired:
            item = ledger_recorder.client.get_item(
                TableName=ledger_recorder.table_name, Key=lookup_key(key), ConsistentRead=True
            )["Item"]
            assert item[TTL_ATTRIBUTE] == {"N": str(int(expires.timestamp()))}
        plain = ledger_recorder.client.get_item(
            TableName=ledger_recorder.table_name, Key=lookup_key(forever), ConsistentRead=True
        )["Item"]
        assert TTL_ATTRIBUTE not in plain
        return

    assert store.sweep_lookups(expires - timedelta(seconds=1), 10) == 0
    assert store.sweep_lookups(expires, 2) == 2
    assert store.sweep_lookups(expires, 10) == 3
    assert store.sweep_lookups(expires, 10) == 0
    assert [store.get_lookup(k) for k in expired] == [None] * 5
    assert [store.get_lookup(k) for k in [*live, forever]] == [{"k": k} for k in [*live, forever]]


def test_a_deleted_lookup_is_gone_and_its_key_free(store: LedgerStore) -> None:
    key = f"session#{new_stream_id()}"
    store.commit(Commit(lookups=[Lookup(key, {"subject": "ops"}, expires_at=later(1))]))

    assert store.delete_lookup(key) is True
    assert store.get_lookup(key) is None
    assert store.delete_lookup(key) is False
    store.commit(Commit(lookups=[Lookup(key, {"subject": "again"}, expires_at=later(1))]))
    assert store.get_lookup(key) == {"subject": "again"}


# -- due work --------------------------------------------------------------------------------


def test_due_work_returns_only_entries_due_by_now(store: LedgerStore) -> None:
    past, exact, later = (DueWork(f"att_{new_stream_id()}", ms(s)) for s in (-60, 0, 0.001))
    store.commit(Commit(due=[later, exact, past]))

    assert all_due(store, T0) == [past, exact]
    assert all_due(store, ms(0.001)) == [past, exact, later]


def test_due_work_is_ordered_by_time_then_attempt_id(store: LedgerStore) -> None:
    entries = [
        DueWork("att_c", ms(2)),
        DueWork("att_b", ms(1)),
        DueWork("att_a", ms(2)),
        DueWork("att_d", ms(1)),
        DueWork("att_e", ms(-3600)),
    ]
    store.commit(Commit(due=entries))

    assert [d.attempt_id for d in all_due(store, ms(60))] == [
        "att_e",
        "att_b",
        "att_d",
        "att_a",
        "att_c",
    ]


def test_due_entry_is_upserted_per_attempt(store: LedgerStore) -> None:
    attempt = f"att_{new_stream_id()}"
    store.commit(Commit(due=[DueWork(attempt, ms(1))]))

    store.commit(Commit(due=[DueWork(attempt, ms(30))]))

    assert all_due(store, ms(29)) == []
    assert all_due(store, ms(30)) == [DueWork(attempt, ms(30))]

    store.commit(Commit(due=[DueWork(attempt, ms(-5))]))

    assert all_due(store, T0) == [DueWork(attempt, ms(-5))]


def test_due_entry_is_removed_by_a_none_time(store: LedgerStore) -> None:
    kept, removed = f"att_{new_stream_id()}", f"att_{new_stream_id()}"
    store.commit(Commit(due=[DueWork(kept, ms(1)), DueWork(removed, ms(1))]))

    store.commit(Commit(due=[DueWork(removed, None), DueWork(f"att_{new_stream_id()}", None)]))

    assert all_due(store, ms(1)) == [DueWork(kept, ms(1))]


def test_the_last_change_of_an_attempt_in_one_commit_wins(store: LedgerStore) -> None:
    attempt = f"att_{new_stream_id()}"

    store.commit(Commit(due=[DueWork(attempt, ms(1)), DueWork(attempt, ms(2))]))

    assert all_due(store, ms(5)) == [DueWork(attempt, ms(2))]


@pytest.mark.parametrize("limit", [1, 3, 7, 8])
def test_due_pages_cover_every_entry_once_in_order(store: LedgerStore, limit: int) -> None:
    entries = [DueWork(f"att_{i:02d}", ms(i // 2)) for i in range(7)]
    store.commit(Commit(due=list(reversed(entries))))
    seen: list[DueWork] = []
    cursor: str | None = None
    pages = 0

    while True:
        page = store.due_work(ms(60), limit=limit, cursor=cursor)
        assert len(page.items) <= limit
        seen += page.items
        pages += 1
        cursor = page.cursor
        if cursor is None:
            break
        assert pages < 10

    assert seen == entries
    assert pages == -(-len(entries) // limit)  # no empty trailing page


def test_due_page_cursor_skips_entries_already_returned(store: LedgerStore) -> None:
    entries = [DueWork(f"att_{i}", ms(1)) for i in range(4)]
    store.commit(Commit(due=entries))

    first = store.due_work(ms(1), limit=2)
    assert first.cursor is not None
    store.commit(Commit(due=[DueWork("att_late", ms(1))]))
    second = store.due_work(ms(1), limit=10, cursor=first.cursor)

    assert list(first.items) == entries[:2]
    assert [d.attempt_id for d in second.items] == ["att_2", "att_3", "att_late"]


# -- all or nothing --------------------------------------------------------------------------


FAILURES = ["event_slot_taken", "read_set_moved", "lookup_exists"]


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("failing_first", [True, False], ids=["failing_first", "failing_last"])
def test_a_commit_with_one_failing_condition_writes_nothing(
    store: LedgerStore, failure: str, failing_first: bool
) -> None:
    # The state before: one record, one lookup, two due entries.
    existing = saved_record(store)
    taken_key = f"token#{new_stream_id()}"
    stay, move = f"att_{new_stream_id()}", f"att_{new_stream_id()}"
    store.commit(
        Commit(
            lookups=[Lookup(key=taken_key, value={"owner": "first"})],
            due=[DueWork(stay, ms(1)), DueWork(move, ms(2))],
        )
    )

    # A commit that would write new events, a new lookup and due changes...
    fresh = new_record()
    stale = store.get(DirectoryRecord, existing.id)
    assert stale is not None
    stale.update({"revision": "stale-write"}, at=AT)
    new_key = f"token#{new_stream_id()}"
    added = f"att_{new_stream_id()}"
    aggregates: list[DirectoryRecord] = [fresh]
    read_set: list[ReadCheck] = []
    lookups = [Lookup(key=new_key, value={"owner": "new"})]
    # ... but exactly one of its conditions fails.
    if failure == "event_slot_taken":
        moved_on(store, existing.id)
        aggregates.insert(0 if failing_first else 1, stale)
    elif failure == "read_set_moved":
        moved_on(store, existing.id)
        read_set.append(ReadCheck(existing.id, 1))
    else:
        taken = Lookup(key=taken_key, value={"owner": "second"})
        lookups.insert(0 if failing_first else 1, taken)
    versions_before = store.version_of(existing.id)

    with pytest.raises((ConcurrencyConflict, LookupConflict)):
        store.commit(
            Commit(
                aggregates=aggregates,
                read_set=read_set,
                lookups=lookups,
                due=[DueWork(added, ms(0)), DueWork(move, ms(50)), DueWork(stay, None)],
            )
        )

    assert store.version_of(fresh.id) == 0
    assert store.read_stream(fresh.id) == []
    assert store.version_of(existing.id) == versions_before
    assert store.get_lookup(new_key) is None
    assert store.get_lookup(taken_key) == {"owner": "first"}
    assert all_due(store, ms(100)) == [DueWork(stay, ms(1)), DueWork(move, ms(2))]


@pytest.mark.parametrize("failure", FAILURES)
def test_after_a_failed_commit_the_same_writes_succeed_once_the_condition_holds(
    store: LedgerStore, failure: str
) -> None:
    existing = saved_record(store)
    moved_on(store, existing.id)  # the stream is at version 2 now
    taken_key = f"token#{new_stream_id()}"
    store.commit(Commit(lookups=[Lookup(key=taken_key, value={"owner": "first"})]))
    new_key = f"token#{new_stream_id()}"
    attempt = f"att_{new_stream_id()}"

    def attempt_commit(failing: bool) -> DirectoryRecord:
        fresh = DirectoryRecord(
            record_id=f"target:{attempt}", kind="target", values={"revision": "r1"}, at=AT
        )
        aggregates: list[DirectoryRecord] = [fresh]
        read_set = [ReadCheck(existing.id, 2)]
        lookups = [Lookup(key=new_key, value={"owner": "new"})]
        if failing and failure == "event_slot_taken":
            aggregates.append(
                DirectoryRecord(record_id=existing.id, kind="target", values={}, at=AT)
            )
        elif failing and failure == "read_set_moved":
            read_set = [ReadCheck(existing.id, 1)]
        elif failing:
            lookups.append(Lookup(key=taken_key, value={"owner": "second"}))
        store.commit(
            Commit(
                aggregates=aggregates,
                read_set=read_set,
                lookups=lookups,
                due=[DueWork(attempt, ms(1))],
            )
        )
        return fresh

    with pytest.raises((ConcurrencyConflict, LookupConflict)):
        attempt_commit(failing=True)
    fresh = attempt_commit(failing=False)

    assert store.version_of(fresh.id) == 1
    assert store.get_lookup(new_key) == {"owner": "new"}
    assert all_due(store, ms(1)) == [DueWork(attempt, ms(1))]


# -- stream enumeration (rebuilds, head-index repair) -------------------------------------


def test_stream_ids_are_listed_in_order_whole_or_by_prefix(
    ledger_recorder: LedgerRecorder,
) -> None:
    base = new_stream_id()
    # "%" and "_" are wildcards to SQL LIKE: a prefix must match them literally.
    ids = [f"{base}_b", f"{base}_a", f"{base}%c", f"{base}xd"]
    other_case = f"{base.upper()}_e"  # a prefix is matched exactly, case included
    for stream_id in [*ids, other_case]:
        ledger_recorder.insert_events([StoredEvent(stream_id, 1, "topic", b"{}")])

    assert list(ledger_recorder.select_stream_ids(f"{base}_")) == [f"{base}_a", f"{base}_b"]
    assert list(ledger_recorder.select_stream_ids(base)) == sorted(ids)
    everything = list(ledger_recorder.select_stream_ids())
    assert everything == sorted(everything)
    assert {*ids, other_case} <= set(everything)
