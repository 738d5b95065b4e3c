"""Reading the table's stream with the DynamoDB Streams API (local runtime).

Two readers share the shard handling: :class:`DynamoDBStreamFeed` wakes the
worker (a hint; recovery covers whatever it misses), and
:class:`StreamLogReader` feeds a subscriber of the log: it reads every shard
from ``TRIM_HORIZON``, or just after the position the subscriber recorded for
that shard (a ``tracking#<subscriber>@<shard>`` item written in the same
transaction as the views). A recorded position the stream no longer holds
(older than its 24-hour retention) is a gap: it is reported, and the runtime
covers it with a rebuild. On AWS the Lambda event source mapping keeps the
position instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from adapters.backend import Lag
from adapters.dynamodb.client import DynamoDBStreamsClient, error_code
from adapters.dynamodb.positions import (
    TRACKING_REFRESH_SECONDS,
    ShardTracking,
    shard_tracking_name,
)
from adapters.dynamodb.views import DynamoDBViewStore
from adapters.streams import attempt_streams_from_records, work_from_records
from projections.ports import LogBatch, ViewRecord

if TYPE_CHECKING:
    from mypy_boto3_dynamodbstreams.literals import ShardIteratorTypeType
    from mypy_boto3_dynamodbstreams.type_defs import RecordTypeDef

logger = logging.getLogger("ledger.streams")

RECORDS_PER_READ = 100


def list_shards(client: DynamoDBStreamsClient, stream_arn: str) -> list[str]:
    """Every shard id of the stream, following ``LastEvaluatedShardId``."""
    shards: list[str] = []
    request: dict[str, Any] = {"StreamArn": stream_arn}
    while True:
        description = client.describe_stream(**request)["StreamDescription"]
        shards.extend(shard["ShardId"] for shard in description.get("Shards", []))
        last = description.get("LastEvaluatedShardId")
        if not last:
            return shards
        request["ExclusiveStartShardId"] = last


def forget_trimmed_shards(
    iterators: dict[str, str | None], listed: list[str], *more: dict[str, str]
) -> None:
    """Drop the shards read to their end (iterator None) that the stream no longer
    lists: a stream rolls to new shards every few hours and trims them after 24
    hours, so a long-running reader would otherwise keep one entry per shard it
    ever read. A closed shard still listed stays, so it is not read again."""
    still = set(listed)
    for shard_id in [k for k, v in iterators.items() if v is None and k not in still]:
        del iterators[shard_id]
        for found in more:
            found.pop(shard_id, None)


class DynamoDBStreamFeed:
    """Wakes the worker from the stream (starting at ``LATEST``).

    ``select`` turns a batch of records into stream ids: work for the worker by
    default.
    """

    trigger = "stream"

    def __init__(
        self,
        streams_client: DynamoDBStreamsClient,
        stream_arn: str,
        select: Callable[[list[RecordTypeDef]], list[str]] = work_from_records,
    ) -> None:
        self.client = streams_client
        self.stream_arn = stream_arn
        self.select = select
        self.iterators: dict[str, str | None] = {}
        self.last_sequence: dict[str, str] = {}
        self._discover(initial=True)

    def _renew(self, shard_id: str) -> None:
        """A fresh iterator just after the last record seen (records are hints, so
        reading one again is harmless; skipping one is not)."""
        request: dict[str, Any] = {"StreamArn": self.stream_arn, "ShardId": shard_id}
        if shard_id in self.last_sequence:
            request.update(
                ShardIteratorType="AFTER_SEQUENCE_NUMBER",
                SequenceNumber=self.last_sequence[shard_id],
            )
        else:
            request["ShardIteratorType"] = "TRIM_HORIZON"
        try:
            self.iterators[shard_id] = self.client.get_shard_iterator(**request)["ShardIterator"]
        except Exception as exc:  # tried again on the next poll
            logger.warning("stream shard iterator renewal failed: %s", type(exc).__name__)

    def _discover(self, *, initial: bool = False) -> None:
        description = self.client.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]
        listed = [shard["ShardId"] for shard in description.get("Shards", [])]
        forget_trimmed_shards(self.iterators, listed, self.last_sequence)
        for shard_id in listed:
            if shard_id in self.iterators:
                continue
            kind: ShardIteratorTypeType = "LATEST" if initial else "TRIM_HORIZON"
            self.iterators[shard_id] = self.client.get_shard_iterator(
                StreamArn=self.stream_arn, ShardId=shard_id, ShardIteratorType=kind
            )["ShardIterator"]

    def poll(self, wait_seconds: float) -> list[str]:
        records: list[RecordTypeDef] = []
        for shard_id, iterator in list(self.iterators.items()):
            if iterator is None:
                continue
            try:
                answer = self.client.get_records(ShardIterator=iterator, Limit=RECORDS_PER_READ)
            except Exception as exc:
                # The other shards' iterators have moved on already: keep their
                # records, and read this shard again next time from where it was.
                logger.warning("stream shard read failed: %s", type(exc).__name__)
                if error_code(exc) == "ExpiredIteratorException":
                    self._renew(shard_id)
                continue
            self.iterators[shard_id] = answer.get("NextShardIterator")
            found = answer.get("Records", [])
            if found:
                self.last_sequence[shard_id] = found[-1]["dynamodb"]["SequenceNumber"]
            records.extend(found)
        if not records:
            self._discover()
            time.sleep(wait_seconds)
        return self.select(records)


class StreamLogReader:
    """One subscriber's tracked reading of every shard (``LogReader``)."""

    def __init__(
        self,
        name: str,
        streams_client: DynamoDBStreamsClient,
        stream_arn: str,
        views: DynamoDBViewStore,
        select: Callable[[list[RecordTypeDef]], list[str]] = (attempt_streams_from_records),
    ) -> None:
        self.name = name
        self.client = streams_client
        self.stream_arn = stream_arn
        self.views = views
        self.select = select
        self.iterators: dict[str, str | None] = {}
        self.gaps: list[str] = []
        # Records read and not yet applied: their count and the oldest one's time.
        self.pending = 0
        self.oldest_pending: datetime | None = None
        self.caught_up = False  # until a read finds nothing new, the lag is a lower bound
        self.renewed_at: float | None = None  # monotonic time the positions were last renewed
        self.reset()

    def reset(self) -> None:
        self.iterators = {}
        self.pending, self.oldest_pending = 0, None
        self.caught_up = False
        self._discover()

    def _discover(self) -> None:
        listed = list_shards(self.client, self.stream_arn)
        forget_trimmed_shards(self.iterators, listed)
        for shard_id in listed:
            if shard_id not in self.iterators:
                self.iterators[shard_id] = self._open(shard_id)
        self._renew_positions(listed)

    def _renew_positions(self, listed: list[str]) -> None:
        """Positions expire (TTL) a week after their last write; the position of a
        shard still listed may be needed for a while yet (a shard with nothing new
        for this subscriber is never written), so it is renewed once a day."""
        now = time.monotonic()
        if self.renewed_at is not None and now - self.renewed_at < TRACKING_REFRESH_SECONDS:
            return
        try:
            self.views.renew_tracking([shard_tracking_name(self.name, s) for s in listed])
            self.renewed_at = now
        except Exception as exc:  # tried again on the next discovery
            logger.warning(
                "subscriber %s: renewing positions failed: %s", self.name, type(exc).__name__
            )

    def _open(self, shard_id: str) -> str | None:
        base = {"StreamArn": self.stream_arn, "ShardId": shard_id}
        recorded = self.views.sequence_number(shard_tracking_name(self.name, shard_id))
        if recorded is not None:
            try:
                answer = self.client.get_shard_iterator(
                    **base, ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=recorded
                )
                return str(answer["ShardIterator"])
            except Exception as exc:
                if error_code(exc) != "TrimmedDataAccessException":
                    raise
                self.gaps.append(shard_id)
                logger.warning(
                    "subscriber %s: records after its position in shard %s are "
                    "past the stream's retention; a rebuild covers them",
                    self.name,
                    shard_id,
                )
        answer = self.client.get_shard_iterator(**base, ShardIteratorType="TRIM_HORIZON")
        return str(answer["ShardIterator"])

    def poll(self) -> LogBatch | None:
        records: list[RecordTypeDef] = []
        tracking: list[ShardTracking] = []
        for shard_id, iterator in list(self.iterators.items()):
            if iterator is None:
                continue  # a closed shard read to its end
            answer = self.client.get_records(ShardIterator=iterator, Limit=RECORDS_PER_READ)
            self.iterators[shard_id] = answer.get("NextShardIterator")
            found = answer.get("Records", [])
            if not found:
                continue
            if len(found) >= RECORDS_PER_READ:
                self.caught_up = False
            last = str(found[-1]["dynamodb"]["SequenceNumber"])
            tracking.append(
                ShardTracking(
                    shard_tracking_name(self.name, shard_id), int(last), sequence_number=last
                )
            )
            records.extend(found)
        if not records:
            self._discover()
            self.caught_up = True
            return None
        self.pending = len(records)
        created = [r["dynamodb"].get("ApproximateCreationDateTime") for r in records]
        moments = [_moment(c) for c in created if c is not None]
        self.oldest_pending = min(moments) if moments else None
        selected = tuple(self.select(records))
        # Records of nothing the subscriber reads (among them the subscriber's own
        # view and position items) record no position: writing one would put a
        # new record on the stream for every one read, for ever. After a restart
        # they are read again, which is harmless.
        return LogBatch(stream_ids=selected, tracking=tuple(tracking) if selected else ())

    def advance(self, batch: LogBatch) -> None:
        self.pending, self.oldest_pending = 0, None

    def take_gaps(self) -> list[str]:
        gaps, self.gaps = self.gaps, []
        return gaps

    def start_from_end(self, records: Sequence[ViewRecord]) -> bool:
        # No sequence number names "now" in every shard: the subscriber reads the
        # stream's retention (at most 24 hours) and drops what is older than its start.
        self.views.put_views(records, [])
        return False

    def lag(self, now: datetime) -> Lag:
        age = 0.0
        if self.oldest_pending is not None:
            age = max(0.0, (now - self.oldest_pending).total_seconds())
        return Lag(self.pending, age, exact=self.caught_up)


def _moment(value: datetime | float) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromtimestamp(float(value), UTC)
