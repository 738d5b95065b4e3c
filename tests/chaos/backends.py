"""The stores a schedule runs on: memory and SQLite (fast) and DynamoDB (ministack).

On DynamoDB the boto3 client is wrapped in a seeded fault injector, so the
recorder's own retries meet lost requests and lost responses too.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.memory.views import MemoryViewStore
from adapters.store import LedgerStore
from projections.ports import ViewStore

STORES = ("memory", "sqlite", "dynamodb")


def store_for_seed(seed: int, choice: str) -> str:
    """``mixed`` runs one schedule in four on SQLite, the rest in memory."""
    if choice != "mixed":
        return choice
    return "sqlite" if seed % 4 == 3 else "memory"


@dataclass
class Backend:
    """A store, its view store, and how to switch client-level faults on and off."""

    store: LedgerStore
    views: ViewStore
    on_arm: Callable[[bool], None] | None = None
    injected: dict[str, int] = field(default_factory=dict)


@contextlib.contextmanager
def open_backend(
    kind: str, seed: int, *, dynamodb_client: Any = None, write_fault_rate: float = 0.1
) -> Iterator[Backend]:
    if kind == "memory":
        yield Backend(LedgerStore(MemoryLedgerRecorder()), MemoryViewStore())
        return
    if kind == "sqlite":
        from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
        from adapters.sqlite.views import SQLiteViewStore

        with tempfile.TemporaryDirectory(prefix="chaos-") as workdir:
            recorder = SQLiteLedgerRecorder(open_datastore(str(Path(workdir) / "ledger.db")))
            recorder.create_table()
            try:
                yield Backend(LedgerStore(recorder), SQLiteViewStore(recorder.datastore))
            finally:
                recorder.close()
        return
    if kind == "dynamodb":
        yield from _dynamodb(seed, dynamodb_client, write_fault_rate)
        return
    raise ValueError(f"unknown store {kind!r}; choose from {', '.join(STORES)}")


def _dynamodb(seed: int, client: Any, write_fault_rate: float) -> Iterator[Backend]:
    from adapters.dynamodb.layout import NEW_TABLE
    from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
    from adapters.dynamodb.schema import create_table
    from adapters.dynamodb.views import DynamoDBViewStore
    from tests.support.dynamodb_fixtures import new_table_name
    from tests.support.faults import RandomFaultClient

    if client is None:
        raise ValueError("the dynamodb store needs a client")
    table = new_table_name()
    # Two due buckets recorded: every recovery tick queries each one, and the
    # seeded fault client draws one fault roll per request.
    create_table(client, table, layout=replace(NEW_TABLE, due_buckets=2))
    faulty = RandomFaultClient(client, seed=seed, write_rate=write_fault_rate, read_rate=0.02)
    faulty.armed = False
    recorder = DynamoDBLedgerRecorder(table, faulty, due_buckets=2, sleep=lambda _: None)

    def arm(on: bool) -> None:
        faulty.armed = on

    views = DynamoDBViewStore(faulty, table, retrier=recorder.retrier)
    backend = Backend(LedgerStore(recorder), views, arm)
    try:
        yield backend
    finally:
        backend.injected.update({f"{op}:{kind}": n for (op, kind), n in faulty.injected.items()})
        with contextlib.suppress(Exception):
            client.delete_table(TableName=table)
