"""Directory use cases: idempotent puts and reads of directory records."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from domain.directory import (
    DirectoryKind,
    DirectoryRecord,
    validate_values,
)
from domain.errors import ConcurrencyConflict, NotFound, UnknownPermission
from domain.ports import Clock, Commit, EventStore
from domain.services.read_cache import ReadCache, commit
from domain.services.retry import retry_on_conflict
from domain.timeutil import format_utc

_NO_CACHE = ReadCache(0)


@dataclass(frozen=True)
class RecordView:
    """A directory record as callers see it."""

    record_id: str
    kind: DirectoryKind
    values: dict[str, Any]
    revision: int
    updated_at: str


def _view(record: DirectoryRecord) -> RecordView:
    return RecordView(
        record_id=record.id,
        kind=record.kind,
        values=dict(record.values),
        revision=record.revision,
        updated_at=record.updated_at,
    )


def check_permission(permission: str, catalogue: Collection[str]) -> None:
    """Reject permission names outside the configured catalogue."""
    if permission not in catalogue:
        raise UnknownPermission()


def put_record(
    store: EventStore,
    clock: Clock,
    *,
    kind: DirectoryKind,
    record_id: str,
    values: Any,
    cache: ReadCache | None = None,
) -> RecordView:
    """Create or change a record; an unchanged put appends nothing (idempotent).

    Concurrent puts converge: a loser re-reads and applies its values on top.
    With ``cache`` (this process's read cache) the new version is written
    through, so this process's next authorization sees it without a conflict.
    """
    checked = validate_values(kind, values)

    def put_once() -> RecordView:
        at = format_utc(clock.now())
        record = store.get(DirectoryRecord, record_id)
        if record is None:
            record = DirectoryRecord(record_id=record_id, kind=kind.value, values=checked, at=at)
        elif not record.update(checked, at=at):
            return _view(record)
        commit(store, _NO_CACHE if cache is None else cache, Commit(aggregates=[record]))
        return _view(record)

    def contended() -> RecordView:
        raise ConcurrencyConflict(record_id)

    return retry_on_conflict(put_once, exhausted=contended)


def get_record(store: EventStore, kind: DirectoryKind, record_id: str) -> RecordView:
    """Read a record or raise NotFound."""
    record = store.get(DirectoryRecord, record_id)
    if record is None or record.kind is not kind:
        raise NotFound()
    return _view(record)
