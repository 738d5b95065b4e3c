"""The DynamoDB backend: one table for events, lookups, due work, views and
subscriber positions; the table's stream wakes the worker and feeds the
subscribers of the local runtime (on AWS, Lambda event source mappings do)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)
from eventsourcing.persistence import StoredEvent

from adapters.backend import (
    AttemptStreams,
    Backend,
    Lag,
    LogReader,
    PreflightError,
    WorkFeed,
)
from adapters.dynamodb import items as it
from adapters.dynamodb.client import (
    DynamoDBClient,
    DynamoDBStreamsClient,
    client_config,
    request_error,
)
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.dynamodb.streams import DynamoDBStreamFeed, StreamLogReader
from adapters.dynamodb.views import REBUILD_ITEMS, DynamoDBViewStore
from domain.spec import ATTEMPT_ID_PREFIX

if TYPE_CHECKING:
    from adapters.settings import Settings

STREAMS_UNREACHABLE = (
    "cannot reach the DynamoDB Streams endpoint {url} ({error}); set "
    "AWS_ENDPOINT_URL_DYNAMODB_STREAMS (on a local emulator, the same URL as "
    "AWS_ENDPOINT_URL_DYNAMODB)"
)

SCAN_SEGMENTS = 8
"""Parallel segments of a rebuild's Scan (``Segment``/``TotalSegments``), one thread each."""


class DynamoDBBackend(Backend):
    """``streams_client`` is injected, or built from boto3's configuration on first use."""

    kind = "dynamodb"
    rebuild_batch = REBUILD_ITEMS

    def __init__(
        self,
        recorder: DynamoDBLedgerRecorder,
        *,
        streams_client: DynamoDBStreamsClient | None = None,
        make_streams_client: Callable[[], DynamoDBStreamsClient] | None = None,
    ) -> None:
        self.recorder: DynamoDBLedgerRecorder = recorder
        self.views: DynamoDBViewStore = DynamoDBViewStore(
            recorder.client, recorder.table_name, retrier=recorder.retrier
        )
        self._streams_client = streams_client
        self._make_streams_client = make_streams_client
        self._readers: dict[str, StreamLogReader] = {}

    @classmethod
    def open(
        cls,
        table_name: str,
        *,
        client: DynamoDBClient | None = None,
        due_buckets: int = 16,
        streams_client: DynamoDBStreamsClient | None = None,
    ) -> DynamoDBBackend:
        recorder = DynamoDBLedgerRecorder(
            table_name=table_name, client=client, due_buckets=due_buckets
        )
        return cls(recorder, streams_client=streams_client)

    def reopen(self) -> DynamoDBBackend:
        return DynamoDBBackend(
            self.recorder,
            streams_client=self._streams_client,
            make_streams_client=self._make_streams_client,
        )

    @property
    def streams_client(self) -> DynamoDBStreamsClient:
        if self._streams_client is None:
            if self._make_streams_client is not None:
                self._streams_client = self._make_streams_client()
            else:
                import boto3

                self._streams_client = boto3.client("dynamodbstreams")
        return self._streams_client

    def describe(self) -> str:
        return f"dynamodb table {self.recorder.table_name}"

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        dynamodb_client: DynamoDBClient | None = None,
        dynamodb_streams_client: DynamoDBStreamsClient | None = None,
    ) -> DynamoDBBackend:
        return cls.open(
            settings.dynamodb_table,
            client=dynamodb_client,
            due_buckets=settings.due_work_buckets,
            streams_client=dynamodb_streams_client,
        )

    @classmethod
    def preflight(cls, settings: Settings) -> None:
        """The worker and the subscribers read the table's stream: fail at start-up,
        in one line naming the variable, when its endpoint does not answer (a probe
        with short timeouts, from boto3's own configuration)."""
        import boto3

        client = boto3.client(
            "dynamodbstreams", config=client_config(connect_timeout=3, read_timeout=5)
        )
        try:
            client.list_streams(Limit=1)
        except (
            EndpointConnectionError,
            ConnectTimeoutError,
            ReadTimeoutError,
            ConnectionClosedError,
        ) as exc:
            raise PreflightError(
                STREAMS_UNREACHABLE.format(url=client.meta.endpoint_url, error=type(exc).__name__)
            ) from exc
        finally:
            client.close()

    def stream_arn(self) -> str:
        table = self._call(
            lambda: self.recorder.client.describe_table(TableName=self.recorder.table_name)
        )["Table"]
        return str(table["LatestStreamArn"])

    def work_feed(self) -> WorkFeed:
        return DynamoDBStreamFeed(self.streams_client, self.stream_arn())

    def log_reader(self, name: str) -> LogReader:
        if name not in self._readers:
            self._readers[name] = StreamLogReader(
                name, self.streams_client, self.stream_arn(), self.views
            )
        return self._readers[name]

    def lag(self, name: str, now: datetime) -> Lag | None:
        running = self._readers.get(name)
        return running.lag(now) if running is not None else None

    def attempt_ids(self) -> Iterator[str]:
        """A consistent Scan for the first event of every attempt stream, in
        ``SCAN_SEGMENTS`` parallel segments, each page through the recorder's
        retrier (an admin operation, never on a request path)."""
        request: dict[str, Any] = {
            "TableName": self.recorder.table_name,
            "ProjectionExpression": "#pk",
            "FilterExpression": "begins_with(#pk, :att) AND #sk = :one",
            "ExpressionAttributeNames": {"#pk": it.PK, "#sk": it.SK},
            "ExpressionAttributeValues": {":att": {"S": ATTEMPT_ID_PREFIX}, ":one": {"N": "1"}},
            "ConsistentRead": True,
        }
        with ThreadPoolExecutor(
            max_workers=SCAN_SEGMENTS, thread_name_prefix="rebuild-scan"
        ) as pool:
            for items in pool.map(lambda n: self._scan_all(request, n), range(SCAN_SEGMENTS)):
                yield from (item[it.PK]["S"] for item in items)

    def _scan_all(self, request: dict[str, Any], segment: int) -> list[dict[str, Any]]:
        """Every item of one segment of a Scan (all its pages)."""
        page_request = {**request, "Segment": segment, "TotalSegments": SCAN_SEGMENTS}
        items: list[dict[str, Any]] = []
        while True:
            page = self._scan(dict(page_request))
            items += page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return items
            page_request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def attempt_streams(self, batch: int) -> Iterator[AttemptStreams]:
        """Every attempt event in one consistent Scan split into ``SCAN_SEGMENTS``
        parallel segments (a stream's items all fall in one segment). A stream
        whose versions read are not 1..n (it grew between two pages) is read
        again with a consistent Query."""
        with ThreadPoolExecutor(
            max_workers=SCAN_SEGMENTS, thread_name_prefix="rebuild-scan"
        ) as pool:
            pending: AttemptStreams = []
            for found in pool.map(self._scan_segment, range(SCAN_SEGMENTS)):
                for stream_id, events in sorted(found.items()):
                    pending.append((stream_id, self._complete(stream_id, events)))
                    if len(pending) >= batch:
                        yield pending
                        pending = []
            if pending:
                yield pending

    def _scan_segment(self, segment: int) -> dict[str, list[StoredEvent]]:
        request: dict[str, Any] = {
            "TableName": self.recorder.table_name,
            "FilterExpression": "begins_with(#pk, :att)",
            "ExpressionAttributeNames": {"#pk": it.PK},
            "ExpressionAttributeValues": {":att": {"S": ATTEMPT_ID_PREFIX}},
            "ConsistentRead": True,
        }
        found: dict[str, list[StoredEvent]] = {}
        for item in self._scan_all(request, segment):
            stream_id = item[it.PK]["S"]
            found.setdefault(stream_id, []).append(it.stored_event(item, stream_id))
        return found

    def _complete(self, stream_id: str, events: list[StoredEvent]) -> list[StoredEvent]:
        events.sort(key=lambda e: e.originator_version)
        if [e.originator_version for e in events] == list(range(1, len(events) + 1)):
            return events
        return list(self.recorder.select_events(stream_id))

    def _scan(self, request: dict[str, Any]) -> Any:
        return self._call(lambda: self.recorder.client.scan(**request))

    def _call(self, operation: Callable[[], Any]) -> Any:
        try:
            return self.recorder.retrier.call(operation)
        except (ClientError, BotoCoreError) as exc:
            raise request_error(exc) from exc
