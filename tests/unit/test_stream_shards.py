"""A long-running stream reader keeps no entry for shards the stream has trimmed."""

from __future__ import annotations

from typing import Any

from adapters.dynamodb.streams import DynamoDBStreamFeed


class RollingStream:
    """A stream whose shards are named by the test; each read ends its shard."""

    def __init__(self) -> None:
        self.shards = ["s1"]

    def describe_stream(self, **_: Any) -> dict[str, Any]:
        return {"StreamDescription": {"Shards": [{"ShardId": s} for s in self.shards]}}

    def get_shard_iterator(self, *, ShardId: str, **_: Any) -> dict[str, Any]:
        return {"ShardIterator": f"it-{ShardId}"}

    def get_records(self, *, ShardIterator: str, **_: Any) -> dict[str, Any]:
        seq = ShardIterator.removeprefix("it-")
        return {"Records": [{"dynamodb": {"SequenceNumber": seq}}], "NextShardIterator": None}


def test_shards_read_to_their_end_are_forgotten_once_the_stream_trims_them() -> None:
    stream = RollingStream()
    feed = DynamoDBStreamFeed(stream, "arn", select=lambda records: [])
    for n in range(2, 50):  # the stream rolls on; each old shard is read to its end
        feed.poll(0)
        stream.shards = [f"s{n - 1}", f"s{n}"]  # the older ones trimmed
        feed.poll(0)  # nothing new: discovers

    assert set(feed.iterators) <= {"s48", "s49"}
    assert set(feed.last_sequence) <= {"s48", "s49"}


def test_a_closed_shard_still_listed_is_kept_so_it_is_not_read_again() -> None:
    stream = RollingStream()
    feed = DynamoDBStreamFeed(stream, "arn", select=lambda records: [])
    feed.poll(0)  # s1 read to its end
    stream.shards = ["s1", "s2"]
    feed.poll(0)

    assert feed.iterators["s1"] is None
