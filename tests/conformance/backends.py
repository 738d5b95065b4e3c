"""Backends for the conformance suites: each knows how to make a fresh recorder.

A new backend plugs in by adding one small mixin with ``create_ledger_recorder``
(and ``new_originator_id`` when its stream ids are not UUIDs), then listing
it in the suites. Mixins are plain classes so they combine with the
eventsourcing library's ``unittest`` cases as well as with pytest fixtures.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.recorder import LedgerRecorder
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore


def new_stream_id() -> str:
    """A ledger-style text stream id."""
    return f"stream:{uuid.uuid4().hex}"


def new_sqlite_recorder(directory: Path) -> SQLiteLedgerRecorder:
    """A SQLite ledger recorder on a fresh file (WAL) with its tables created."""
    recorder = SQLiteLedgerRecorder(open_datastore(str(directory / "ledger.db")))
    recorder.create_table()
    return recorder


class Backend:
    """What every backend mixin provides."""

    addCleanup: Callable[..., Any]  # provided by unittest.TestCase

    def create_ledger_recorder(self) -> LedgerRecorder:
        raise NotImplementedError

    def new_originator_id(self) -> uuid.UUID | str:
        return new_stream_id()


class MemoryBackend(Backend):
    """The in-memory recorder used by unit tests."""

    def create_ledger_recorder(self) -> MemoryLedgerRecorder:
        return MemoryLedgerRecorder()


class SQLiteBackend(Backend):
    """The embedded default: a fresh database file in its own temporary directory."""

    def create_ledger_recorder(self) -> SQLiteLedgerRecorder:
        directory = Path(tempfile.mkdtemp(prefix="ledger-conformance-"))
        self.addCleanup(shutil.rmtree, directory, True)
        recorder = new_sqlite_recorder(directory)
        self.addCleanup(_close_after_stray_threads, recorder, set(threading.enumerate()))
        return recorder


def _close_after_stray_threads(
    recorder: SQLiteLedgerRecorder, before: set[threading.Thread]
) -> None:
    # The library's concurrent case signals its reader threads to stop but
    # does not join them; closing the pool under a reader still inside a
    # query can crash the sqlite3 module, so wait for them first.
    for thread in set(threading.enumerate()) - before:
        if thread is not threading.current_thread():
            thread.join(timeout=30)
    recorder.close()
