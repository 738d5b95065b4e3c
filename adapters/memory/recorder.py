"""In-memory ledger recorder for unit tests: the library's POPO recorder plus
read-set checks, lookups and due work under the same lock."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.popo import POPOProcessRecorder

from adapters.recorder import (
    LedgerRecorder,
    LookupConflictError,
    StreamConflictError,
    check_due_page,
    due_sort_key,
)
from domain.ports import DueWork, Lookup, ReadCheck, StreamHead

if TYPE_CHECKING:
    from adapters.backend import Backend


class MemoryLedgerRecorder(POPOProcessRecorder, LedgerRecorder):
    """Everything in dicts; one re-entrant lock makes each commit atomic."""

    def __init__(self) -> None:
        super().__init__()
        # key -> (value, expires_at)
        self._lookups: dict[str, tuple[dict[str, str], datetime | None]] = {}
        self._due: dict[str, DueWork] = {}
        self._heads: dict[str, StreamHead] = {}

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        return super().insert_events(stored_events, **kwargs)

    def _insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        read_checks: Sequence[ReadCheck] = kwargs.get("read_checks", ())
        lookups: Sequence[Lookup] = kwargs.get("lookups", ())
        due: Sequence[DueWork] = kwargs.get("due", ())
        heads: Sequence[StreamHead] = kwargs.get("heads", ())
        with self._database_lock:
            for s in stored_events:
                if s.originator_version in self._stored_events_index[str(s.originator_id)]:
                    raise StreamConflictError(str(s.originator_id))
            for check in read_checks:
                if check.version + 1 in self._stored_events_index[check.stream_id]:
                    raise StreamConflictError(check.stream_id)
            keys: set[str] = set()
            for lookup in lookups:
                # The same key twice in one commit clashes too, as in SQLite and DynamoDB.
                held = self._lookups.get(lookup.key)
                if (held is not None and not _replaceable(held[1], lookup)) or lookup.key in keys:
                    raise LookupConflictError(lookup.key)
                keys.add(lookup.key)
            result = super()._insert_events(stored_events, **kwargs)
            for lookup in lookups:
                self._lookups[lookup.key] = (dict(lookup.value), lookup.expires_at)
            for item in due:
                if item.next_action_at is None:
                    self._due.pop(item.attempt_id, None)
                else:
                    self._due[item.attempt_id] = item
            for head in heads:
                self._heads[head.stream_id] = head
            return result

    def make_backend(self) -> Backend:
        from adapters.memory.backend import MemoryBackend

        return MemoryBackend(self)

    def select_stream_ids(self, prefix: str = "") -> Iterator[str]:
        with self._database_lock:
            ids = sorted(
                k for k, v in self._stored_events_index.items() if v and k.startswith(prefix)
            )
        return iter(ids)

    def insert_head_if_absent(self, head: StreamHead) -> bool:
        with self._database_lock:
            if head.stream_id in self._heads:
                return False
            self._heads[head.stream_id] = head
            return True

    def select_heads(self) -> Iterator[StreamHead]:
        with self._database_lock:
            heads = sorted(self._heads.values(), key=lambda h: h.stream_id)
        return iter(heads)

    def get_lookup(self, key: str, *, now: datetime | None = None) -> Mapping[str, str] | None:
        with self._database_lock:
            found = self._lookups.get(key)
            if found is None or _expired(found[1], now):
                return None
            return dict(found[0])

    def delete_lookup(self, key: str) -> bool:
        with self._database_lock:
            return self._lookups.pop(key, None) is not None

    def delete_expired_lookups(self, now: datetime, limit: int) -> int:
        with self._database_lock:
            gone = [k for k, (_, until) in self._lookups.items() if _expired(until, now)][:limit]
            for key in gone:
                del self._lookups[key]
            return len(gone)

    def select_due(
        self, upto: datetime, limit: int, cursor: str | None = None
    ) -> tuple[list[DueWork], str | None]:
        with self._database_lock:
            rows = sorted(
                (due_sort_key(item), item)
                for item in self._due.values()
                if item.next_action_at is not None and item.next_action_at <= upto
            )
        if cursor is not None:
            rows = [row for row in rows if row[0] > cursor]
        return check_due_page(rows, limit)


def _expired(expires_at: datetime | None, now: datetime | None) -> bool:
    return expires_at is not None and now is not None and expires_at <= now


def _replaceable(expires_at: datetime | None, lookup: Lookup) -> bool:
    """An expired item gives way to a new one of its key written after its expiry."""
    return _expired(expires_at, lookup.now)
