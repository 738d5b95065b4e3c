"""Reading the ``due`` index: every bucket the table has, merged oldest first.

An attempt's due entry is in bucket ``sha256(attempt id) mod N`` (``items.due_bucket``),
N being the count the table's layout record holds (``layout.due_buckets``; a
table that records none uses the process's ``LEDGER_DUE_WORK_BUCKETS``). A page
of due work queries every bucket for ``due_sk <= now`` and merges the answers,
so it is the same page, with the same cursor, as the embedded stores give.

With hundreds of buckets a page must not read hundreds of pages' worth: each
bucket is asked for a few rows first (all buckets at once, ``DUE_READERS`` at a
time), and a bucket's further rows are read only when the merge reaches them.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from functools import partial
from itertools import islice
from typing import Any

from adapters.dynamodb import items as it
from adapters.recorder import check_due_page
from domain.ports import DueWork

DUE_READERS = 16
SEQUENTIAL_BUCKETS = 16
"""Up to this many buckets are queried one after the other (as before the count
was recorded, and deterministically for the seeded fault clients of the chaos
simulation); more are queried ``DUE_READERS`` at a time."""
PAGE_MIN = 8

Row = tuple[str, DueWork]
Page = tuple[list[Row], dict[str, Any] | None]


class DueIndexReader:
    """Pages of due work from the ``due`` index of one table."""

    def __init__(
        self, table_name: str, call: Callable[[Callable[[], Any]], Any], client: Callable[[], Any]
    ) -> None:
        self.table_name = table_name
        self._call = call
        self._client = client
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def select(
        self, upto: datetime, limit: int, cursor: str | None, buckets: int
    ) -> tuple[list[DueWork], str | None]:
        upper = f"{int(upto.timestamp() * 1000):015d}#~"
        if limit <= 0 or (cursor is not None and cursor >= upper):
            return [], None
        wanted = limit + 1
        page = min(wanted, max(PAGE_MIN, 2 * -(-wanted // buckets)))
        requests = [self._request(b, upper, cursor, page) for b in range(buckets)]
        if buckets <= SEQUENTIAL_BUCKETS:
            firsts = [self._page(r, None) for r in requests]
        else:
            firsts = list(self._readers().map(lambda r: self._page(r, None), requests))
        per_bucket = [self._rows(r, first) for r, first in zip(requests, firsts, strict=True)]
        merged = heapq.merge(*per_bucket, key=lambda row: row[0])
        # BETWEEN is inclusive: the entry equal to the cursor is dropped here.
        after = (row for row in merged if cursor is None or row[0] > cursor)
        return check_due_page(list(islice(after, wanted)), limit)

    def _readers(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(DUE_READERS, thread_name_prefix="due")
            return self._pool

    def _request(self, bucket: int, upper: str, cursor: str | None, page: int) -> dict[str, Any]:
        values: dict[str, Any] = {":b": {"S": it.due_bucket_name(bucket)}, ":hi": {"S": upper}}
        if cursor is None:
            condition = "#b = :b AND #s <= :hi"
        else:
            condition = "#b = :b AND #s BETWEEN :lo AND :hi"
            values[":lo"] = {"S": cursor}
        return {
            "TableName": self.table_name,
            "IndexName": it.DUE_INDEX,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": {
                "#b": it.DUE_BUCKET,
                "#s": it.DUE_SK,
                "#a": it.ATTEMPT_ID,
                "#n": it.NEXT_ACTION_AT,
            },
            "ExpressionAttributeValues": values,
            "ProjectionExpression": "#s, #a, #n",
            "Limit": page,
        }

    def _page(self, request: dict[str, Any], start: dict[str, Any] | None) -> Page:
        """One page of a bucket, oldest first, and where the next one starts."""
        sent = request if start is None else {**request, "ExclusiveStartKey": start}
        answer = self._call(partial(self._client().query, **sent))
        rows = [it.due_entry(item) for item in answer.get("Items", [])]
        return rows, answer.get("LastEvaluatedKey")

    def _rows(self, request: dict[str, Any], first: Page) -> Iterator[Row]:
        rows, start = first
        while True:
            yield from rows
            if start is None:
                return
            rows, start = self._page(request, start)

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
                self._pool = None
