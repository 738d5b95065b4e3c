"""The DynamoDB ledger recorder: the production backend.

Writes go through :mod:`adapters.dynamodb.transactions`; reads are strongly
consistent queries on the table (streams, lookups) and queries on the ``due``
index for recovery. Nothing here scans the table.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any
from uuid import UUID

from botocore.exceptions import BotoCoreError, ClientError
from eventsourcing.persistence import StoredEvent

from adapters.dynamodb import items as it
from adapters.dynamodb.client import (
    DynamoDBClient,
    DynamoDBUnavailableError,
    Retrier,
    make_client,
    request_error,
)
from adapters.dynamodb.due import DueIndexReader
from adapters.dynamodb.layout import LEGACY as LEGACY_LAYOUT
from adapters.dynamodb.layout import TableLayout, layout_key, parse_layout
from adapters.dynamodb.transactions import CommitWriter, LayoutChangedError, plan_commit
from adapters.recorder import LedgerRecorder
from domain.ports import DueWork, Lookup, ReadCheck, StreamHead

if TYPE_CHECKING:
    from adapters.backend import Backend

LAYOUT_TTL = 60.0
"""Seconds a process keeps the table's layout record before reading it again."""
LAYOUT_REPLANS = 4
HEAD_READERS = 8

_EVENT_NAMES = {"#pk": it.PK, "#sk": it.SK, "#topic": it.TOPIC, "#state": it.STATE}


class DynamoDBLedgerRecorder(LedgerRecorder):
    """Ledger recorder on one DynamoDB table (see docs/dynamodb.md).

    ``client`` is injected; without one a client is built from boto3's own
    configuration (``AWS_ENDPOINT_URL_DYNAMODB``, region, credentials) and
    closed by :meth:`close`. ``key_prefix`` separates key spaces that share a
    table (the eventsourcing snapshot store uses ``snapshot#``).
    """

    def __init__(
        self,
        table_name: str,
        client: DynamoDBClient | None = None,
        due_buckets: int = 16,
        *,
        key_prefix: str = "",
        retrier: Retrier | None = None,
        sleep: Callable[[float], None] | None = None,
        layout_ttl: float = LAYOUT_TTL,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 1 <= due_buckets <= 256:
            raise ValueError("due_buckets must be between 1 and 256")
        self.table_name = table_name
        self.due_buckets = due_buckets
        self.key_prefix = key_prefix
        self._owns_client = client is None
        self.client: DynamoDBClient = client if client is not None else make_client()
        self.retrier = retrier or Retrier(sleep=sleep or time.sleep)
        self._writer = CommitWriter(self.client, self.retrier)
        self._layout: TableLayout | None = None
        self._layout_read_at = 0.0
        self._layout_ttl = layout_ttl
        self._monotonic = monotonic
        self._due = DueIndexReader(self.table_name, self._call, lambda: self.client)

    # -- the table's layout record ---------------------------------------------

    @property
    def layout(self) -> TableLayout:
        """The table's layout (``adapters.dynamodb.layout``), read once and again
        after ``layout_ttl`` seconds: a migration reaches a running process
        without a restart. A stale one is never wrong, only slower: copies and
        buckets only ever grow, and a commit that changes a striped record is
        refused (and planned again) when the shard count moved."""
        now = self._monotonic()
        if self._layout is None or now - self._layout_read_at >= self._layout_ttl:
            self._layout = self.read_layout()
            self._layout_read_at = now
        return self._layout

    def read_layout(self) -> TableLayout:
        """The layout record as stored now (a consistent read)."""
        if self.key_prefix:  # shards and heads cover the ledger's own streams only
            return LEGACY_LAYOUT
        answer = self._call(
            lambda: self.client.get_item(
                TableName=self.table_name, Key=layout_key(), ConsistentRead=True
            )
        )
        return parse_layout(answer.get("Item"))

    def forget_layout(self) -> None:
        """Read the layout record again on next use."""
        self._layout = None

    # -- writes --------------------------------------------------------------

    def insert_events(
        self,
        stored_events: Sequence[StoredEvent],
        *,
        read_checks: Sequence[ReadCheck] = (),
        lookups: Sequence[Lookup] = (),
        due: Sequence[DueWork] = (),
        heads: Sequence[StreamHead] = (),
        **kwargs: object,
    ) -> Sequence[int] | None:
        needs_layout = (
            bool(heads)
            or bool(due)
            or any(it.is_striped(str(e.originator_id)) for e in stored_events)
            or any(it.is_striped(c.stream_id) for c in read_checks)
        )
        for _ in range(LAYOUT_REPLANS):
            layout = self.layout if needs_layout else LEGACY_LAYOUT
            plan = plan_commit(
                self.table_name,
                stored_events,
                read_checks,
                lookups,
                due,
                heads,
                due_buckets=layout.due_bucket_count(self.due_buckets),
                key_prefix=self.key_prefix,
                layout=layout,
            )
            try:
                self._writer.write(plan)
            except LayoutChangedError:
                self.forget_layout()
                continue
            return None
        raise DynamoDBUnavailableError("the table's layout record kept changing under a commit")

    # -- reads ---------------------------------------------------------------

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        if limit is not None and limit <= 0:
            return []
        values: dict[str, Any] = {":pk": {"S": it.stream_pk(originator_id, self.key_prefix)}}
        condition = "#pk = :pk"
        if gt is not None and lte is not None:
            if gt >= lte:
                return []
            condition += " AND #sk BETWEEN :lo AND :hi"
            values[":lo"] = {"N": str(gt + 1)}
            values[":hi"] = {"N": str(lte)}
        elif gt is not None:
            condition += " AND #sk > :lo"
            values[":lo"] = {"N": str(gt)}
        elif lte is not None:
            condition += " AND #sk <= :hi"
            values[":hi"] = {"N": str(lte)}
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": _EVENT_NAMES,
            "ExpressionAttributeValues": values,
            "ProjectionExpression": "#sk, #topic, #state",
            "ConsistentRead": True,
            "ScanIndexForward": not desc,
        }
        return [it.stored_event(item, originator_id) for item in self._query(request, limit=limit)]

    def select_events_at(self, keys: Sequence[tuple[str, int]]) -> list[StoredEvent]:
        """One consistent ``BatchGetItem`` per 100 slots (unprocessed keys asked again)."""
        by_pk = {it.stream_pk(stream_id, self.key_prefix): stream_id for stream_id, _ in keys}
        wanted = list(
            dict.fromkeys(
                (it.stream_pk(stream_id, self.key_prefix), version) for stream_id, version in keys
            )
        )
        found: list[StoredEvent] = []
        for start in range(0, len(wanted), 100):
            batch = [it.event_key(pk, version) for pk, version in wanted[start : start + 100]]
            for item in self._batch_get(batch, "#pk, #sk, #topic, #state", _EVENT_NAMES):
                found.append(it.stored_event(item, by_pk[item[it.PK]["S"]]))
        return found

    def select_latest_events(self, stream_ids: Sequence[str]) -> list[StoredEvent]:
        """Two consistent ``BatchGetItem``s for up to 100 streams: their head-index
        entries (each written in the same transaction as the stream's newest
        event, so it names that event's version), then the events at those
        versions. A stream without an entry (written before the head index, or
        never written) is read by a ``Query`` of its own, so an answer that
        leaves a stream out means it has no events."""
        if self.key_prefix:  # the head index covers the ledger's own streams only
            return super().select_latest_events(stream_ids)
        wanted = list(dict.fromkeys(it.stream_pk(s) for s in stream_ids))
        versions: dict[str, int] = {}
        for start in range(0, len(wanted), 100):
            keys = [it.head_key(s) for s in wanted[start : start + 100]]
            for item in self._batch_get(keys, "#i, #v", {"#i": it.STREAM_ID, "#v": it.VERSION}):
                versions[item[it.STREAM_ID]["S"]] = int(item[it.VERSION]["N"])
        found = {str(e.originator_id): e for e in self.select_events_at(list(versions.items()))}
        for stream_id in wanted:
            if stream_id not in found:
                found.update(
                    (stream_id, e) for e in self.select_events(stream_id, desc=True, limit=1)
                )
        return [found[s] for s in wanted if s in found]

    def select_stream_versions(self, stream_ids: Sequence[str]) -> dict[str, int]:
        """From the head index alone (a ``BatchGetItem`` per 100 streams): a stream
        without an entry is taken to have no events, which holds for the streams
        this is asked about (every commit writes their head with their events).
        Without a ``Query`` per missing stream, a grant's unused shards cost nothing."""
        if self.key_prefix:
            return super().select_stream_versions(stream_ids)
        wanted = list(dict.fromkeys(it.stream_pk(s) for s in stream_ids))
        versions: dict[str, int] = {}
        for start in range(0, len(wanted), 100):
            keys = [it.head_key(s) for s in wanted[start : start + 100]]
            for item in self._batch_get(keys, "#i, #v", {"#i": it.STREAM_ID, "#v": it.VERSION}):
                versions[item[it.STREAM_ID]["S"]] = int(item[it.VERSION]["N"])
        return versions

    def grant_use_shards(self) -> int:
        """As the table's layout record says (0 on a table that records none: there,
        a version before use shards may still run; docs/dynamodb.md)."""
        return 0 if self.key_prefix else self.layout.grant_shards

    def _batch_get(
        self, keys: list[dict[str, Any]], projection: str, names: Mapping[str, str]
    ) -> list[dict[str, Any]]:
        """One consistent ``BatchGetItem`` of at most 100 keys (unprocessed keys asked again)."""
        pending: dict[str, Any] = {
            self.table_name: {
                "Keys": keys,
                "ConsistentRead": True,
                "ProjectionExpression": projection,
                "ExpressionAttributeNames": dict(names),
            }
        }
        found: list[dict[str, Any]] = []
        for round_number in range(1, self.retrier.max_attempts + 1):
            answer = self._call(lambda p=pending: self.client.batch_get_item(RequestItems=p))  # type: ignore[misc]
            found.extend(answer.get("Responses", {}).get(self.table_name, []))
            pending = answer.get("UnprocessedKeys") or {}
            if not pending:
                return found
            self.retrier.sleep(self.retrier.delay(round_number))
        raise DynamoDBUnavailableError("DynamoDB left keys of a BatchGetItem unprocessed")

    def make_backend(self) -> Backend:
        from adapters.dynamodb.backend import DynamoDBBackend

        return DynamoDBBackend(self)

    def get_lookup(self, key: str, *, now: datetime | None = None) -> Mapping[str, str] | None:
        answer = self._call(
            lambda: self.client.get_item(
                TableName=self.table_name,
                Key=it.lookup_key(key),
                ConsistentRead=True,
                ProjectionExpression="#value, #expires",
                ExpressionAttributeNames={"#value": it.VALUE, "#expires": it.EXPIRES_AT},
            )
        )
        item = answer.get("Item")
        if item is None or (now is not None and it.lookup_expired(item, now)):
            return None
        return it.lookup_value(item)

    def delete_lookup(self, key: str) -> bool:
        answer = self._call(
            lambda: self.client.delete_item(
                TableName=self.table_name, Key=it.lookup_key(key), ReturnValues="ALL_OLD"
            )
        )
        return bool(answer.get("Attributes"))

    def delete_expired_lookups(self, now: datetime, limit: int) -> int:
        """None here: every expiring lookup carries the TTL attribute
        (``expires_at_epoch``), and DynamoDB deletes it, no scan needed."""
        return 0

    def select_due(
        self, upto: datetime, limit: int, cursor: str | None = None
    ) -> tuple[list[DueWork], str | None]:
        # The count as stored now, never a cached one: writers may already use a
        # count a migration raised, and a reader that enumerated fewer buckets
        # would never see the entries in the others. Counts only grow, so every
        # count a writer holds is at most this one.
        buckets = self.read_layout().due_bucket_count(self.due_buckets)
        return self._due.select(upto, limit, cursor, buckets)

    def select_heads(self) -> Iterator[StreamHead]:
        """The head index: one query per ``heads#`` partition of the ``list`` index
        (as many as the layout record says now, ``HEAD_READERS`` at a time),
        merged in stream-id order (the index sorts by UTF-8 bytes, as Python does).
        A digest holds every head anyway, so each bucket is read whole."""
        buckets = self.read_layout().head_buckets  # as stored now: it may have grown
        with ThreadPoolExecutor(HEAD_READERS, thread_name_prefix="heads") as pool:
            per_bucket = list(pool.map(lambda b: list(self._head_bucket(b)), range(buckets)))
        return heapq.merge(*per_bucket, key=lambda head: head.stream_id)

    def select_stream_ids(self, prefix: str = "") -> Iterator[str]:
        """A paginated ``Scan`` for every version-1 event item (admin use only)."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "ProjectionExpression": "#pk",
            "FilterExpression": "#sk = :one",
            "ExpressionAttributeNames": {"#pk": it.PK, "#sk": it.SK},
            "ExpressionAttributeValues": {":one": {"N": "1"}},
            "ConsistentRead": True,
        }
        ids: list[str] = []
        while True:
            page = self._call(partial(self.client.scan, **request))
            for item in page.get("Items", []):
                pk = item[it.PK]["S"]
                if pk.startswith(self.key_prefix + prefix) and not pk.startswith(
                    it.RESERVED_PREFIXES
                ):
                    ids.append(pk[len(self.key_prefix) :])
            if "LastEvaluatedKey" not in page:
                return iter(sorted(ids))
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def insert_head_if_absent(self, head: StreamHead) -> bool:
        try:
            self.retrier.call(
                lambda: self.client.put_item(
                    TableName=self.table_name,
                    Item=it.head_item(head, self.layout.head_buckets, it.now_text()),
                    ConditionExpression="attribute_not_exists(#pk)",
                    ExpressionAttributeNames={"#pk": it.PK},
                )
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise request_error(exc) from exc
        except BotoCoreError as exc:
            raise request_error(exc) from exc
        return True

    def _head_bucket(self, number: int) -> Iterator[StreamHead]:
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": it.LIST_INDEX,
            "KeyConditionExpression": "#p = :p",
            "ExpressionAttributeNames": {
                "#p": it.LIST_PK,
                "#i": it.STREAM_ID,
                "#v": it.VERSION,
                "#h": it.CHAIN_HEAD,
            },
            "ExpressionAttributeValues": {":p": {"S": it.head_bucket_name(number)}},
            "ProjectionExpression": "#i, #v, #h",
        }
        for item in self._query(request, limit=None):
            yield it.stream_head(item)

    # -- plumbing ------------------------------------------------------------

    def _query(self, request: dict[str, Any], *, limit: int | None) -> Iterator[dict[str, Any]]:
        """Every item of a query, following ``LastEvaluatedKey``, at most ``limit``."""
        returned = 0
        start: dict[str, Any] | None = None
        while True:
            page_request = dict(request)
            if limit is not None:
                page_request["Limit"] = limit - returned
            if start is not None:
                page_request["ExclusiveStartKey"] = start
            page = self._call(partial(self.client.query, **page_request))
            for item in page.get("Items", []):
                yield item
                returned += 1
            start = page.get("LastEvaluatedKey")
            if start is None or (limit is not None and returned >= limit):
                return

    def _call(self, operation: Callable[[], Any]) -> Any:
        try:
            return self.retrier.call(operation)
        except (ClientError, BotoCoreError) as exc:
            raise request_error(exc) from exc

    def close(self) -> None:
        self._due.close()
        if self._owns_client:
            self.client.close()
