"""The due-bucket count recorded in the table's layout record, on the emulator.

Every writer and every reader of due work uses the count the table records (256
on a new table), whatever its own ``LEDGER_DUE_WORK_BUCKETS``; a table that
records none keeps each process's setting; ``ledger dynamodb migrate`` records
a count while writers and workers run, and no due entry is ever left where no
worker looks.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from adapters.dynamodb import items as it
from adapters.dynamodb.layout import NEW_TABLE, TableLayout, layout_item, layout_key
from adapters.dynamodb.migrate import migrate
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.dynamodb.schema import create_table
from domain.errors import InvalidInput
from domain.ports import DueWork
from tests.support.cli import invoke
from tests.support.dynamodb_fixtures import new_table_name

pytestmark = pytest.mark.dynamodb

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
EVERYTHING = NOW + timedelta(days=1)


@pytest.fixture
def tables(dynamodb_client: Any) -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for name in made:
        dynamodb_client.delete_table(TableName=name)


def new_table(client: Any, made: list[str], *, legacy: bool = False) -> str:
    """A table as ``create_table`` makes it; ``legacy``: without its layout record."""
    name = new_table_name()
    create_table(client, name)
    made.append(name)
    if legacy:
        client.delete_item(TableName=name, Key=layout_key())
    return name


def put_due(recorder: DynamoDBLedgerRecorder, ids: list[str], at: datetime = NOW) -> None:
    recorder.insert_events([], due=[DueWork(i, at) for i in ids])


def all_due(recorder: DynamoDBLedgerRecorder, page: int = 200) -> list[DueWork]:
    """Every entry a worker finds, page after page."""
    seen: list[DueWork] = []
    cursor = None
    while True:
        items, cursor = recorder.select_due(EVERYTHING, page, cursor)
        seen.extend(items)
        if cursor is None:
            return seen


def stored_buckets(client: Any, table: str) -> dict[str, str]:
    """attempt id -> the bucket its due item is in, read from the table itself."""
    found: dict[str, str] = {}
    request: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = client.scan(**request)
        for item in page.get("Items", []):
            if item[it.PK]["S"].startswith(it.DUE_PREFIX):
                found[item[it.ATTEMPT_ID]["S"]] = item[it.DUE_BUCKET]["S"]
        if "LastEvaluatedKey" not in page:
            return found
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def test_a_new_table_records_256_due_buckets_and_every_process_uses_them(
    dynamodb_client: Any, tables: list[str], dynamodb_endpoint: str
) -> None:
    table = new_table(dynamodb_client, tables)
    writer = DynamoDBLedgerRecorder(table, dynamodb_client, due_buckets=4)
    assert writer.layout.due_buckets == NEW_TABLE.due_buckets == 256
    ids = [f"att_{n:04d}" for n in range(600)]
    for start in range(0, len(ids), 20):
        put_due(writer, ids[start : start + 20], NOW + timedelta(seconds=start % 7))
    buckets = stored_buckets(dynamodb_client, table)
    assert buckets == {i: it.due_bucket(i, 256) for i in ids}  # not the writer's setting of 4
    assert len(set(buckets.values())) > 200
    reader = DynamoDBLedgerRecorder(table, dynamodb_client, due_buckets=16)
    expected = sorted(
        (DueWork(i, NOW + timedelta(seconds=(n // 20 * 20) % 7)) for n, i in enumerate(ids)),
        key=lambda e: (e.next_action_at, e.attempt_id),
    )
    assert all_due(reader, page=150) == expected  # every bucket, merged oldest first
    assert reader.select_due(NOW, 1000)[0] == [e for e in expected if e.next_action_at == NOW]
    shown = invoke(
        ["dynamodb", "layout"],
        LEDGER_DYNAMODB_TABLE=table,
        AWS_ENDPOINT_URL_DYNAMODB=dynamodb_endpoint,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
    )
    assert shown.exit_code == 0, shown.stderr
    assert "due buckets 256," in shown.stdout


@pytest.mark.parametrize("record", ["none", "without a due count"])
def test_a_table_that_records_no_count_keeps_each_processs_setting(
    dynamodb_client: Any, tables: list[str], record: str
) -> None:
    table = new_table(dynamodb_client, tables, legacy=True)
    if record == "without a due count":  # what the layout record was before the count
        older = TableLayout(512, 16, True, 1, policy_set_shards=96)
        dynamodb_client.put_item(TableName=table, Item=layout_item(older, it.now_text()))
    writer = DynamoDBLedgerRecorder(table, dynamodb_client, due_buckets=4)
    assert writer.layout.due_buckets == 0
    ids = [f"att_{n:03d}" for n in range(80)]
    put_due(writer, ids)
    assert set(stored_buckets(dynamodb_client, table).values()) == {
        f"due#{n:02x}" for n in range(4)
    }
    assert len(all_due(DynamoDBLedgerRecorder(table, dynamodb_client, due_buckets=4))) == 80
    # Why the count belongs in the table: a process set to fewer never sees the rest.
    fewer = all_due(DynamoDBLedgerRecorder(table, dynamodb_client, due_buckets=2))
    assert 0 < len(fewer) < 80


def test_migrate_records_a_count_no_process_could_have_exceeded_and_never_lowers_it(
    dynamodb_client: Any, tables: list[str]
) -> None:
    table = new_table(dynamodb_client, tables, legacy=True)
    recorder = DynamoDBLedgerRecorder(table, dynamodb_client)
    with pytest.raises(InvalidInput, match="record at least 256"):
        migrate(recorder, due_buckets=64)
    assert recorder.read_layout().version == 0  # nothing written
    done = migrate(recorder, due_buckets=300)
    assert done.after.due_buckets == 300 and done.after.checks_shards
    with pytest.raises(InvalidInput, match="never lowers"):
        migrate(recorder, due_buckets=256)
    again = migrate(recorder, due_buckets=512)  # a count that is recorded may grow
    assert again.after.due_buckets == 512 and again.after.checks_shards
    # growing the count alone leaves the directory checks on their copies
    assert again.after == replace(done.after, due_buckets=512, version=done.after.version + 1)


def test_a_reader_holding_the_old_count_would_miss_what_writers_put_under_the_new_one(
    dynamodb_client: Any, tables: list[str]
) -> None:
    """The planted bug the fresh read prevents: a worker that kept the count it read
    before the migration (as a writer may, for a minute) enumerates 16 buckets and
    never sees the entries a writer put in the 240 others."""
    table = new_table(dynamodb_client, tables, legacy=True)
    stale = DynamoDBLedgerRecorder(table, dynamodb_client, layout_ttl=3600)
    assert stale.layout.due_buckets == 0  # cached: the setting's 16
    migrate(DynamoDBLedgerRecorder(table, dynamodb_client))
    writer = DynamoDBLedgerRecorder(table, dynamodb_client)
    ids = [f"att_{n:03d}" for n in range(100)]
    put_due(writer, ids)
    stale.read_layout = lambda: stale.layout  # type: ignore[method-assign]
    missed = {e.attempt_id for e in all_due(stale)}
    assert len(missed) < 30  # about 16 in 256 of them
    assert {e.attempt_id for e in all_due(DynamoDBLedgerRecorder(table, dynamodb_client))} == set(
        ids
    )


@pytest.mark.slow
def test_a_migration_with_writers_and_workers_running_throughout_loses_no_due_work(
    dynamodb_client: Any, tables: list[str]
) -> None:
    """Writers put due entries (new ones, and again on older ones: an entry moves to
    its new bucket on its next change) while workers take every entry they find
    and drop it, and the table is migrated from no count (each process's 16) to
    256. Some writers hold the layout they read first for the whole run. After
    the writers stop, the workers drain the index: every entry ever put was
    taken, and no due item is left in the table."""
    table = new_table(dynamodb_client, tables, legacy=True)
    stop_writing = threading.Event()
    stop_working = threading.Event()
    written: set[str] = set()
    worked: set[str] = set()
    errors: list[BaseException] = []
    lock = threading.Lock()

    def writer(number: int) -> None:
        ttl = 3600.0 if number % 2 else 0.0  # odd writers never see the migration
        recorder = DynamoDBLedgerRecorder(table, dynamodb_client, layout_ttl=ttl)
        n = 0
        try:
            while not stop_writing.is_set():
                batch = [f"att_w{number}_{n + k:05d}" for k in range(5)]
                n += 5
                again = [f"att_w{number}_{k:05d}" for k in range(0, n - 5, 7)][-3:]
                put_due(recorder, batch + again)
                with lock:
                    written.update(batch)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def worker() -> None:
        recorder = DynamoDBLedgerRecorder(table, dynamodb_client)
        try:
            while True:
                stopping = stop_working.is_set()
                found = all_due(recorder)
                for start in range(0, len(found), 25):
                    chunk = [DueWork(e.attempt_id, None) for e in found[start : start + 25]]
                    recorder.insert_events([], due=chunk)
                with lock:
                    worked.update(e.attempt_id for e in found)
                if stopping and not found:
                    return
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    writers = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    workers = [threading.Thread(target=worker) for _ in range(2)]
    for thread in writers + workers:
        thread.start()
    try:
        while len(written) < 150 and not errors:
            threading.Event().wait(0.05)
        before = set(stored_buckets(dynamodb_client, table).values())
        migrate(DynamoDBLedgerRecorder(table, dynamodb_client))
        at_migration = len(written)
        after: set[str] = set()
        while (len(written) < at_migration + 300 or max(after, default="") < "due#10") and (
            not errors
        ):
            after |= set(stored_buckets(dynamodb_client, table).values())
    finally:
        stop_writing.set()
        for thread in writers:
            thread.join()
        stop_working.set()
        for thread in workers:
            thread.join()
    assert not errors, errors
    assert before and max(before) < "due#10"  # before: the setting's 16 buckets
    assert max(after) >= "due#10"  # after: writers that read the new count used it
    assert written - worked == set()  # every entry ever put was taken by a worker
    assert stored_buckets(dynamodb_client, table) == {}  # and none is left unread
