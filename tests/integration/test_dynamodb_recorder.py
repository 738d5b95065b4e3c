"""The DynamoDB recorder against the emulator: writes, reads, errors, requests."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from eventsourcing.persistence import OperationalError

from adapters.dynamodb import items as it
from adapters.dynamodb.client import DynamoDBRequestError, DynamoDBUnavailableError, Retrier
from adapters.dynamodb.items import ReservedStreamIdError
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.dynamodb.schema import create_table, describe
from adapters.recorder import LookupConflictError, StreamConflictError
from adapters.store import LedgerStore
from domain.errors import CommitTooLarge, StoreUnavailable
from domain.ports import Commit, DueWork, Lookup, ReadCheck
from tests.support.dynamodb_events import T0, at, event, new_stream
from tests.support.dynamodb_fixtures import new_client, new_table_name
from tests.support.faults import RequestCounter, ScriptedFaultClient, client_error, not_sent

pytestmark = pytest.mark.dynamodb


@pytest.fixture
def own_client(dynamodb_endpoint: str) -> Any:
    """A client of this test alone, so its requests can be counted."""
    client = new_client(dynamodb_endpoint)
    yield client
    client.close()


@pytest.fixture
def counted(own_client: Any, dynamodb_table_name: str) -> tuple[DynamoDBLedgerRecorder, Any]:
    counter = RequestCounter(own_client)
    return DynamoDBLedgerRecorder(dynamodb_table_name, own_client), counter


# -- schema ---------------------------------------------------------------------


def test_create_table_is_idempotent_and_switches_everything_on(
    dynamodb_client: Any, dynamodb_tables: list[str]
) -> None:
    name = new_table_name()
    dynamodb_tables.append(name)
    assert create_table(dynamodb_client, name) is True
    assert create_table(dynamodb_client, name) is False
    assert describe(dynamodb_client, name) == {
        "status": "ACTIVE",
        "indexes": ["due", "list"],
        "stream_view_type": "NEW_IMAGE",
        "sse": "ENABLED",
        "ttl_attribute": it.TTL_ATTRIBUTE,
        "pitr": "ENABLED",
    }


def test_create_table_tolerates_an_endpoint_without_pitr(
    dynamodb_client: Any, dynamodb_tables: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    refusing = ScriptedFaultClient(
        dynamodb_client,
        update_continuous_backups=[
            not_sent(client_error("UnknownOperationException", "UpdateContinuousBackups"))
        ],
    )
    name = new_table_name()
    dynamodb_tables.append(name)
    with caplog.at_level(logging.WARNING, logger="adapters.dynamodb.schema"):
        assert create_table(refusing, name) is True
    assert "point-in-time recovery not enabled" in caplog.text
    assert describe(dynamodb_client, name)["status"] == "ACTIVE"


# -- writes: request shape --------------------------------------------------------


def test_single_event_is_one_conditional_put(counted: tuple[Any, Any]) -> None:
    recorder, counter = counted
    stream = new_stream()
    recorder.insert_events([event(stream, 1)])
    assert dict(counter.by_operation) == {"PutItem": 1}
    with pytest.raises(StreamConflictError) as caught:
        recorder.insert_events([event(stream, 1, b"other")])
    assert caught.value.stream_id == stream
    assert [e.state for e in recorder.select_events(stream)] == [f"{stream}@1".encode()]


def test_larger_commit_is_one_transaction(counted: tuple[Any, Any]) -> None:
    recorder, counter = counted
    a, b, c = new_stream(), new_stream(), new_stream()
    recorder.insert_events([event(c, 1)])
    assert recorder.layout.due_buckets  # read once a minute, not per commit
    counter.reset()
    recorder.insert_events(
        [event(a, 1), event(b, 1)],
        read_checks=[ReadCheck(c, 1)],
        lookups=[Lookup("tok-" + a, {"proposal": a})],
        due=[DueWork("att-" + a, at(5))],
    )
    assert dict(counter.by_operation) == {"TransactWriteItems": 1}
    assert recorder.get_lookup("tok-" + a) == {"proposal": a}
    assert recorder.select_due(at(5), 10) == ([DueWork("att-" + a, at(5))], None)


def test_commit_over_100_items_is_refused_before_sending(counted: tuple[Any, Any]) -> None:
    recorder, counter = counted
    stream = new_stream()
    with pytest.raises(CommitTooLarge):
        recorder.insert_events([event(stream, v) for v in range(1, 102)])
    assert counter.total == 0
    recorder.insert_events([event(stream, v) for v in range(1, 101)])
    assert len(recorder.select_events(stream)) == 100


def test_cancellation_names_the_stream_or_lookup_that_clashed(
    dynamodb_recorder: DynamoDBLedgerRecorder,
) -> None:
    a, b = new_stream(), new_stream()
    dynamodb_recorder.insert_events([event(b, 1)], lookups=[Lookup("taken", {"k": "v"})])
    with pytest.raises(StreamConflictError) as on_event:
        dynamodb_recorder.insert_events([event(a, 1), event(b, 1)])
    assert on_event.value.stream_id == b
    with pytest.raises(StreamConflictError) as on_read_set:
        dynamodb_recorder.insert_events([event(a, 1)], read_checks=[ReadCheck(b, 0)])
    assert on_read_set.value.stream_id == b
    with pytest.raises(LookupConflictError) as on_lookup:
        dynamodb_recorder.insert_events([event(a, 1)], lookups=[Lookup("taken", {"k": "x"})])
    assert on_lookup.value.key == "taken"
    assert dynamodb_recorder.select_events(a) == []
    assert dynamodb_recorder.get_lookup("taken") == {"k": "v"}


def test_read_check_on_a_stream_written_in_the_same_commit(
    dynamodb_recorder: DynamoDBLedgerRecorder,
) -> None:
    a = new_stream()
    dynamodb_recorder.insert_events([event(a, 1)])
    dynamodb_recorder.insert_events(
        [event(a, 2), event(a, 3)], read_checks=[ReadCheck(a, 1), ReadCheck(a, 1)]
    )
    with pytest.raises(StreamConflictError):
        dynamodb_recorder.insert_events([event(a, 4)], read_checks=[ReadCheck(a, 2)])
    assert [e.originator_version for e in dynamodb_recorder.select_events(a)] == [1, 2, 3]


def test_duplicates_inside_one_commit(dynamodb_recorder: DynamoDBLedgerRecorder) -> None:
    a = new_stream()
    with pytest.raises(StreamConflictError):
        dynamodb_recorder.insert_events([event(a, 1), event(a, 1)])
    with pytest.raises(LookupConflictError):
        dynamodb_recorder.insert_events([], lookups=[Lookup("dup", {}), Lookup("dup", {})])
    dynamodb_recorder.insert_events([], due=[DueWork("att-dup", at(1)), DueWork("att-dup", at(9))])
    assert dynamodb_recorder.select_due(at(100), 10)[0] == [DueWork("att-dup", at(9))]


def test_reserved_prefixes_cannot_be_stream_ids(dynamodb_recorder: DynamoDBLedgerRecorder) -> None:
    for stream in ("lookup#x", "due#att", "snapshot#s", "view#status#att", ""):
        with pytest.raises(ReservedStreamIdError):
            dynamodb_recorder.insert_events([event(stream, 1)])


def test_lookup_items_carry_the_ttl_attribute(
    dynamodb_recorder: DynamoDBLedgerRecorder, dynamodb_client: Any, dynamodb_table_name: str
) -> None:
    # in the real future: an emulator (like DynamoDB) reaps items whose TTL has passed
    expires = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=30)
    dynamodb_recorder.insert_events(
        [], lookups=[Lookup("expiring", {"a": "1"}, expires_at=expires), Lookup("kept", {})]
    )
    expiring = dynamodb_client.get_item(
        TableName=dynamodb_table_name, Key=it.lookup_key("expiring"), ConsistentRead=True
    )["Item"]
    kept = dynamodb_client.get_item(
        TableName=dynamodb_table_name, Key=it.lookup_key("kept"), ConsistentRead=True
    )["Item"]
    assert expiring[it.TTL_ATTRIBUTE] == {"N": str(int(expires.timestamp()))}
    assert it.TTL_ATTRIBUTE not in kept
    assert dynamodb_recorder.get_lookup("kept") == {}
    assert dynamodb_recorder.get_lookup("missing") is None


def test_event_items_hold_only_key_topic_state_and_time(
    dynamodb_recorder: DynamoDBLedgerRecorder, dynamodb_client: Any, dynamodb_table_name: str
) -> None:
    a = new_stream()
    dynamodb_recorder.insert_events([event(a, 1)])
    item = dynamodb_client.get_item(
        TableName=dynamodb_table_name, Key=it.event_key(a, 1), ConsistentRead=True
    )["Item"]
    assert set(item) == {"pk", "sk", "topic", "state", "recorded_at"}
    assert item["state"] == {"B": f"{a}@1".encode()}


# -- reads ------------------------------------------------------------------------


def test_stream_reads_follow_pages_and_honour_every_option(
    counted: tuple[Any, Any],
) -> None:
    recorder, counter = counted
    stream = new_stream()
    big = b"x" * 200_000  # five events per 1 MB query page
    for first in range(1, 13, 4):
        batch = [event(stream, v, big + bytes([v])) for v in range(first, first + 4)]
        recorder.insert_events(batch)
    counter.reset()
    versions = [e.originator_version for e in recorder.select_events(stream)]
    assert versions == list(range(1, 13))
    assert counter.by_operation["Query"] >= 3  # it followed LastEvaluatedKey

    def read(**options: Any) -> list[int]:
        return [e.originator_version for e in recorder.select_events(stream, **options)]

    assert read(limit=7) == [1, 2, 3, 4, 5, 6, 7]
    assert read(desc=True, limit=7) == [12, 11, 10, 9, 8, 7, 6]
    assert read(gt=3, lte=9) == [4, 5, 6, 7, 8, 9]
    assert read(gt=3, lte=9, desc=True, limit=2) == [9, 8]
    assert read(gt=10) == [11, 12]
    assert read(lte=2, desc=True) == [2, 1]
    assert read(gt=5, lte=5) == []
    assert read(gt=9, lte=3) == []
    assert read(limit=0) == []
    assert recorder.select_events(stream, desc=True, limit=1)[0].state == big + bytes([12])


def test_due_work_pages_across_buckets(dynamodb_client: Any, dynamodb_table_name: str) -> None:
    recorder = DynamoDBLedgerRecorder(dynamodb_table_name, dynamodb_client, due_buckets=4)
    entries = [DueWork(f"att-{i:02d}", at(i % 7)) for i in range(20)]
    recorder.insert_events([], due=entries)
    recorder.insert_events([], due=[DueWork("att-03", None), DueWork("att-late", at(60))])
    expected = sorted(
        (e for e in entries if e.attempt_id != "att-03"),
        key=lambda e: (e.next_action_at, e.attempt_id),
    )
    seen: list[DueWork] = []
    cursor = None
    pages = 0
    while True:
        page, cursor = recorder.select_due(at(30), 4, cursor)
        seen.extend(page)
        pages += 1
        if cursor is None:
            break
    assert seen == expected
    assert pages == 5
    early = [e for e in expected if e.next_action_at is not None and e.next_action_at <= at(2)]
    assert recorder.select_due(at(2), 100)[0] == early


# -- failures ---------------------------------------------------------------------


def test_throttling_is_retried_with_bounded_backoff(
    dynamodb_client: Any, dynamodb_table_name: str
) -> None:
    sleeps: list[float] = []
    client = ScriptedFaultClient(
        dynamodb_client,
        transact_write_items=[
            not_sent(client_error("ProvisionedThroughputExceededException", "TransactWriteItems")),
            not_sent(client_error("ThrottlingException", "TransactWriteItems")),
            not_sent(
                client_error(
                    "TransactionCanceledException",
                    "TransactWriteItems",
                    CancellationReasons=[{"Code": "None"}, {"Code": "ThrottlingError"}],
                )
            ),
            not_sent(client_error("RequestLimitExceeded", "TransactWriteItems")),
        ],
    )
    recorder = DynamoDBLedgerRecorder(
        dynamodb_table_name, client, retrier=Retrier(sleep=sleeps.append, jitter=lambda: 1.0)
    )
    a, b = new_stream(), new_stream()
    recorder.insert_events([event(a, 1), event(b, 1)])
    assert client.count("transact_write_items") == 5
    assert sleeps == [0.025, 0.05, 0.1, 0.2]
    tokens = {kwargs["ClientRequestToken"] for _, kwargs in client.calls}
    assert len(tokens) == 1 and len(tokens.pop()) == 36
    assert len(recorder.select_events(a)) == len(recorder.select_events(b)) == 1


def test_exhausted_retries_raise_operational_error_with_nothing_written(
    dynamodb_client: Any, dynamodb_table_name: str
) -> None:
    sleeps: list[float] = []
    throttle = not_sent(client_error("ThrottlingException", "TransactWriteItems"))
    client = ScriptedFaultClient(dynamodb_client, transact_write_items=[throttle] * 10)
    recorder = DynamoDBLedgerRecorder(
        dynamodb_table_name, client, retrier=Retrier(max_attempts=4, sleep=sleeps.append)
    )
    a, b = new_stream(), new_stream()
    with pytest.raises(DynamoDBUnavailableError) as caught:
        recorder.insert_events([event(a, 1), event(b, 1)])
    assert isinstance(caught.value, OperationalError)
    assert len(sleeps) == 3 and all(0 <= s <= 1.0 for s in sleeps)
    assert recorder.select_events(a) == [] and recorder.select_events(b) == []
    store = LedgerStore(recorder)
    with pytest.raises(StoreUnavailable):
        store.commit(Commit(due=[DueWork("att-x", T0), DueWork("att-y", T0)]))


def test_transaction_conflict_is_a_lost_race(
    dynamodb_client: Any, dynamodb_table_name: str
) -> None:
    conflict = client_error(
        "TransactionCanceledException",
        "TransactWriteItems",
        CancellationReasons=[{"Code": "None"}, {"Code": "TransactionConflict"}],
    )
    client = ScriptedFaultClient(dynamodb_client, transact_write_items=[not_sent(conflict)])
    recorder = DynamoDBLedgerRecorder(dynamodb_table_name, client, sleep=lambda _: None)
    a, b = new_stream(), new_stream()
    with pytest.raises(StreamConflictError) as caught:
        recorder.insert_events([event(a, 1), event(b, 1)])
    assert caught.value.stream_id == b


def test_missing_table_is_a_persistence_error(dynamodb_client: Any) -> None:
    recorder = DynamoDBLedgerRecorder("no-such-table", dynamodb_client)
    with pytest.raises(DynamoDBRequestError):
        recorder.insert_events([event(new_stream(), 1)])
    with pytest.raises(StoreUnavailable):
        LedgerStore(recorder).read_stream("anything")
