"""The embedded SQLite backend: events, views and positions in one file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from eventsourcing.persistence import ApplicationRecorder

from adapters.backend import NotificationLogBackend, NotificationLogSubscription
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from adapters.sqlite.views import SQLiteViewStore
from adapters.store import make_mapper

if TYPE_CHECKING:
    from adapters.settings import Settings


class SQLiteBackend(NotificationLogBackend):
    """The notification log feeds the worker and the subscribers; each
    subscriber's position is a row of the library's ``tracking`` table, written
    in the transaction of the view rows it moved."""

    kind = "sqlite"

    def __init__(self, recorder: SQLiteLedgerRecorder) -> None:
        self.recorder: SQLiteLedgerRecorder = recorder
        self.views: SQLiteViewStore = SQLiteViewStore(recorder.datastore)
        self._mapper = make_mapper()
        self._subscriptions: dict[str, NotificationLogSubscription] = {}

    @classmethod
    def open(cls, path: str) -> SQLiteBackend:
        """The backend on a file (its folder created) or ``:memory:``."""
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        recorder = SQLiteLedgerRecorder(open_datastore(path))
        recorder.create_table()
        return cls(recorder)

    @classmethod
    def from_settings(cls, settings: Settings, **_clients: object) -> SQLiteBackend:
        return cls.open(settings.sqlite_path)

    def describe(self) -> str:
        return f"sqlite {self.recorder.datastore.pool.db_name}"

    def _log(self) -> ApplicationRecorder:
        return self.recorder

    def reopen(self) -> SQLiteBackend:
        return SQLiteBackend(self.recorder)
