"""The embedded SQLite backend: events, views and positions in one file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from eventsourcing.persistence import ApplicationRecorder, StoredEvent

from adapters.backend import AttemptStreams, NotificationLogBackend, NotificationLogReader
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from adapters.sqlite.views import SQLiteViewStore
from adapters.store import make_mapper
from domain.spec import ATTEMPT_ID_PREFIX

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
        self._readers: dict[str, NotificationLogReader] = {}

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

    def attempt_streams(self, batch: int) -> Iterator[AttemptStreams]:
        """One ordered pass over the attempt events, ``batch`` streams per read:
        the next ids by key range, then their events in (stream, version) order,
        both range scans of the primary key, in one read transaction per batch."""
        table = self.recorder.events_table_name
        upper = ATTEMPT_ID_PREFIX[:-1] + chr(ord(ATTEMPT_ID_PREFIX[-1]) + 1)
        after = ATTEMPT_ID_PREFIX
        while True:
            with self.recorder.datastore.transaction(commit=False) as c:
                c.execute(
                    f"SELECT originator_id FROM {table} WHERE originator_id > ? "
                    "AND originator_id < ? AND originator_version = 1 "
                    "ORDER BY originator_id LIMIT ?",
                    (after, upper, batch),
                )
                ids = [row[0] for row in c.fetchall()]
                if not ids:
                    return
                c.execute(
                    f"SELECT originator_id, originator_version, topic, state FROM {table} "
                    "WHERE originator_id >= ? AND originator_id <= ? "
                    "ORDER BY originator_id, originator_version",
                    (ids[0], ids[-1]),
                )
                rows = c.fetchall()
            streams: dict[str, list[StoredEvent]] = {i: [] for i in ids}
            for stream_id, version, topic, state in rows:
                events = streams.get(stream_id)
                if events is not None:
                    events.append(StoredEvent(stream_id, version, topic, state))
            yield list(streams.items())
            after = ids[-1]
