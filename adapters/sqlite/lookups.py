"""The lookup items of the SQLite store (token hashes, idempotency keys, console
sessions): one row each in ``ledger_lookups``, written in the events' transaction.

An item with an expiry is absent when read after it (``select_lookup`` with
``now``), gives way to a new item of its key written after it
(``insert_lookups``), and is deleted by the housekeeping sweep in bounded
batches through the expiry index (``delete_expired_lookups``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from eventsourcing.sqlite import SQLiteCursor, SQLiteDatastore

from adapters.recorder import LookupConflictError
from adapters.sqlite.datastore import read
from domain.ports import Lookup

LOOKUP_TABLE = (
    "CREATE TABLE IF NOT EXISTS ledger_lookups ("
    "key TEXT PRIMARY KEY, value TEXT NOT NULL, expires_at TEXT) WITHOUT ROWID",
    # the sweep finds the expired items through it, oldest first
    "CREATE INDEX IF NOT EXISTS ledger_lookups_by_expiry ON ledger_lookups "
    "(expires_at) WHERE expires_at IS NOT NULL",
)
_INSERT_OVER_EXPIRED = (
    "INSERT INTO ledger_lookups VALUES (?,?,?) ON CONFLICT(key) DO UPDATE SET "
    "value=excluded.value, expires_at=excluded.expires_at "
    "WHERE ledger_lookups.expires_at IS NOT NULL AND ledger_lookups.expires_at <= ?"
)


def utc_text(moment: datetime) -> str:
    """How lookup expiries are stored: ISO 8601 in UTC, which sorts as time does
    (seconds always written, fractions only when there are some, and ``+`` sorts
    before ``.``)."""
    return moment.astimezone(UTC).isoformat()


def insert_lookups(c: SQLiteCursor, lookups: Sequence[Lookup]) -> None:
    """Create each item; LookupConflictError when its key is taken (by an item
    that has not expired by the new one's ``now``)."""
    for lookup in lookups:
        row = (
            lookup.key,
            json.dumps(dict(lookup.value), sort_keys=True),
            utc_text(lookup.expires_at) if lookup.expires_at else None,
        )
        try:
            if lookup.now is None:
                c.execute("INSERT INTO ledger_lookups VALUES (?,?,?)", row)
                continue
            c.execute(_INSERT_OVER_EXPIRED, (*row, utc_text(lookup.now)))
            c.execute("SELECT changes() AS n")
            if c.fetchone()["n"] != 1:  # taken by an item that is still live
                raise LookupConflictError(lookup.key)
        except sqlite3.IntegrityError as exc:
            raise LookupConflictError(lookup.key) from exc


def select_lookup(
    datastore: SQLiteDatastore, key: str, now: datetime | None
) -> Mapping[str, str] | None:
    """An item's value; with ``now``, None for one that has expired by then."""
    if now is None:
        rows = read(datastore, "SELECT value FROM ledger_lookups WHERE key=?", (key,))
    else:
        rows = read(
            datastore,
            "SELECT value FROM ledger_lookups WHERE key=? "
            "AND (expires_at IS NULL OR expires_at > ?)",
            (key, utc_text(now)),
        )
    if not rows:
        return None
    value: dict[str, str] = json.loads(rows[0][0])
    return value


def delete_lookup(c: SQLiteCursor, key: str) -> bool:
    c.execute("DELETE FROM ledger_lookups WHERE key=?", (key,))
    c.execute("SELECT changes() AS n")
    return bool(c.fetchone()["n"])


def delete_expired_lookups(c: SQLiteCursor, now: datetime, limit: int) -> int:
    """At most ``limit`` items that expired by ``now``, the oldest first."""
    c.execute(
        "DELETE FROM ledger_lookups WHERE key IN (SELECT key FROM ledger_lookups "
        "WHERE expires_at IS NOT NULL AND expires_at <= ? ORDER BY expires_at LIMIT ?)",
        (utc_text(now), limit),
    )
    c.execute("SELECT changes() AS n")
    return int(c.fetchone()["n"])
