"""Rebuilding views from the log, and checking them against the live ones.

The status view (and the lists it feeds) and the due-work index are derived
from attempt streams only, so a rebuild folds every attempt stream again.
Enumerating the streams is the one place a batch job may read the whole
store; the backend does it (one ordered SQL pass on SQLite, a parallel
segmented Scan on DynamoDB: an admin operation, never on the request or
worker path).

The status rows come from the same fold as the live projector's
(``projections.status_fold``), applied to the data decoded straight from the
canonical stored bytes; a stream whose bytes are not all canonical (the
library's older form, a state moved between rows) is read and folded as the
live projector reads and folds it.

A rebuild works in batches of a few hundred attempts: one read of their
events, one read of their live rows, one write of the rows that differ. The
write is version-guarded row by row, so a rebuild running beside the live
projector never replaces a newer row with its older fold; due-work entries
are written with a read check of the attempt's version, so a transition
committed meanwhile keeps its own entry. Rebuild writes are not fsynced: the
views are rebuildable (docs/durability.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from eventsourcing.persistence import StoredEvent

from adapters.bootstrap import Ledger
from adapters.mapping import canonical_body
from domain.attempt import ExecutionAttempt
from domain.base import bytes_hash
from domain.errors import ConcurrencyConflict
from domain.ports import Commit, DueWork, ReadCheck
from projections.find import facts_of, find_rows
from projections.ports import ViewRecord
from projections.status import STATUS_VIEW
from projections.status_fold import EVENT_TYPES, fold_status, read_status

VIEWS = ("status", "due_work", "find")
DUE_PER_COMMIT = 50
"""Due entries (each with its read check) per commit: 100 items, DynamoDB's bound."""


def canonical(record: ViewRecord | None) -> bytes:
    """The bytes two views are compared by."""
    if record is None:
        return b""
    return json.dumps(
        {
            "name": record.name,
            "key": record.key,
            "version": record.version,
            "data": dict(record.data),
            "list_pk": record.list_pk,
            "list_sk": record.list_sk,
        },
        sort_keys=True,
        separators=(",", ":"),
    ).encode()


def attempt_ids(ledger: Ledger) -> Iterator[str]:
    """Every attempt stream id in the store (admin batch enumeration, by the backend)."""
    yield from ledger.backend.attempt_ids()


@dataclass
class RebuildReport:
    """How many rows were rebuilt and how many already matched byte for byte."""

    view: str
    total: int = 0
    identical: int = 0
    changed: list[str] = field(default_factory=list)
    written: int = 0


def rebuild(
    ledger: Ledger,
    view: str,
    *,
    write: bool = True,
    force: bool = True,
    progress: Callable[[int], None] | None = None,
    batch: int | None = None,
) -> RebuildReport:
    """Fold every attempt stream into ``view``; compare with the live rows; write
    the differing ones, ``batch`` attempts per read and per write.

    ``force`` also replaces a differing row of the same version (repairs a
    forged row); with or without it, a stored row newer than the fold is kept
    (the live projector wrote it meanwhile)."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; choose from {', '.join(VIEWS)}")
    report = RebuildReport(view)
    live_due = _all_due(ledger) if view == "due_work" else {}
    for streams in ledger.backend.attempt_streams(batch or ledger.backend.rebuild_batch):
        if view in ("status", "find"):
            rows = _status_rows(ledger, streams)
            if view == "find":
                rows = _find_rows(ledger, streams, rows)
            differing = _status_batch(ledger, rows, write=write, force=force, report=report)
            folded = len(rows)
        else:
            attempts = [
                a for a in (fold_attempt(ledger, events) for _, events in streams) if a is not None
            ]
            differing = _due_batch(ledger, attempts, live_due, write=write, report=report)
            folded = len(attempts)
        report.total += folded
        report.identical += folded - len(differing)
        report.changed.extend(differing)
        if progress is not None:
            progress(len(streams))
    return report


def fold_attempt(ledger: Ledger, events: Sequence[StoredEvent]) -> ExecutionAttempt | None:
    """The attempt the stored events of one stream fold into (None: not an attempt)."""
    aggregate: Any = None
    for stored in events:
        event: Any = ledger.store.mapper.to_domain_event(stored)
        aggregate = event.mutate(aggregate)
    return aggregate if isinstance(aggregate, ExecutionAttempt) else None


def _status_rows(
    ledger: Ledger, streams: Sequence[tuple[str, Sequence[StoredEvent]]]
) -> list[ViewRecord]:
    """The status row of every attempt stream: straight from the stored data
    where every event is canonical, else as the live projector folds it."""
    rows: list[ViewRecord] = []
    for stream_id, events in streams:
        row = fold_stored_status(stream_id, events) or read_status(ledger.store, stream_id)
        if row is not None:
            rows.append(row)
    return rows


def _find_rows(
    ledger: Ledger,
    streams: Sequence[tuple[str, Sequence[StoredEvent]]],
    status_rows: list[ViewRecord],
) -> list[ViewRecord]:
    """The find index rows of the folded attempts (``projections.find``), their
    facts from each stream's first event."""
    first = {stream_id: events[0] for stream_id, events in streams if events}
    rows: list[ViewRecord] = []
    for status in status_rows:
        queued: Any = ledger.store.mapper.to_domain_event(first[status.key])
        rows += find_rows(status, facts_of(queued.data()))
    return rows


def fold_stored_status(stream_id: str, events: Sequence[StoredEvent]) -> ViewRecord | None:
    """The status row from canonical stored events, without building events or
    the aggregate; None when a row is not canonical, not the next version, or
    of a type the fold does not know (``projections.status_fold``), or when
    the stream is not an attempt's."""
    folded: list[tuple[str, dict[str, Any]]] = []
    for expected, stored in enumerate(events, 1):
        event_type = EVENT_TYPES.get(stored.topic)
        if event_type is None or stored.originator_version != expected:
            return None
        body = canonical_body(stored, event_type)
        if body is None:
            return None
        folded.append((event_type, body["data"]))
    if not folded:
        return None
    # the last state describes its row: its hash is that of its bytes
    return fold_status(stream_id, folded, bytes_hash(bytes(events[-1].state)))


def _status_batch(
    ledger: Ledger,
    rebuilt: list[ViewRecord],
    *,
    write: bool,
    force: bool,
    report: RebuildReport,
) -> list[str]:
    identical_views = getattr(ledger.views, "identical_views", None)
    if identical_views is not None:  # the store compares with its rows as stored
        identical: set[str] = identical_views(rebuilt)
        differing = [r for r in rebuilt if r.key not in identical]
    else:
        name = rebuilt[0].name if rebuilt else STATUS_VIEW
        live = ledger.views.get_views(name, [r.key for r in rebuilt])
        differing = [r for r in rebuilt if not _same(live.get(r.key), r)]
    if write and differing:
        report.written += ledger.views.replace_views(differing, force=force)
    return [r.key for r in differing]


def _same(live: ViewRecord | None, rebuilt: ViewRecord) -> bool:
    """Byte for byte equal (``canonical``); a missing row or another version
    differs without encoding either."""
    if live is None or live.version != rebuilt.version:
        return False
    return canonical(live) == canonical(rebuilt)


def _due_batch(
    ledger: Ledger,
    attempts: list[ExecutionAttempt],
    live_due: dict[str, datetime],
    *,
    write: bool,
    report: RebuildReport,
) -> list[str]:
    differing = [a for a in attempts if _millis(a.next_action_at()) != _millis(live_due.get(a.id))]
    if write:
        for start in range(0, len(differing), DUE_PER_COMMIT):
            report.written += _write_due(ledger, differing[start : start + DUE_PER_COMMIT])
    return [a.id for a in differing]


def _write_due(ledger: Ledger, attempts: list[ExecutionAttempt]) -> int:
    """The entries, each only while its attempt is still at the version folded
    (a transition committed meanwhile wrote its own entry); one commit, or one
    per attempt when a read check failed."""

    def commit(part: list[ExecutionAttempt]) -> None:
        ledger.store.commit(
            Commit(
                due=[DueWork(a.id, a.next_action_at()) for a in part],
                read_set=[ReadCheck(a.id, a.version) for a in part],
                durable=False,
            )
        )

    try:
        commit(attempts)
        return len(attempts)
    except ConcurrencyConflict:
        written = 0
        for attempt in attempts:
            try:
                commit([attempt])
                written += 1
            except ConcurrencyConflict:
                continue
        return written


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
