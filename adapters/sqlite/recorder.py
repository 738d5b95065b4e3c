"""Embedded SQLite ledger recorder: one file, WAL, built on the library's
SQLite process recorder (events, notification log, tracking) plus tables for
lookups, due work and the head index, all written in the events' transaction."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from eventsourcing.persistence import Notification, StoredEvent
from eventsourcing.sqlite import SQLiteCursor, SQLiteDatastore, SQLiteProcessRecorder

from adapters.recorder import (
    LedgerRecorder,
    StreamConflictError,
    check_due_page,
    due_sort_key,
)
from adapters.sqlite.datastore import ImmediateTransaction, LedgerDatastore, read
from adapters.sqlite.durability import (
    DEFAULT_SYNCHRONOUS,
    Synchronous,
    synchronous_for,
)
from adapters.sqlite.lookups import (
    LOOKUP_TABLE,
    delete_expired_lookups,
    delete_lookup,
    insert_lookups,
    select_lookup,
)
from domain.ports import DueWork, Lookup, ReadCheck, StreamHead

if TYPE_CHECKING:
    from adapters.backend import Backend


def open_datastore(
    path: str,
    *,
    lock_timeout: int = 10,
    synchronous: Synchronous = DEFAULT_SYNCHRONOUS,
) -> LedgerDatastore:
    """A datastore for a file path (or ``:memory:``) with text stream ids.

    Connections run with ``synchronous`` (NORMAL: only durable commits fsync,
    see ``adapters/sqlite/durability.py``; FULL: every commit does).
    """
    return LedgerDatastore(path, lock_timeout=lock_timeout, synchronous=synchronous)


_CHECKS_PER_SELECT = 100
_T = TypeVar("_T")


def _text_id(originator_id: Any) -> str:
    """A stream id as stored: the library stores UUID ids as their hex."""
    return originator_id.hex if isinstance(originator_id, UUID) else str(originator_id)


class SQLiteLedgerRecorder(SQLiteProcessRecorder, LedgerRecorder):
    """The embedded default backend."""

    def __init__(self, datastore: SQLiteDatastore, *, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name=events_table_name)
        # The level every connection of the datastore runs with (SQLite's own
        # default, FULL, for a datastore not opened by ``open_datastore``).
        self.synchronous: Synchronous = getattr(datastore, "synchronous", None) or "FULL"
        t = self.events_table_name
        self._version_exists = f"SELECT 1 FROM {t} WHERE originator_id=? AND originator_version=?"
        self._select_events = (
            f"SELECT originator_version, topic, state FROM {t} WHERE originator_id=?"
        )

    def construct_create_table_statements(self) -> list[str]:
        statements = super().construct_create_table_statements()
        statements += [
            *LOOKUP_TABLE,
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
            return self._insert_events(c, stored_events, **kwargs)

    @contextmanager
    def _write_transaction(self, *, durable: bool = False) -> Iterator[SQLiteCursor]:
        """One ``BEGIN IMMEDIATE`` transaction; ``durable`` fsyncs the WAL at its
        commit (and with it every earlier commit)."""
        level: Synchronous = "FULL" if durable else self.synchronous
        if isinstance(self.datastore, LedgerDatastore) and self.datastore.own_connection():
            # the level set before the write lock is taken, and left for the next
            with self.datastore.transaction(commit=True, synchronous=level) as cursor:
                yield cursor
            return
        with (
            self.datastore.get_connection(commit=True) as connection,
            synchronous_for(connection, level, self.synchronous),
            ImmediateTransaction(connection, commit=True) as cursor,
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
        self._check_versions(
            c,
            [(_text_id(s.originator_id), s.originator_version) for s in stored_events]
            + [(check.stream_id, check.version + 1) for check in read_checks],
        )
        insert_lookups(c, lookups)
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

    def _check_versions(self, c: SQLiteCursor, taken: Sequence[tuple[str, int]]) -> None:
        """StreamConflictError naming the first (stream, version) already written.

        One ``SELECT`` for all of them (an ``OR`` of primary-key lookups, which
        SQLite answers with one index search each) instead of one per stream.
        """
        found: set[tuple[str, int]] = set()
        for start in range(0, len(taken), _CHECKS_PER_SELECT):  # SQLite's expression depth
            chunk = taken[start : start + _CHECKS_PER_SELECT]
            where = " OR ".join(["(originator_id=? AND originator_version=?)"] * len(chunk))
            c.execute(
                f"SELECT originator_id, originator_version FROM {self.events_table_name} "
                f"WHERE {where}",
                [v for pair in chunk for v in pair],
            )
            found.update((row[0], row[1]) for row in c.fetchall())
        for pair in taken:
            if pair in found:
                raise StreamConflictError(pair[0])

    # -- reads: one SELECT each, no transaction around it ------------------------------

    def select_events(
        self,
        originator_id: Any,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        statement = self._select_events
        stream_id = _text_id(originator_id)
        params: list[Any] = [stream_id]
        if gt is not None:
            statement += " AND originator_version>?"
            params.append(gt)
        if lte is not None:
            statement += " AND originator_version<=?"
            params.append(lte)
        statement += " ORDER BY originator_version DESC" if desc else " ORDER BY originator_version"
        if limit is not None:
            statement += " LIMIT ?"
            params.append(limit)
        converted = self.convert_originator_id(stream_id)
        return [
            StoredEvent(
                originator_id=converted, originator_version=row[0], topic=row[1], state=row[2]
            )
            for row in read(self.datastore, statement, params)
        ]

    def select_events_at(self, keys: Sequence[tuple[str, int]]) -> list[StoredEvent]:
        """The events at exact (stream, version) slots in ONE ``SELECT`` (an ``OR``
        of primary-key lookups, per hundred slots), where the default reads one
        slot per statement: a cold worker's recheck reads every directory record
        its attempt's approval authorized. Absent slots are left out."""

        def slots(chunk: list[tuple[str, int]]) -> tuple[str, list[Any]]:
            where = " OR ".join(["(originator_id=? AND originator_version=?)"] * len(chunk))
            return (
                f"SELECT originator_id, originator_version, topic, state FROM "
                f"{self.events_table_name} WHERE {where}",
                [v for p in chunk for v in p],
            )

        return self._events_in_chunks(list(dict.fromkeys((_text_id(i), v) for i, v in keys)), slots)

    def select_latest_events(self, stream_ids: Sequence[str]) -> list[StoredEvent]:
        """The newest event of each stream in ONE ``SELECT`` per hundred streams
        (SQLite takes a bare column's value from the row that gives ``MAX``), where
        the default reads one stream per statement: a cold approval reads every
        directory record it lacks. Streams without events are left out."""

        def newest(chunk: list[str]) -> tuple[str, list[Any]]:
            return (
                f"SELECT originator_id, MAX(originator_version), topic, state FROM "
                f"{self.events_table_name} WHERE originator_id IN "
                f"({','.join('?' * len(chunk))}) GROUP BY originator_id",
                chunk,
            )

        return self._events_in_chunks(list(dict.fromkeys(_text_id(i) for i in stream_ids)), newest)

    def _events_in_chunks(
        self, wanted: list[_T], query: Callable[[list[_T]], tuple[str, list[Any]]]
    ) -> list[StoredEvent]:
        """The events of one ``SELECT`` per hundred of ``wanted`` (SQLite's expression
        depth), each row (stream id, version, topic, state)."""
        found: list[StoredEvent] = []
        for start in range(0, len(wanted), _CHECKS_PER_SELECT):
            statement, params = query(wanted[start : start + _CHECKS_PER_SELECT])
            found += [
                StoredEvent(
                    originator_id=self.convert_originator_id(row[0]),
                    originator_version=row[1],
                    topic=row[2],
                    state=row[3],
                )
                for row in read(self.datastore, statement, params)
            ]
        return found

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        clauses: list[str] = []
        params: list[Any] = []
        if start is not None:
            clauses.append("rowid>=?" if inclusive_of_start else "rowid>?")
            params.append(start)
        if stop is not None:
            clauses.append("rowid<=?")
            params.append(stop)
        if topics:
            clauses.append(f"topic IN ({','.join('?' * len(topics))})")
            params += list(topics)
        where = f"WHERE {' AND '.join(clauses)} " if clauses else ""
        params.append(limit)
        rows = read(
            self.datastore,
            f"SELECT rowid, originator_id, originator_version, topic, state "
            f"FROM {self.events_table_name} {where}ORDER BY rowid LIMIT ?",
            params,
        )
        return [
            Notification(
                id=row[0],
                originator_id=self.convert_originator_id(row[1]),
                originator_version=row[2],
                topic=row[3],
                state=row[4],
            )
            for row in rows
        ]

    def max_notification_id(self) -> int:
        value: int = read(self.datastore, self.select_max_notification_id_statement)[0][0]
        return value  # None on an empty log, as the library answers

    def max_tracking_id(self, application_name: str) -> int | None:
        rows = read(self.datastore, self.select_max_tracking_id_statement, (application_name,))
        value: int | None = rows[0][0]
        return value

    def make_backend(self) -> Backend:
        from adapters.sqlite.backend import SQLiteBackend

        return SQLiteBackend(self)

    def select_stream_ids(self, prefix: str = "") -> Iterator[str]:
        # substr, not LIKE: a prefix is matched exactly (LIKE ignores ASCII case).
        rows = read(
            self.datastore,
            f"SELECT originator_id FROM {self.events_table_name} "
            "WHERE originator_version = 1 AND substr(originator_id, 1, ?) = ? "
            "ORDER BY originator_id",
            (len(prefix), prefix),
        )
        return iter([row[0] for row in rows])

    def insert_head_if_absent(self, head: StreamHead) -> bool:
        with self._write_transaction() as c:
            c.execute(
                "INSERT INTO ledger_heads VALUES (?,?,?) ON CONFLICT(stream_id) DO NOTHING",
                (head.stream_id, head.version, head.head),
            )
            c.execute("SELECT changes() AS n")
            return bool(c.fetchone()["n"] == 1)

    def select_heads(self) -> Iterator[StreamHead]:
        rows = read(
            self.datastore, "SELECT stream_id, version, head FROM ledger_heads ORDER BY stream_id"
        )
        return iter([StreamHead(r["stream_id"], r["version"], r["head"]) for r in rows])

    def get_lookup(self, key: str, *, now: datetime | None = None) -> Mapping[str, str] | None:
        return select_lookup(self.datastore, key, now)

    def delete_lookup(self, key: str) -> bool:
        with self._write_transaction(durable=True) as c:
            return delete_lookup(c, key)

    def delete_expired_lookups(self, now: datetime, limit: int) -> int:
        """One transaction, at most ``limit`` rows, found through the expiry index."""
        with self._write_transaction() as c:
            return delete_expired_lookups(c, now, limit)

    def select_due(
        self, upto: datetime, limit: int, cursor: str | None = None
    ) -> tuple[list[DueWork], str | None]:
        upper = f"{int(upto.timestamp() * 1000):015d}#~"
        rows = [
            (
                row["sort_key"],
                DueWork(row["attempt_id"], datetime.fromisoformat(row["next_action_at"])),
            )
            for row in read(
                self.datastore,
                "SELECT attempt_id, sort_key, next_action_at FROM ledger_due "
                "WHERE sort_key <= ? AND sort_key > ? ORDER BY sort_key LIMIT ?",
                (upper, cursor or "", limit + 1),
            )
        ]
        return check_due_page(rows, limit)

    def close(self) -> None:
        self.datastore.close()
