"""The head index under races, on the emulator with real boto3 clients (one per
thread): many writers append the same next version of one stream; exactly one
wins each round, and the head entry always names the winner's event, never a
loser's (the head moves in the same transaction as the events).

The table has 16 head buckets (TEST_LAYOUT) instead of a new table's 512: the race is on one
stream, whose entry is in one bucket either way, and every round reads the
head index whole (512 queries a round were 25 of the test's 30 s)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.store import LedgerStore
from domain.directory import DirectoryRecord
from domain.errors import ConcurrencyConflict
from domain.ports import Commit
from tests.support.dynamodb_fixtures import new_client

pytestmark = pytest.mark.dynamodb

THREADS = 10
ROUNDS = 20
AT = "2026-01-01T00:00:00Z"


@pytest.fixture(scope="module")
def clients(dynamodb_endpoint: str) -> Iterator[list[Any]]:
    made = [new_client(dynamodb_endpoint) for _ in range(THREADS)]
    yield made
    for client in made:
        client.close()


def test_racing_appends_leave_the_head_on_the_winner(
    clients: list[Any], dynamodb_table_name: str
) -> None:
    stores = [LedgerStore(DynamoDBLedgerRecorder(dynamodb_table_name, c)) for c in clients]
    stores[0].commit(
        Commit(
            aggregates=[
                DirectoryRecord(record_id="actor:raced", kind="actor", values={"by": -1}, at=AT)
            ]
        )
    )
    barrier = threading.Barrier(THREADS)
    wins: list[list[int]] = [[] for _ in range(ROUNDS)]
    errors: list[str] = []

    def writer(thread: int) -> None:
        for rnd in range(ROUNDS):
            record = stores[thread].get(DirectoryRecord, "actor:raced")
            assert record is not None
            record.update({"by": thread, "round": rnd}, AT)
            barrier.wait(timeout=60)
            try:
                stores[thread].commit(Commit(aggregates=[record]))
                wins[rnd].append(thread)
            except ConcurrencyConflict:
                pass
            except Exception as exc:  # recorded, then asserted on
                errors.append(repr(exc))
            barrier.wait(timeout=60)  # the round is over: nobody commits until all are back
            if thread == 0:  # after every round, the head names the stream's newest event
                events, _ = stores[0].audit_events("actor:raced")
                (head,) = [h for h in stores[0].stream_heads() if h.stream_id == "actor:raced"]
                if (head.version, head.head) != (len(events), events[-1].hash()):
                    errors.append(f"round {rnd}: head {head.version} is not the newest event")

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert errors == []
    assert all(len(w) == 1 for w in wins), wins
    events, _ = stores[0].audit_events("actor:raced")
    assert len(events) == ROUNDS + 1
    (head,) = [h for h in stores[0].stream_heads() if h.stream_id == "actor:raced"]
    assert (head.version, head.head) == (ROUNDS + 1, events[-1].hash())
    assert [e.data()["values"]["by"] for e in events[1:]] == [w[0] for w in wins]
