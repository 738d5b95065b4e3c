"""SQLite view store: one table beside the events, in the same file."""

from __future__ import annotations

import json
from collections.abc import Sequence

from eventsourcing.sqlite import SQLiteDatastore

from projections.ports import ViewRecord

CREATE = [
    "CREATE TABLE IF NOT EXISTS ledger_views ("
    "name TEXT NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL, data TEXT NOT NULL, "
    "list_pk TEXT, list_sk TEXT, PRIMARY KEY (name, key)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS ledger_views_list ON ledger_views (list_pk, list_sk)",
]


class SQLiteViewStore:
    """Implements ``projections.ports.ViewStore``; the version guard is in the SQL."""

    def __init__(self, datastore: SQLiteDatastore) -> None:
        self.datastore = datastore
        with self.datastore.transaction(commit=True) as c:
            for statement in CREATE:
                c.execute(statement)

    def get_view(self, name: str, key: str) -> ViewRecord | None:
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT * FROM ledger_views WHERE name=? AND key=?", (name, key))
            row = c.fetchone()
        return _record(row) if row is not None else None

    def put_view(self, record: ViewRecord, *, force: bool = False) -> bool:
        guard = "" if force else " WHERE excluded.version > ledger_views.version"
        with self.datastore.transaction(commit=True) as c:
            c.execute(
                "INSERT INTO ledger_views VALUES (?,?,?,?,?,?) ON CONFLICT(name, key) DO UPDATE "
                "SET version=excluded.version, data=excluded.data, list_pk=excluded.list_pk, "
                "list_sk=excluded.list_sk" + guard,
                (record.name, record.key, record.version,
                 json.dumps(dict(record.data), sort_keys=True, separators=(",", ":")),
                 record.list_pk, record.list_sk),
            )
            return bool(c.sqlite_cursor.rowcount)

    def list_views(
        self, list_pk: str, limit: int, cursor: str | None = None
    ) -> tuple[Sequence[ViewRecord], str | None]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                "SELECT * FROM ledger_views WHERE list_pk=? AND list_sk>? "
                "ORDER BY list_sk LIMIT ?",
                (list_pk, cursor or "", limit + 1),
            )
            rows = [_record(r) for r in c.fetchall()]
        page = rows[:limit]
        return page, (page[-1].list_sk if len(rows) > limit and page else None)


def _record(row: object) -> ViewRecord:
    r = dict(row)  # type: ignore[call-overload]
    return ViewRecord(
        name=r["name"], key=r["key"], version=r["version"], data=json.loads(r["data"]),
        list_pk=r["list_pk"], list_sk=r["list_sk"],
    )
