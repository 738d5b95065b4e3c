"""In-memory view store, with the library's in-memory tracking of positions."""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence

from eventsourcing.persistence import Tracking
from eventsourcing.popo import POPOTrackingRecorder

from projections.ports import ViewRecord


class MemoryViewStore(POPOTrackingRecorder):
    """Implements ``projections.ports.TrackedViewStore`` with dicts under the
    recorder's lock (rows and positions change together)."""

    def __init__(self) -> None:
        super().__init__()
        self._rows: dict[tuple[str, str], ViewRecord] = {}
        # each list's (sort key, view, key) in order, so a range read costs what it returns
        self._lists: dict[str, list[tuple[str, str, str]]] = {}

    def _store(self, record: ViewRecord) -> None:
        """Keep a row and its place in its list (under the lock)."""
        old = self._rows.get((record.name, record.key))
        if old is not None and old.list_pk and old.list_sk:
            entries = self._lists[old.list_pk]
            entry = (old.list_sk, old.name, old.key)
            index = bisect.bisect_left(entries, entry)
            if index < len(entries) and entries[index] == entry:
                del entries[index]
        self._rows[(record.name, record.key)] = record
        if record.list_pk and record.list_sk:
            bisect.insort(
                self._lists.setdefault(record.list_pk, []),
                (record.list_sk, record.name, record.key),
            )

    def get_view(self, name: str, key: str) -> ViewRecord | None:
        with self._database_lock:
            return self._rows.get((name, key))

    def put_view(self, record: ViewRecord, *, force: bool = False) -> bool:
        with self._database_lock:
            return self._put(record, force=force)

    def _put(self, record: ViewRecord, *, force: bool = False) -> bool:
        current = self._rows.get((record.name, record.key))
        if current is not None and current.version >= record.version and not force:
            return False
        self._store(record)
        return True

    def put_views(self, records: Sequence[ViewRecord], tracking: Sequence[Tracking]) -> int:
        with self._database_lock:
            for position in tracking:
                self._assert_tracking_uniqueness(position)
            moved = sum(1 for record in records if self._put(record))
            for position in tracking:
                self._insert_tracking(position)
            return moved

    def get_views(self, name: str, keys: Sequence[str]) -> Mapping[str, ViewRecord]:
        with self._database_lock:
            return {k: self._rows[(name, k)] for k in keys if (name, k) in self._rows}

    def replace_views(self, records: Sequence[ViewRecord], *, force: bool = False) -> int:
        """Rebuilt rows under the version guard (``force``: replace a row that is
        not newer); a newer stored row is never overwritten."""
        with self._database_lock:
            written = 0
            for record in records:
                current = self._rows.get((record.name, record.key))
                if current is not None and (
                    current.version > record.version
                    or (current.version == record.version and not force)
                ):
                    continue
                self._store(record)
                written += 1
            return written

    def list_views(
        self, list_pk: str, limit: int, cursor: str | None = None, *, until: str | None = None
    ) -> tuple[Sequence[ViewRecord], str | None]:
        with self._database_lock:
            entries = self._lists.get(list_pk, [])
            # (cursor, chr(0x10FFFF)) sorts after every entry whose sort key is the cursor
            start = 0 if cursor is None else bisect.bisect_left(entries, (cursor, chr(0x10FFFF)))
            rows: list[ViewRecord] = []
            for sort_key, name, key in entries[start:]:
                if until is not None and sort_key > until:
                    break
                rows.append(self._rows[(name, key)])
                if len(rows) > limit:
                    break
        page = rows[:limit]
        more = len(rows) > limit
        return page, (page[-1].list_sk if more and page else None)
