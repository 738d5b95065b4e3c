"""Durability by need on SQLite: fsync only the commits an answer depends on.

The file runs in WAL mode with ``synchronous=NORMAL`` on every connection: a
commit appends its frames to the WAL without waiting for the disk, so a power
cut may lose the newest commits (never corrupt the file, never keep a later
commit without an earlier one: the WAL is replayed as a checksummed prefix).

A commit whose answer is given to a caller (201/202/200), or that must exist
before an external call (the dispatch marker), is *durable*: its transaction
runs with ``synchronous=FULL``, which fsyncs the WAL when it commits. One
fsync of the WAL file covers every frame written before it, whichever
connection wrote them, so a durable commit also makes every earlier commit
durable. Everything else (leases, requeues, view rows, subscriber positions,
head-index repairs, rebuilds) is recoverable from what is durable and waits
for the next durable commit or checkpoint. docs/durability.md lists each
commit of a lifecycle and why it is or is not durable.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from eventsourcing.sqlite import SQLiteConnection

Synchronous = Literal["OFF", "NORMAL", "FULL"]
DEFAULT_SYNCHRONOUS: Synchronous = "NORMAL"


@contextmanager
def synchronous_for(
    connection: SQLiteConnection, level: Synchronous, default: Synchronous
) -> Iterator[None]:
    """Run the block (one transaction) with ``level``, then restore ``default``.

    ``PRAGMA synchronous`` is read by SQLite when the transaction commits, so
    it is set before ``BEGIN`` and restored after ``COMMIT`` (or rollback).
    """
    if level == default:
        yield
        return
    connection.cursor().execute(f"PRAGMA synchronous={level}")
    try:
        yield
    finally:
        connection.cursor().execute(f"PRAGMA synchronous={default}")


def set_synchronous(connection: SQLiteConnection, level: Synchronous) -> None:
    """Leave ``connection`` at ``level`` for its next commit, with a statement
    only when its level changes (the level set last is kept on the connection).

    For a connection owned by one thread: it runs before the write lock is
    taken, so the lock is held for the transaction's own statements only (each
    statement gives up the GIL, and winning it back from callers running
    Python is what stretches a lock holder's time as callers are added)."""
    if getattr(connection, "ledger_synchronous", None) != level:
        connection.cursor().execute(f"PRAGMA synchronous={level}")
        connection.ledger_synchronous = level  # type: ignore[attr-defined]
