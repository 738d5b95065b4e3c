"""SQLite view store: one table beside the events, in the same file, and the
library's ``tracking`` table for the positions of the log's subscribers."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from eventsourcing.persistence import Tracking
from eventsourcing.sqlite import SQLiteCursor, SQLiteDatastore, SQLiteTrackingRecorder

from adapters.sqlite.datastore import read
from projections.ports import ViewRecord

CREATE = [
    "CREATE TABLE IF NOT EXISTS ledger_views ("
    "name TEXT NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL, data TEXT NOT NULL, "
    "list_pk TEXT, list_sk TEXT, PRIMARY KEY (name, key)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS ledger_views_list ON ledger_views (list_pk, list_sk)",
]
_UPSERT = (
    "INSERT INTO ledger_views VALUES (?,?,?,?,?,?) ON CONFLICT(name, key) DO UPDATE "
    "SET version=excluded.version, data=excluded.data, list_pk=excluded.list_pk, "
    "list_sk=excluded.list_sk"
)
_NEWER = " WHERE excluded.version > ledger_views.version"
_NOT_OLDER = " WHERE excluded.version >= ledger_views.version"
_KEYS_PER_READ = 500  # well under SQLite's bound on bound parameters


class SQLiteViewStore(SQLiteTrackingRecorder):
    """Implements ``projections.ports.TrackedViewStore``; the version guard is in
    the SQL, and rows and positions are written in one transaction."""

    def __init__(self, datastore: SQLiteDatastore) -> None:
        super().__init__(datastore)
        self.create_table()

    def construct_create_table_statements(self) -> list[str]:
        return [*super().construct_create_table_statements(), *CREATE]

    def get_view(self, name: str, key: str) -> ViewRecord | None:
        rows = read(
            self.datastore, "SELECT * FROM ledger_views WHERE name=? AND key=?", (name, key)
        )
        return _record(rows[0]) if rows else None

    def put_view(self, record: ViewRecord, *, force: bool = False) -> bool:
        with self.datastore.transaction(commit=True) as c:
            return self._put(c, record, force=force)

    def max_tracking_id(self, application_name: str) -> int | None:
        rows = read(self.datastore, self.select_max_tracking_id_statement, (application_name,))
        value: int | None = rows[0][0]
        return value

    @staticmethod
    def _put(c: SQLiteCursor, record: ViewRecord, *, force: bool = False) -> bool:
        c.execute(
            _UPSERT + ("" if force else _NEWER),
            (
                record.name,
                record.key,
                record.version,
                encode_data(record.data),
                record.list_pk,
                record.list_sk,
            ),
        )
        return bool(c.sqlite_cursor.rowcount)

    def put_views(self, records: Sequence[ViewRecord], tracking: Sequence[Tracking]) -> int:
        with self.datastore.transaction(commit=True) as c:
            moved = sum(1 for record in records if self._put(c, record))
            for position in tracking:
                self._insert_tracking(c, position)  # IntegrityError rolls all back
            return moved

    # -- rebuilds ------------------------------------------------------------------

    def get_views(self, name: str, keys: Sequence[str]) -> Mapping[str, ViewRecord]:
        """The stored rows of ``keys`` (absent keys are left out), in one read
        per few hundred keys."""
        found: dict[str, ViewRecord] = {}
        for start in range(0, len(keys), _KEYS_PER_READ):
            part = list(keys[start : start + _KEYS_PER_READ])
            marks = ",".join("?" * len(part))
            with self.datastore.transaction(commit=False) as c:
                c.execute(
                    f"SELECT * FROM ledger_views WHERE name=? AND key IN ({marks})", (name, *part)
                )
                rows = c.fetchall()
            for row in rows:
                record = _record(row)
                found[record.key] = record
        return found

    def identical_views(self, records: Sequence[ViewRecord]) -> set[str]:
        """The keys of ``records`` whose stored row holds exactly what this store
        would write for them: compared as stored, the data as its JSON text,
        so no stored row is decoded (one read per few hundred keys)."""
        identical: set[str] = set()
        for start in range(0, len(records), _KEYS_PER_READ):
            wanted = {(r.name, r.key): r for r in records[start : start + _KEYS_PER_READ]}
            for name in {n for n, _ in wanted}:
                keys = [k for n, k in wanted if n == name]
                rows = read(
                    self.datastore,
                    "SELECT key, version, data, list_pk, list_sk FROM ledger_views "
                    f"WHERE name=? AND key IN ({','.join('?' * len(keys))})",
                    (name, *keys),
                )
                for key, version, data, list_pk, list_sk in rows:
                    record = wanted[(name, key)]
                    if (
                        version == record.version
                        and list_pk == record.list_pk
                        and list_sk == record.list_sk
                        and data == encode_data(record.data)
                    ):
                        identical.add(key)
        return identical

    def replace_views(self, records: Sequence[ViewRecord], *, force: bool = False) -> int:
        """Rebuilt rows in ONE transaction, each under the version guard: a row
        replaces a stored one only if that is older (``force``: not newer), so a
        newer row written meanwhile by the live projector is never overwritten.
        The commit is not fsynced (the views are rebuildable); returns rows written."""
        if not records:
            return 0
        with self.datastore.transaction(commit=True) as c:
            c.sqlite_cursor.executemany(
                _UPSERT + (_NOT_OLDER if force else _NEWER),
                [
                    (r.name, r.key, r.version, encode_data(r.data), r.list_pk, r.list_sk)
                    for r in records
                ],
            )
            return max(0, c.sqlite_cursor.rowcount)

    def list_views(
        self, list_pk: str, limit: int, cursor: str | None = None, *, until: str | None = None
    ) -> tuple[Sequence[ViewRecord], str | None]:
        bounded = "" if until is None else " AND list_sk<=?"
        rows = [
            _record(r)
            for r in read(
                self.datastore,
                f"SELECT * FROM ledger_views WHERE list_pk=? AND list_sk>?{bounded} "
                "ORDER BY list_sk LIMIT ?",
                (list_pk, cursor or "", *(() if until is None else (until,)), limit + 1),
            )
        ]
        page = rows[:limit]
        return page, (page[-1].list_sk if len(rows) > limit and page else None)


_encode = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode
"""What ``json.dumps(data, sort_keys=True, separators=(",", ":"))`` is, built once
(``dumps`` builds an encoder per call)."""


def encode_data(data: Mapping[str, Any]) -> str:
    """A row's data as stored."""
    return _encode(data if type(data) is dict else dict(data))


def _record(row: sqlite3.Row) -> ViewRecord:
    """A view row; the library's connections make ``sqlite3.Row`` rows."""
    return ViewRecord(
        name=row["name"],
        key=row["key"],
        version=row["version"],
        data=json.loads(row["data"]),
        list_pk=row["list_pk"],
        list_sk=row["list_sk"],
    )
