"""One SQLite connection per thread, one in-process writer at a time, and
reads of one statement without a transaction around them.

Why not the library's connection pool: it hands every connection out through
one semaphore, and a writer waiting for the writer lock holds that semaphore,
so every reader queues behind a write in progress although WAL lets readers
run beside a writer (measured: with 4 callers, readers waited longer than
writers). Here a reader never waits for a writer: each thread reads on its own
connection, and a single ``SELECT`` in autocommit mode is its own consistent
snapshot, so the ``BEGIN``/``ROLLBACK`` pair around it is pure overhead (two
more statements, each a release and re-acquisition of the GIL).

Writers in one process queue on a Python lock before ``BEGIN IMMEDIATE``, so
they wait in the lock (woken at once) rather than in SQLite's busy handler
(which sleeps in steps of up to 100 ms). Writers in other processes, or other
datastores on the same file, are still serialised by SQLite's own file lock
and the busy timeout: the lock is an optimisation, never the guard.

An in-memory database exists only on its one connection, so ``:memory:``
keeps one connection and one lock for reads and writes alike.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from eventsourcing.persistence import (
    DatabaseError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    PersistenceError,
    ProgrammingError,
)
from eventsourcing.sqlite import (
    SQLITE3_DEFAULT_LOCK_TIMEOUT,
    SQLiteConnection,
    SQLiteCursor,
    SQLiteDatastore,
    SQLiteTransaction,
)

from adapters.sqlite.durability import Synchronous, set_synchronous

SOFT_HEAP_LIMIT_BYTES = 48 * 1024 * 1024
"""SQLite's memory in one process, all connections together (soft: caches shrink past it)."""


class ImmediateTransaction(SQLiteTransaction):
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


def persistence_error(exc: sqlite3.Error) -> PersistenceError:
    """The library's error class for a ``sqlite3`` error (as its transactions map them)."""
    for source, target in (
        (sqlite3.IntegrityError, IntegrityError),
        (sqlite3.OperationalError, OperationalError),
        (sqlite3.InterfaceError, InterfaceError),
        (sqlite3.ProgrammingError, ProgrammingError),
        (sqlite3.DatabaseError, DatabaseError),
    ):
        if isinstance(exc, source):
            return target(exc)
    return PersistenceError(exc)


class LedgerDatastore(SQLiteDatastore):
    """The library's datastore with per-thread connections (see the module doc)."""

    def __init__(
        self,
        db_name: str,
        *,
        lock_timeout: int = 10,
        synchronous: str | None = None,
    ) -> None:
        super().__init__(db_name, lock_timeout=lock_timeout, originator_id_type="text")
        self.db_name = db_name
        # ``PRAGMA synchronous`` of every new connection (None: SQLite's default).
        self.synchronous = synchronous
        self.lock_timeout = lock_timeout or SQLITE3_DEFAULT_LOCK_TIMEOUT
        self.memory = self.pool.is_sqlite_memory_mode
        # Re-entrant: a read made inside a write transaction on the same thread (one
        # connection in memory mode) must not wait for itself.
        self._write_lock = threading.RLock()
        self._local = threading.local()
        self._generation = 0
        # Every live connection by the thread that owns it, so ``close`` reaches
        # them all and a finished thread's connection is closed, not kept.
        self._connections: dict[int, tuple[threading.Thread, SQLiteConnection]] = {}
        self._registry_lock = threading.Lock()
        self._pid = os.getpid()

    # -- connections -----------------------------------------------------------

    def _connect(self) -> SQLiteConnection:
        try:
            raw = sqlite3.connect(
                self.db_name,
                uri=True,
                check_same_thread=False,
                isolation_level=None,
                cached_statements=128,
                timeout=self.lock_timeout,
            )
            if not self.memory:
                raw.execute("PRAGMA journal_mode=WAL")
            # Each connection has its own page cache (up to 2 MiB); a server with
            # many threads would hold one per thread. The soft heap limit bounds
            # SQLite's memory in the whole process: past it, caches give pages back.
            raw.execute(f"PRAGMA soft_heap_limit={SOFT_HEAP_LIMIT_BYTES}")
            if self.synchronous is not None:
                if self.synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
                    raise ValueError(f"synchronous: {self.synchronous!r}")
                raw.execute(f"PRAGMA synchronous={self.synchronous}")
        except sqlite3.Error as exc:
            raise persistence_error(exc) from exc
        raw.row_factory = sqlite3.Row
        return SQLiteConnection(sqlite_conn=raw, max_age=None)

    def _thread_connection(self) -> SQLiteConnection:
        mine: tuple[int, int, SQLiteConnection] | None = getattr(self._local, "connection", None)
        pid = os.getpid()
        if mine is not None and mine[0] == self._generation and mine[1] == pid:
            return mine[2]
        key = 0 if self.memory else threading.get_ident()
        with self._registry_lock:
            if self._pid != pid and not self.memory:
                # A forked child must not use (or close) its parent's file connections.
                self._pid = pid
                self._connections = {}
            entry = self._connections.get(key)
            if entry is None or (not self.memory and entry[0] is not threading.current_thread()):
                self._prune()
                connection = self._connect()
                self._connections[key] = (threading.current_thread(), connection)
            else:
                connection = entry[1]
            self._local.connection = (self._generation, pid, connection)
            return connection

    def _prune(self) -> None:
        """Close the connections of threads that have finished (registry lock held)."""
        for key, (thread, connection) in list(self._connections.items()):
            if not thread.is_alive() and not self.memory:
                del self._connections[key]
                connection.close()

    @property
    def open_connections(self) -> int:
        """Connections open now (bounded by the threads alive that used the store)."""
        with self._registry_lock:
            return len(self._connections)

    def own_connection(self) -> SQLiteConnection | None:
        """This thread's own connection (opened if needed), or None where
        connections are shared (an in-memory database)."""
        if self.memory:
            return None
        return self._thread_connection()

    @contextmanager
    def get_connection(self, *, commit: bool) -> Iterator[SQLiteConnection]:
        connection = self._thread_connection()
        if commit or self.memory:
            with self._write_lock:
                yield connection
        else:
            yield connection

    # -- transactions and reads ---------------------------------------------------

    @contextmanager
    def transaction(
        self, *, commit: bool, synchronous: Synchronous | None = None
    ) -> Iterator[SQLiteCursor]:
        """A write transaction starts with ``BEGIN IMMEDIATE``; a read one with ``BEGIN``.

        A write on this thread's own connection commits at ``synchronous`` (the
        datastore's level when not given), set before the write lock is taken."""
        level = synchronous or self.synchronous
        if commit and level is not None:
            own = self.own_connection()
            if own is not None:
                set_synchronous(own, level)  # type: ignore[arg-type]
        kind = ImmediateTransaction if commit else SQLiteTransaction
        with (
            self.get_connection(commit=commit) as connection,
            kind(connection, commit=commit) as cursor,
            cursor,
        ):
            yield cursor

    def read(self, statement: str, params: Any = ()) -> list[sqlite3.Row]:
        """The rows of one ``SELECT``: its own snapshot, no transaction around it."""
        with self.get_connection(commit=False) as connection:
            try:
                cursor = connection.cursor().sqlite_cursor
                try:
                    return cursor.execute(statement, params).fetchall()
                finally:
                    cursor.close()
            except sqlite3.Error as exc:
                raise persistence_error(exc) from exc

    def close(self) -> None:
        """Close this thread's connection and those of finished threads. A thread
        still running (a worker whose executor call outlived the shutdown's wait)
        may be inside a statement on its connection, and closing a connection under
        a running statement from another thread can crash the process; that one is
        closed by its own thread when it lets go of it (its next use opens a fresh
        connection, so a late result is still recorded, or the thread ends)."""
        me = threading.current_thread()
        with self._registry_lock:
            self._generation += 1
            entries = list(self._connections.values())
            self._connections.clear()
        for thread, connection in entries:
            if self.memory or thread is me or not thread.is_alive():
                connection.close()
        super().close()


def read(datastore: SQLiteDatastore, statement: str, params: Any = ()) -> list[sqlite3.Row]:
    """``datastore.read`` on a ledger datastore; on the library's own (which the
    library's factory builds) a read transaction around the one statement."""
    if isinstance(datastore, LedgerDatastore):
        return datastore.read(statement, params)
    with datastore.transaction(commit=False) as c:
        c.execute(statement, params)
        rows: list[sqlite3.Row] = c.fetchall()
        return rows
