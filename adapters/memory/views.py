"""In-memory view store."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from projections.ports import ViewRecord


class MemoryViewStore:
    """Implements ``projections.ports.ViewStore`` with a dict under a lock."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], ViewRecord] = {}
        self._lock = threading.Lock()

    def get_view(self, name: str, key: str) -> ViewRecord | None:
        with self._lock:
            return self._rows.get((name, key))

    def put_view(self, record: ViewRecord, *, force: bool = False) -> bool:
        with self._lock:
            current = self._rows.get((record.name, record.key))
            if current is not None and current.version >= record.version and not force:
                return False
            self._rows[(record.name, record.key)] = record
            return True

    def list_views(
        self, list_pk: str, limit: int, cursor: str | None = None
    ) -> tuple[Sequence[ViewRecord], str | None]:
        with self._lock:
            rows = sorted(
                (r for r in self._rows.values() if r.list_pk == list_pk and r.list_sk),
                key=lambda r: r.list_sk or "",
            )
        if cursor is not None:
            rows = [r for r in rows if (r.list_sk or "") > cursor]
        page = rows[:limit]
        more = len(rows) > limit
        return page, (page[-1].list_sk if more and page else None)
