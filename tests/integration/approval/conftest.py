"""Backends for the approval slice: every test runs on memory, SQLite and DynamoDB."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from adapters.store import LedgerStore

from .world import World, check_approval_invariants


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


@pytest.fixture
def world(store: LedgerStore) -> Iterator[World]:
    """The approval world; after every test, I1-I3 are checked on the raw store
    for every proposal the test created."""
    created = World(store)
    yield created
    check_approval_invariants(store, created.tokens.proposal_ids, created.clock.now())
