"""Events at exact slots: one consistent BatchGetItem per 100 keys; the newest event
of each stream: its head-index entry, then that slot (ministack)."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.dynamodb.client import DynamoDBUnavailableError, Retrier
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from domain.ports import StreamHead
from tests.support.dynamodb_events import event, new_stream
from tests.support.dynamodb_fixtures import new_client
from tests.support.faults import RequestCounter

pytestmark = pytest.mark.dynamodb


@pytest.fixture
def own_client(dynamodb_endpoint: str) -> Any:
    client = new_client(dynamodb_endpoint)
    yield client
    client.close()


def fill(recorder: DynamoDBLedgerRecorder, streams: int, versions: int) -> list[str]:
    names = [new_stream("batch") for _ in range(streams)]
    for name in names:
        recorder.insert_events([event(name, v) for v in range(1, versions + 1)])
    return names


def test_slots_are_read_in_batches_of_one_hundred_and_absent_ones_left_out(
    own_client: Any, dynamodb_table_name: str
) -> None:
    recorder = DynamoDBLedgerRecorder(dynamodb_table_name, own_client)
    names = fill(recorder, 3, 50)
    wanted = [(name, v) for name in names for v in range(1, 51)]  # 150 present
    wanted += [(names[0], 51), (new_stream("never"), 1)]  # 2 absent
    counter = RequestCounter(own_client)

    found = recorder.select_events_at(wanted)

    assert counter.by_operation == {"BatchGetItem": 2}
    assert sorted((e.originator_id, e.originator_version) for e in found) == sorted(wanted[:150])
    assert all(e.state == event(str(e.originator_id), e.originator_version).state for e in found)


class Throttled:
    """The real client, except that each batch first leaves half its keys unprocessed."""

    def __init__(self, inner: Any, rounds: int) -> None:
        self.inner = inner
        self.rounds = rounds
        self.calls = 0

    def batch_get_item(self, RequestItems: dict[str, Any]) -> Any:
        self.calls += 1
        if self.rounds == 0:
            return self.inner.batch_get_item(RequestItems=RequestItems)
        self.rounds -= 1
        ((table, request),) = RequestItems.items()
        keys = request["Keys"]
        half, rest = keys[: len(keys) // 2], keys[len(keys) // 2 :]
        answer: dict[str, Any] = {"Responses": {table: []}}
        if half:
            answer = self.inner.batch_get_item(RequestItems={table: {**request, "Keys": half}})
        answer["UnprocessedKeys"] = {table: {**request, "Keys": rest}}
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_unprocessed_keys_are_asked_for_again(own_client: Any, dynamodb_table_name: str) -> None:
    names = fill(DynamoDBLedgerRecorder(dynamodb_table_name, own_client), 2, 3)
    client = Throttled(own_client, rounds=2)
    pauses: list[float] = []
    recorder = DynamoDBLedgerRecorder(
        dynamodb_table_name, client, retrier=Retrier(sleep=pauses.append)
    )
    wanted = [(name, v) for name in names for v in (1, 2, 3)]
    found = recorder.select_events_at(wanted)
    assert sorted((e.originator_id, e.originator_version) for e in found) == sorted(wanted)
    assert client.calls == 3 and len(pauses) == 2


def test_keys_left_unprocessed_for_good_make_the_store_unavailable(
    own_client: Any, dynamodb_table_name: str
) -> None:
    names = fill(DynamoDBLedgerRecorder(dynamodb_table_name, own_client), 1, 2)
    client = Throttled(own_client, rounds=1000)
    recorder = DynamoDBLedgerRecorder(
        dynamodb_table_name, client, retrier=Retrier(max_attempts=3, sleep=lambda _: None)
    )
    with pytest.raises(DynamoDBUnavailableError):
        recorder.select_events_at([(names[0], 1), (names[0], 2)])
    assert client.calls == 3


def write_with_heads(recorder: DynamoDBLedgerRecorder, name: str, versions: int) -> None:
    """Events written as the ledger writes them: each commit moves the stream's head."""
    for v in range(1, versions + 1):
        recorder.insert_events([event(name, v)], heads=[StreamHead(name, v, f"h{v}")])


def test_newest_events_come_from_the_head_index_in_two_batches(
    own_client: Any, dynamodb_table_name: str
) -> None:
    recorder = DynamoDBLedgerRecorder(dynamodb_table_name, own_client)
    names = [new_stream("latest") for _ in range(120)]
    for n, name in enumerate(names):
        write_with_heads(recorder, name, 1 + n % 3)
    counter = RequestCounter(own_client)

    found = recorder.select_latest_events(names)

    # 120 heads: 2 batches of heads, 2 batches of events; no Query
    assert counter.by_operation == {"BatchGetItem": 4}
    assert [(e.originator_id, e.originator_version) for e in found] == [
        (name, 1 + n % 3) for n, name in enumerate(names)
    ]
    assert all(
        e.state == event(name, 1 + n % 3).state
        for n, (e, name) in enumerate(zip(found, names, strict=True))
    )


def test_a_stream_without_a_head_entry_is_read_by_its_own_query(
    own_client: Any, dynamodb_table_name: str
) -> None:
    """Written before the head index (no entry), or never written: a Query each, so
    a stream left out of the answer really has no events."""
    recorder = DynamoDBLedgerRecorder(dynamodb_table_name, own_client)
    indexed, legacy, never = new_stream("idx"), new_stream("legacy"), new_stream("never")
    write_with_heads(recorder, indexed, 2)
    recorder.insert_events([event(legacy, 1), event(legacy, 2), event(legacy, 3)])  # no heads
    counter = RequestCounter(own_client)

    found = recorder.select_latest_events([indexed, legacy, never])

    assert counter.by_operation == {"BatchGetItem": 2, "Query": 2}
    assert [(e.originator_id, e.originator_version) for e in found] == [(indexed, 2), (legacy, 3)]
