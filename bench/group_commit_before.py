"""The SQLite write path as it was before group commit, kept runnable for the
benchmarks only (never imported by the ledger): every caller's write is its own
``BEGIN IMMEDIATE`` transaction, taken in turn on the process's write lock, with
its own commit (and, when durable, its own fsync)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent

from adapters.sqlite.recorder import SQLiteLedgerRecorder


class OneByOneRecorder(SQLiteLedgerRecorder):
    """The ledger's SQLite recorder with one transaction per write."""

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        durable = bool(kwargs.get("durable", True))
        with self._write_transaction(durable=durable) as c:
            return self._insert_events(c, stored_events, **kwargs)
