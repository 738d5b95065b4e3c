"""Events at exact slots: one consistent BatchGetItem per 100 keys (ministack)."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.dynamodb.client import DynamoDBUnavailableError, Retrier
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
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
    assert all(e.state == event(str(e.originator_id), e.originator_version).state
               for e in found)


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
        (table, request), = RequestItems.items()
        keys = request["Keys"]
        half, rest = keys[: len(keys) // 2], keys[len(keys) // 2:]
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
    recorder = DynamoDBLedgerRecorder(dynamodb_table_name, client,
                                      retrier=Retrier(sleep=pauses.append))
    wanted = [(name, v) for name in names for v in (1, 2, 3)]
    found = recorder.select_events_at(wanted)
    assert sorted((e.originator_id, e.originator_version) for e in found) == sorted(wanted)
    assert client.calls == 3 and len(pauses) == 2


def test_keys_left_unprocessed_for_good_make_the_store_unavailable(
    own_client: Any, dynamodb_table_name: str
) -> None:
    names = fill(DynamoDBLedgerRecorder(dynamodb_table_name, own_client), 1, 2)
    client = Throttled(own_client, rounds=1000)
    recorder = DynamoDBLedgerRecorder(dynamodb_table_name, client,
                                      retrier=Retrier(max_attempts=3, sleep=lambda _: None))
    with pytest.raises(DynamoDBUnavailableError):
        recorder.select_events_at([(names[0], 1), (names[0], 2)])
    assert client.calls == 3
