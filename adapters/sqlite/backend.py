"""The embedded SQLite backend: events, views and positions in one file."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from adapters.backend import (
    Backend,
    Lag,
    LogSubscription,
    NotificationLogFeed,
    NotificationLogSubscription,
    WorkFeed,
    notification_lag,
)
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from adapters.sqlite.views import SQLiteViewStore
from adapters.store import make_mapper
from domain.spec import ATTEMPT_ID_PREFIX


class SQLiteBackend(Backend):
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

    def reopen(self) -> SQLiteBackend:
        return SQLiteBackend(self.recorder)

    def work_feed(self) -> WorkFeed:
        return NotificationLogFeed(self.recorder)

    def subscription(self, name: str) -> LogSubscription:
        if name not in self._subscriptions:
            self._subscriptions[name] = NotificationLogSubscription(
                name, self.recorder, self.views, self._mapper)
        return self._subscriptions[name]

    def attempt_ids(self) -> Iterator[str]:
        yield from self.recorder.stream_ids(ATTEMPT_ID_PREFIX)

    def lag(self, name: str, now: datetime) -> Lag | None:
        return notification_lag(name, self.recorder, self.views, self._mapper, now)
