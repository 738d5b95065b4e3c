"""Pytest plugin: the ``store`` fixture, every test that asks for it runs on memory,
SQLite and DynamoDB (the emulator; marked ``dynamodb``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from adapters.store import LedgerStore


def _opened(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerStore]:
    if kind == "memory":
        yield LedgerStore(MemoryLedgerRecorder())
    elif kind == "sqlite":
        recorder = SQLiteLedgerRecorder(open_datastore(str(tmp_path / "ledger.db")))
        recorder.create_table()
        yield LedgerStore(recorder)
        recorder.close()
    else:
        yield LedgerStore(request.getfixturevalue("dynamodb_recorder"))


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
