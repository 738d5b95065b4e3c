"""SQLite as the ledger opened it before per-thread connections, kept here only so
benchmarks measure the path after beside it in one run: the library's
connection pool, a ``BEGIN``/``ROLLBACK`` around every read, and one
``SELECT`` per version check, per (stream, version) slot and per stream."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import (
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteCursor,
    SQLiteDatastore,
)

from adapters.recorder import StreamConflictError
from adapters.sqlite.datastore import LedgerDatastore
from adapters.sqlite.durability import DEFAULT_SYNCHRONOUS, Synchronous
from adapters.sqlite.recorder import SQLiteLedgerRecorder


class SynchronousPool(SQLiteConnectionPool):
    """The library's pool, with every new connection set to ``synchronous``."""

    def __init__(self, *, synchronous: Synchronous, **kwargs: Any) -> None:
        self.synchronous = synchronous
        super().__init__(**kwargs)

    def _create_connection(self) -> SQLiteConnection:
        connection = super()._create_connection()
        connection.cursor().execute(f"PRAGMA synchronous={self.synchronous}")
        return connection


class PooledDatastore(LedgerDatastore):
    """Connections from the library's pool, and a read transaction around every read."""

    def __init__(
        self, path: str, *, lock_timeout: int = 10, synchronous: Synchronous = DEFAULT_SYNCHRONOUS
    ) -> None:
        super().__init__(path, lock_timeout=lock_timeout, synchronous=synchronous)
        self.pool.close()
        self.pool = SynchronousPool(
            db_name=path, lock_timeout=lock_timeout, synchronous=synchronous
        )

    def own_connection(self) -> SQLiteConnection | None:
        return None

    @contextmanager
    def get_connection(self, *, commit: bool) -> Iterator[SQLiteConnection]:
        with SQLiteDatastore.get_connection(self, commit=commit) as connection:
            yield connection

    def read(self, statement: str, params: Any = ()) -> list[sqlite3.Row]:
        with self.transaction(commit=False) as cursor:
            cursor.execute(statement, params)
            rows: list[sqlite3.Row] = cursor.fetchall()
            return rows


class PooledRecorder(SQLiteLedgerRecorder):
    """One statement per version check, per slot and per stream."""

    def _check_versions(self, c: SQLiteCursor, taken: Sequence[tuple[str, int]]) -> None:
        for stream_id, version in taken:
            c.execute(self._version_exists, (stream_id, version))
            if c.fetchone() is not None:
                raise StreamConflictError(stream_id)

    def select_events_at(self, keys: Sequence[tuple[str, int]]) -> list[StoredEvent]:
        return super(SQLiteLedgerRecorder, self).select_events_at(keys)

    def select_latest_events(self, stream_ids: Sequence[str]) -> list[StoredEvent]:
        return super(SQLiteLedgerRecorder, self).select_latest_events(stream_ids)


def pooled_recorder(path: str, *, synchronous: Synchronous = DEFAULT_SYNCHRONOUS) -> PooledRecorder:
    """The recorder before per-thread connections, on ``path``."""
    return PooledRecorder(PooledDatastore(path, synchronous=synchronous))
