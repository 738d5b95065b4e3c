"""Regressions in the in-process runtime loops, found while hardening views."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from eventsourcing.persistence import Tracking

from adapters.runtime import Runtime, subscriber_runs
from api.testing import open_test_ledger
from domain.errors import StoreUnavailable
from projections.ports import TrackedViewStore, ViewRecord
from projections.status import STATUS_VIEW


class FailsOnce:
    """A tracked view store whose first tracked write fails (a transient outage)."""

    def __init__(self, inner: TrackedViewStore) -> None:
        self.inner = inner
        self.failed = False

    def put_views(self, records: Sequence[ViewRecord], tracking: Sequence[Tracking]) -> int:
        if not self.failed:
            self.failed = True
            raise StoreUnavailable()
        return self.inner.put_views(records, tracking)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_transient_view_failure_does_not_drop_the_rest_of_the_batch() -> None:
    """The projector loop took a whole batch from its feed (whose position had
    already moved on) and one failing stream aborted it: every later stream of
    the batch kept a stale view until it changed again, which a settled attempt
    never does. Now nothing of a failed batch is recorded (rows and position are
    one write) and the subscriber reads it again from its recorded position."""
    embedded = open_test_ledger()
    ledger = embedded.wiring
    alice = embedded.add_approver()
    first, second = (embedded.approved(alice, embedded.fake_spec()) for _ in range(2))
    failing = FailsOnce(ledger.views)
    ledger.views = failing  # type: ignore[assignment]
    runtime = Runtime(ledger, None, recovery_interval=3600, recovery=False, poll_seconds=0)
    runtime.subscribers = subscriber_runs(ledger)
    (run,) = runtime.subscribers
    with pytest.raises(StoreUnavailable):
        runtime.run_subscriber_once(run)
    run.reader.reset()  # what the loop does after a failed step
    while runtime.run_subscriber_once(run):
        pass
    assert failing.failed
    for attempt_id in (first, second):
        view = ledger.views.get_view(STATUS_VIEW, attempt_id)
        assert view is not None, attempt_id
        assert view.data["status"] == "queued"
    lag = ledger.projection_lag()["status"]
    assert (lag.events_behind, lag.oldest_age_seconds) == (0, 0.0)


class TwoShardStream:
    """A DynamoDB Streams client with two shards; shard B fails on demand."""

    def __init__(self) -> None:
        self.fail_b: list[Exception] = []
        self.records = {"A": [self.record("att_a", "1")], "B": [self.record("att_b", "2")]}
        self.iterator_requests: list[tuple[str, str, str | None]] = []

    @staticmethod
    def record(attempt_id: str, sequence: str) -> dict[str, Any]:
        return {
            "eventName": "INSERT",
            "dynamodb": {
                "SequenceNumber": sequence,
                "NewImage": {
                    "pk": {"S": attempt_id},
                    "topic": {"S": "domain.attempt:ExecutionAttempt.Queued"},
                },
            },
        }

    def describe_stream(self, StreamArn: str) -> dict[str, Any]:
        return {"StreamDescription": {"Shards": [{"ShardId": "A"}, {"ShardId": "B"}]}}

    def get_shard_iterator(
        self,
        StreamArn: str,
        ShardId: str,
        ShardIteratorType: str,
        SequenceNumber: str | None = None,
    ) -> dict[str, str]:
        self.iterator_requests.append((ShardId, ShardIteratorType, SequenceNumber))
        return {"ShardIterator": f"{ShardId}:0"}

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:
        shard, position = ShardIterator.split(":")
        if shard == "B" and self.fail_b:
            raise self.fail_b.pop(0)
        pending = self.records[shard][int(position) :]
        return {"Records": pending, "NextShardIterator": f"{shard}:{len(self.records[shard])}"}


def client_error(code: str) -> Exception:
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": "injected"}}, "GetRecords")


def test_a_failing_shard_does_not_lose_what_the_other_shards_returned() -> None:
    """The local stream reader read shard A (moving its iterator on), then shard
    B failed and the whole poll raised: A's records were gone for good, which
    for the projector means stale views. A failing shard is skipped and read
    again on the next poll; the others' records are returned."""
    from adapters.dynamodb.streams import DynamoDBStreamFeed

    stream = TwoShardStream()
    stream.fail_b.append(client_error("InternalServerError"))
    feed = DynamoDBStreamFeed(stream, "arn:stream")
    assert feed.poll(0) == ["att_a"]
    assert feed.poll(0) == ["att_b"]
    assert feed.poll(0) == []


def test_an_expired_shard_iterator_is_renewed_after_the_last_record_seen() -> None:
    """An expired iterator made every later poll of the shard fail, forever."""
    from adapters.dynamodb.streams import DynamoDBStreamFeed

    stream = TwoShardStream()
    feed = DynamoDBStreamFeed(stream, "arn:stream")
    assert sorted(feed.poll(0)) == ["att_a", "att_b"]
    stream.records["B"].append(TwoShardStream.record("att_b2", "3"))
    stream.fail_b.append(client_error("ExpiredIteratorException"))
    assert feed.poll(0) == []
    assert stream.iterator_requests[-1] == ("B", "AFTER_SEQUENCE_NUMBER", "2")
    stream.records["B"] = stream.records["B"][1:]  # the renewed iterator starts after "2"
    assert feed.poll(0) == ["att_b2"]
