"""Rebuilding views from the log, and checking them against the live ones.

The status view (and the lists it feeds) and the due-work index are derived
from attempt streams only, so a rebuild folds every attempt stream again.
Enumerating the streams is the one place a batch job may read the whole
store: SQL on the embedded stores, a paginated Scan on DynamoDB (an admin
operation, never on the request or worker path).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from adapters.bootstrap import Ledger
from domain.attempt import ExecutionAttempt
from domain.ports import Commit, DueWork
from domain.spec import ATTEMPT_ID_PREFIX
from projections.ports import ViewRecord
from projections.status import status_record

VIEWS = ("status", "due_work")


def canonical(record: ViewRecord | None) -> bytes:
    """The bytes two views are compared by."""
    if record is None:
        return b""
    return json.dumps(
        {"name": record.name, "key": record.key, "version": record.version,
         "data": dict(record.data), "list_pk": record.list_pk, "list_sk": record.list_sk},
        sort_keys=True, separators=(",", ":"),
    ).encode()


def attempt_ids(ledger: Ledger) -> Iterator[str]:
    """Every attempt stream id in the store (admin batch enumeration)."""
    from adapters.memory.recorder import MemoryLedgerRecorder
    from adapters.sqlite.recorder import SQLiteLedgerRecorder

    recorder = ledger.store.recorder
    if isinstance(recorder, MemoryLedgerRecorder):
        streams = list(recorder._stored_events_index)
        yield from sorted(k for k in streams if k.startswith(ATTEMPT_ID_PREFIX))
        return
    if isinstance(recorder, SQLiteLedgerRecorder):
        with recorder.datastore.transaction(commit=False) as c:
            c.execute(
                f"SELECT originator_id FROM {recorder.events_table_name} "
                "WHERE originator_version = 1 AND originator_id LIKE ? ESCAPE '!' "
                "ORDER BY originator_id",
                (ATTEMPT_ID_PREFIX.replace("_", "!_") + "%",),
            )
            rows = [row["originator_id"] for row in c.fetchall()]
        yield from rows
        return
    client: Any = recorder.client  # type: ignore[attr-defined]
    request: dict[str, Any] = {
        "TableName": recorder.table_name,  # type: ignore[attr-defined]
        "ProjectionExpression": "pk",
        "FilterExpression": "begins_with(pk, :att) AND sk = :one",
        "ExpressionAttributeValues": {":att": {"S": ATTEMPT_ID_PREFIX}, ":one": {"N": "1"}},
        "ConsistentRead": True,
    }
    while True:
        page = client.scan(**request)
        yield from (item["pk"]["S"] for item in page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            return
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


@dataclass
class RebuildReport:
    """How many rows were rebuilt and how many already matched byte for byte."""

    view: str
    total: int = 0
    identical: int = 0
    changed: list[str] = field(default_factory=list)


def rebuild(
    ledger: Ledger,
    view: str,
    *,
    write: bool = True,
    progress: Callable[[int], None] | None = None,
) -> RebuildReport:
    """Fold every attempt stream into ``view``; compare with the live rows; write."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; choose from {', '.join(VIEWS)}")
    report = RebuildReport(view)
    live_due = _all_due(ledger) if view == "due_work" else {}
    for attempt_id in attempt_ids(ledger):
        attempt = ledger.store.get(ExecutionAttempt, attempt_id)
        if attempt is None:
            continue
        report.total += 1
        if view == "status":
            assert ledger.views is not None
            rebuilt = status_record(attempt)
            live = ledger.views.get_view(rebuilt.name, rebuilt.key)
            same = canonical(live) == canonical(rebuilt)
            if write and not same:
                ledger.views.put_view(rebuilt, force=True)
        else:
            due = DueWork(attempt_id, attempt.next_action_at())
            same = _millis(due.next_action_at) == _millis(live_due.get(attempt_id))
            if write and not same:
                ledger.store.commit(Commit(due=[due]))
        if same:
            report.identical += 1
        else:
            report.changed.append(attempt_id)
        if progress is not None:
            progress(1)
    return report


def _all_due(ledger: Ledger) -> dict[str, datetime]:
    """The whole due-work index (paged), attempt id -> next action time."""
    horizon = datetime(9999, 1, 1, tzinfo=UTC)
    found: dict[str, datetime] = {}
    cursor: str | None = None
    while True:
        page = ledger.store.due_work(horizon, 1000, cursor)
        for item in page.items:
            if item.next_action_at is not None:
                found[item.attempt_id] = item.next_action_at
        if page.cursor is None:
            return found
        cursor = page.cursor


def _millis(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)
