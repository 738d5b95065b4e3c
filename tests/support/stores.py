"""Pytest plugin: the ``store`` fixture, every test that asks for it runs on memory,
SQLite and DynamoDB (the emulator; marked ``dynamodb``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from eventsourcing.persistence import StoredEvent

from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.recorder import LedgerRecorder
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from adapters.store import LedgerStore


class WithoutHeadIndex:
    """A recorder whose writes leave the head index out: what a ledger wrote
    before the head index existed."""

    def __init__(self, inner: LedgerRecorder) -> None:
        self.inner = inner

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Any:
        return self.inner.insert_events(stored_events, **{**kwargs, "heads": ()})

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class DurableCountingRecorder(SQLiteLedgerRecorder):
    """The SQLite recorder, counting its durable commits and running the ``after``
    hooks once each has returned (its fsync done), in the committing thread: a
    test reads the WAL's size there to know which prefix of the file a power cut
    cannot take away."""

    def __init__(self, datastore: Any, **kwargs: Any) -> None:
        super().__init__(datastore, **kwargs)
        self.durable_count = 0
        self.after: list[Callable[[], None]] = []
        self._counting = threading.Lock()

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Any:
        result = super().insert_events(stored_events, **kwargs)
        if kwargs.get("durable", True):
            with self._counting:
                self.durable_count += 1
            for hook in list(self.after):
                hook()
        return result


def store_before_head_index(recorder: LedgerRecorder) -> LedgerStore:
    """A store on ``recorder`` that writes as the ledger did before the head index."""
    return LedgerStore(cast(LedgerRecorder, WithoutHeadIndex(recorder)))


def _opened(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerStore]:
    if kind == "memory":
        yield LedgerStore(MemoryLedgerRecorder())
    elif kind == "sqlite":
        recorder = SQLiteLedgerRecorder(open_datastore(str(tmp_path / "ledger.db")))
        recorder.create_table()
        yield LedgerStore(recorder)
        recorder.close()
    elif kind == "dynamodb-legacy":
        yield LedgerStore(request.getfixturevalue("dynamodb_legacy_recorder"))
    else:
        yield LedgerStore(request.getfixturevalue("dynamodb_recorder"))


STORES_AND_LAYOUTS = [
    "memory",
    "sqlite",
    pytest.param("dynamodb", marks=pytest.mark.dynamodb),
    pytest.param("dynamodb-legacy", marks=pytest.mark.dynamodb),
]
"""Every store, and DynamoDB twice: a new table (striped directory records) and a
table made before the layout record (checks on each record's own next slot).
A module takes them with ``@pytest.fixture(params=STORES_AND_LAYOUTS) def store``
calling :func:`opened_store`."""


def opened_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerStore]:
    yield from _opened(request.param, request, tmp_path)


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        pytest.param("dynamodb", marks=pytest.mark.dynamodb),
    ]
)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerStore]:
    yield from _opened(request.param, request, tmp_path)


@pytest.fixture(params=["sqlite", pytest.param("dynamodb", marks=pytest.mark.dynamodb)])
def engine_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerStore]:
    """A store on a real storage engine (SQLite, the DynamoDB emulator): for tests
    that edit stored bytes or cross processes. A module narrows ``store`` to it with
    ``def store(engine_store): return engine_store``."""
    yield from _opened(request.param, request, tmp_path)
