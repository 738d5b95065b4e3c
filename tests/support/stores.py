"""Pytest plugin: the ``store`` fixture, every test that asks for it runs on memory,
SQLite and DynamoDB (the emulator; marked ``dynamodb``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from adapters.store import LedgerStore


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        pytest.param("dynamodb", marks=pytest.mark.dynamodb),
    ]
)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerStore]:
    if request.param == "memory":
        yield LedgerStore(MemoryLedgerRecorder())
    elif request.param == "sqlite":
        recorder = SQLiteLedgerRecorder(open_datastore(str(tmp_path / "ledger.db")))
        recorder.create_table()
        yield LedgerStore(recorder)
        recorder.close()
    else:
        yield LedgerStore(request.getfixturevalue("dynamodb_recorder"))
