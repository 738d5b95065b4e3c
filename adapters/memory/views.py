"""In-memory view store, with the library's in-memory tracking of positions."""

from __future__ import annotations

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
        self._rows[(record.name, record.key)] = record
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
                self._rows[(record.name, record.key)] = record
                written += 1
            return written

    def list_views(
        self, list_pk: str, limit: int, cursor: str | None = None
    ) -> tuple[Sequence[ViewRecord], str | None]:
        with self._database_lock:
            rows = sorted(
                (r for r in self._rows.values() if r.list_pk == list_pk and r.list_sk),
                key=lambda r: r.list_sk or "",
            )
        if cursor is not None:
            rows = [r for r in rows if (r.list_sk or "") > cursor]
        page = rows[:limit]
        more = len(rows) > limit
        return page, (page[-1].list_sk if more and page else None)
