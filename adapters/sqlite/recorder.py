"""Embedded SQLite ledger recorder: one file, WAL, built on the library's
SQLite process recorder (events, notification log, tracking) plus tables for
lookups, due work and the head index, all written in the events' transaction."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from eventsourcing.persistence import OperationalError, StoredEvent
from eventsourcing.sqlite import (
    SQLiteCursor,
    SQLiteDatastore,
    SQLiteProcessRecorder,
    SQLiteTransaction,
)

from adapters.recorder import (
    LedgerRecorder,
    LookupConflictError,
    StreamConflictError,
    check_due_page,
    due_sort_key,
)
from adapters.sqlite.durability import (
    DEFAULT_SYNCHRONOUS,
    DurableCommits,
    LedgerConnectionPool,
    Synchronous,
    synchronous_for,
)
from domain.ports import DueWork, Lookup, ReadCheck, StreamHead

if TYPE_CHECKING:
    from adapters.backend import Backend


def open_datastore(path: str, *, lock_timeout: int = 10,
                   synchronous: Synchronous = DEFAULT_SYNCHRONOUS) -> SQLiteDatastore:
    """A datastore for a file path (or ``:memory:``) with text stream ids.

    Connections run with ``synchronous`` (NORMAL: only durable commits fsync,
    see ``adapters/sqlite/durability.py``; FULL: every commit does)."""
    datastore = SQLiteDatastore(
        db_name=path,
        lock_timeout=lock_timeout,
        originator_id_type="text",
    )
    datastore.pool.close()  # the library's pool (no connection yet), replaced by ours
    datastore.pool = LedgerConnectionPool(db_name=path, lock_timeout=lock_timeout,
                                          synchronous=synchronous)
    datastore.synchronous = synchronous  # type: ignore[attr-defined]  # what new connections use
    return datastore


class _ImmediateTransaction(SQLiteTransaction):
    """A write transaction that takes SQLite's write lock before its first read.

    A commit reads (version and read-set checks) before it writes. In a
    deferred transaction a WAL reader whose snapshot went stale cannot upgrade
    to a writer: SQLite answers "database is locked" at once, without waiting.
    ``BEGIN IMMEDIATE`` waits for the lock (up to the busy timeout) and then
    reads the latest data, so a lost race is a clean version conflict.
    """

    def __enter__(self) -> SQLiteCursor:
        cursor = self.connection.cursor()
        try:
            cursor.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise OperationalError(exc) from exc
        return cursor


class SQLiteLedgerRecorder(SQLiteProcessRecorder, LedgerRecorder):
    """The embedded default backend."""

    def __init__(self, datastore: SQLiteDatastore, *, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name=events_table_name)
        # The level every connection of the datastore runs with (SQLite's own
        # default, FULL, for a datastore not opened by ``open_datastore``).
        self.synchronous: Synchronous = getattr(datastore, "synchronous", "FULL")
        self.durable_commits = DurableCommits()
        t = self.events_table_name
        self._version_exists = f"SELECT 1 FROM {t} WHERE originator_id=? AND originator_version=?"

    def construct_create_table_statements(self) -> list[str]:
        statements = super().construct_create_table_statements()
        statements += [
            "CREATE TABLE IF NOT EXISTS ledger_lookups ("
            "key TEXT PRIMARY KEY, value TEXT NOT NULL, expires_at TEXT) WITHOUT ROWID",
            "CREATE TABLE IF NOT EXISTS ledger_due ("
            "attempt_id TEXT PRIMARY KEY, sort_key TEXT NOT NULL, "
            "next_action_at TEXT NOT NULL) WITHOUT ROWID",
            "CREATE INDEX IF NOT EXISTS ledger_due_by_time ON ledger_due (sort_key)",
            "CREATE TABLE IF NOT EXISTS ledger_heads ("
            "stream_id TEXT PRIMARY KEY, version INTEGER NOT NULL, head TEXT NOT NULL) "
            "WITHOUT ROWID",
        ]
        return statements

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        durable = bool(kwargs.get("durable", True))
        with self._write_transaction(durable=durable) as c:
            result = self._insert_events(c, stored_events, **kwargs)
        if durable:
            self.durable_commits.done()
        return result

    @contextmanager
    def _write_transaction(self, *, durable: bool = False) -> Iterator[SQLiteCursor]:
        """One ``BEGIN IMMEDIATE`` transaction; ``durable`` fsyncs the WAL at its
        commit (and with it every earlier commit)."""
        level: Synchronous = "FULL" if durable else self.synchronous
        with (
            self.datastore.get_connection(commit=True) as connection,
            synchronous_for(connection, level, self.synchronous),
            _ImmediateTransaction(connection, commit=True) as cursor,
            cursor,
        ):
            yield cursor

    def _insert_events(
        self, c: SQLiteCursor, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        read_checks: Sequence[ReadCheck] = kwargs.get("read_checks", ())
        lookups: Sequence[Lookup] = kwargs.get("lookups", ())
        due: Sequence[DueWork] = kwargs.get("due", ())
        heads: Sequence[StreamHead] = kwargs.get("heads", ())
        for s in stored_events:
            c.execute(self._version_exists, (str(s.originator_id), s.originator_version))
            if c.fetchone() is not None:
                raise StreamConflictError(str(s.originator_id))
        for check in read_checks:
            c.execute(self._version_exists, (check.stream_id, check.version + 1))
            if c.fetchone() is not None:
                raise StreamConflictError(check.stream_id)
        for lookup in lookups:
            try:
                c.execute(
                    "INSERT INTO ledger_lookups VALUES (?,?,?)",
                    (
                        lookup.key,
                        json.dumps(dict(lookup.value), sort_keys=True),
                        lookup.expires_at.astimezone(UTC).isoformat()
                        if lookup.expires_at
                        else None,
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise LookupConflictError(lookup.key) from exc
        result = super()._insert_events(c, stored_events, **kwargs)
        for item in due:
            if item.next_action_at is None:
                c.execute("DELETE FROM ledger_due WHERE attempt_id=?", (item.attempt_id,))
            else:
                c.execute(
                    "INSERT INTO ledger_due VALUES (?,?,?) ON CONFLICT(attempt_id) DO UPDATE "
                    "SET sort_key=excluded.sort_key, next_action_at=excluded.next_action_at",
                    (
                        item.attempt_id,
                        due_sort_key(item),
                        item.next_action_at.astimezone(UTC).isoformat(),
                    ),
                )
        for head in heads:
            c.execute(
                "INSERT INTO ledger_heads VALUES (?,?,?) ON CONFLICT(stream_id) DO UPDATE "
                "SET version=excluded.version, head=excluded.head",
                (head.stream_id, head.version, head.head),
            )
        return result

    def stream_ids(self, prefix: str) -> list[str]:
        """Every stream id starting with ``prefix``, sorted (rebuild enumeration)."""
        escaped = prefix.replace("!", "!!").replace("%", "!%").replace("_", "!_")
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                f"SELECT originator_id FROM {self.events_table_name} "
                "WHERE originator_version = 1 AND originator_id LIKE ? ESCAPE '!' "
                "ORDER BY originator_id", (escaped + "%",))
            return [row["originator_id"] for row in c.fetchall()]

    def make_backend(self) -> Backend:
        from adapters.sqlite.backend import SQLiteBackend

        return SQLiteBackend(self)

    def select_stream_ids(self) -> Iterator[str]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT originator_id FROM {self.events_table_name} "
                      "WHERE originator_version = 1 ORDER BY originator_id")
            rows = [row["originator_id"] for row in c.fetchall()]
        return iter(rows)

    def insert_head_if_absent(self, head: StreamHead) -> bool:
        with self._write_transaction() as c:
            c.execute("INSERT INTO ledger_heads VALUES (?,?,?) ON CONFLICT(stream_id) DO NOTHING",
                      (head.stream_id, head.version, head.head))
            c.execute("SELECT changes() AS n")
            return bool(c.fetchone()["n"] == 1)

    def select_heads(self) -> Iterator[StreamHead]:
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT stream_id, version, head FROM ledger_heads ORDER BY stream_id")
            rows = c.fetchall()
        return iter([StreamHead(r["stream_id"], r["version"], r["head"]) for r in rows])

    def get_lookup(self, key: str) -> Mapping[str, str] | None:
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT value FROM ledger_lookups WHERE key=?", (key,))
            row = c.fetchone()
        if row is None:
            return None
        value: dict[str, str] = json.loads(row["value"])
        return value

    def select_due(
        self, upto: datetime, limit: int, cursor: str | None = None
    ) -> tuple[list[DueWork], str | None]:
        upper = f"{int(upto.timestamp() * 1000):015d}#~"
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                "SELECT attempt_id, sort_key, next_action_at FROM ledger_due "
                "WHERE sort_key <= ? AND sort_key > ? ORDER BY sort_key LIMIT ?",
                (upper, cursor or "", limit + 1),
            )
            rows = [
                (
                    row["sort_key"],
                    DueWork(row["attempt_id"], datetime.fromisoformat(row["next_action_at"])),
                )
                for row in c.fetchall()
            ]
        return check_due_page(rows, limit)

    def close(self) -> None:
        self.datastore.close()
