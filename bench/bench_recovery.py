"""Recovery cost against history: one recovery tick with 10 due attempts, as the
table grows from 100 to 10,000 to 100,000 terminal attempts.

Recovery reads the due-work index (a query per bucket on DynamoDB, an index
range on SQLite) and never scans, so what one tick reads must not depend on
how many finished attempts the store holds: the ratio largest/smallest of
items (rows) read and of requests must be 1.00 +- 0.05.

Populating 100,000 attempts through the whole protocol on ministack would take
far too long, so the terminal attempts' items are written directly in bulk
(``BatchWriteItem`` on DynamoDB, ``executemany`` on SQLite): the four event
items of a real finished attempt (queued, leased, dispatch started, result
recorded, copied byte for byte from one run through the protocol under a new
attempt id), without due-work entries, as a finished attempt leaves them. The
10 due attempts of each tick are made through the real protocol (approved,
their stream records missed), and the tick leases and runs them.

Run: ``.venv/bin/python bench/bench_recovery.py [--quick]``.
"""

from __future__ import annotations

import sqlite3
import tempfile
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness import (
    CapacityMeter,
    Emulator,
    Lifecycle,
    Report,
    dynamodb_store,
    parse_args,
)

from adapters.sqlite.datastore import LedgerDatastore
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from adapters.store import LedgerStore
from adapters.system import ManualClock
from domain.services.recovery import run_recovery
from domain.spec import ATTEMPT_ID_PREFIX

DUE = 10
BATCH = 25


def new_attempt_id() -> str:
    return ATTEMPT_ID_PREFIX + uuid.uuid4().hex + uuid.uuid4().hex


def finished_template(life: Lifecycle) -> str:
    """Run one attempt through the protocol; return its id (now succeeded)."""
    outcome_id = life.approve(life.propose_and_present(0)[1])
    assert life.worker().process(outcome_id).value == "succeeded"
    return outcome_id


def make_due(life: Lifecycle, clock: ManualClock) -> None:
    for _ in range(DUE):
        life.approve(life.propose_and_present(0)[1])
    clock.advance(1)


def tick(life: Lifecycle) -> None:
    report = run_recovery(life.worker())
    assert report.examined == DUE and report.outcomes["succeeded"] == DUE, report


# -- DynamoDB ----------------------------------------------------------------------------


def dynamodb_rows(emulator: Emulator, sizes: list[int]) -> list[list[Any]]:
    client = emulator.client(max_pool_connections=16)
    meter = CapacityMeter(client)
    bulk = emulator.client(max_pool_connections=16)
    table = emulator.table(client)
    clock = ManualClock()
    life = Lifecycle(dynamodb_store(client, table), clock=clock)
    template_id = finished_template(life)
    template = client.query(
        TableName=table,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": template_id}},
        ConsistentRead=True,
    )["Items"]
    assert len(template) == 4 and not any("due_bucket" in i for i in template)

    def write_batch(count: int) -> None:
        requests = []
        for _ in range(count):
            pk = {"S": new_attempt_id()}
            requests += [{"PutRequest": {"Item": {**item, "pk": pk}}} for item in template]
        for start in range(0, len(requests), BATCH):
            chunk: dict[str, Any] = {table: requests[start : start + BATCH]}
            while chunk:
                chunk = bulk.batch_write_item(RequestItems=chunk).get("UnprocessedItems") or {}

    rows = []
    have = 1
    for size in sizes:
        missing = size - have
        per_call = 50
        with ThreadPoolExecutor(8) as pool:
            list(
                pool.map(
                    write_batch,
                    [per_call] * (missing // per_call)
                    + ([missing % per_call] if missing % per_call else []),
                )
            )
        have = size
        make_due(life, clock)
        with meter.measure() as used:
            tick(life)
        rows.append(
            [
                f"{size:,}",
                used.total,
                used.requests["Query"],
                used.requests.get("TransactWriteItems", 0),
                used.items_read,
                f"{used.rcu:g}",
            ]
        )
        # The terminal attempts made here through the protocol count too.
        have += DUE
    client.delete_table(TableName=table)
    client.close()
    bulk.close()
    return rows


# -- SQLite ------------------------------------------------------------------------------


class Counted:
    """Counts rows the store reads (a wrapper around the recorder's read methods)
    and SQLite virtual-machine steps (a progress handler on every connection)."""

    def __init__(self, recorder: SQLiteLedgerRecorder) -> None:
        self.rows = 0
        self.steps = 0
        self.queries = 0
        for name in ("select_events", "select_due", "get_lookup"):
            setattr(recorder, name, self._wrap(name, getattr(recorder, name)))
        datastore = recorder.datastore
        # Connections come from the per-thread datastore (or the library's pool
        # on the path before it): count on whichever makes them.
        owner: Any = datastore if isinstance(datastore, LedgerDatastore) else datastore.pool
        name = "_connect" if isinstance(datastore, LedgerDatastore) else "_create_connection"
        create = getattr(owner, name)

        def create_counted() -> Any:
            connection = create()
            connection._sqlite_conn.set_progress_handler(self._step, 1)
            return connection

        setattr(owner, name, create_counted)

    def _step(self) -> int:
        self.steps += 1
        return 0

    def _wrap(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            self.queries += 1
            if name == "select_due":
                self.rows += len(result[0])
            elif name == "get_lookup":
                self.rows += 1 if result is not None else 0
            else:
                self.rows += len(result)
            return result

        return counted

    def reset(self) -> None:
        self.rows = self.steps = self.queries = 0


def sqlite_rows(sizes: list[int]) -> list[list[Any]]:
    with tempfile.TemporaryDirectory(prefix="bench-recovery-") as tmp:
        path = str(Path(tmp) / "ledger.db")
        recorder = SQLiteLedgerRecorder(open_datastore(path))
        counted = Counted(recorder)  # before the first connection is made
        recorder.create_table()
        clock = ManualClock()
        life = Lifecycle(LedgerStore(recorder), clock=clock)
        template_id = finished_template(life)
        template = recorder.select_events(template_id)
        assert len(template) == 4
        bulk = sqlite3.connect(path, isolation_level=None)
        rows = []
        have = 1
        for size in sizes:
            bulk.execute("BEGIN")
            bulk.executemany(
                "INSERT INTO stored_events (originator_id, originator_version, topic, state) "
                "VALUES (?,?,?,?)",
                (
                    (attempt, e.originator_version, e.topic, e.state)
                    for attempt in (new_attempt_id() for _ in range(size - have))
                    for e in template
                ),
            )
            bulk.execute("COMMIT")
            have = size
            make_due(life, clock)
            counted.reset()
            tick(life)
            rows.append([f"{size:,}", counted.queries, counted.rows, f"{counted.steps:,}"])
            have += DUE
        bulk.close()
        recorder.close()
        return rows


def ratio(rows: list[list[Any]], column: int) -> str:
    def value(cell: Any) -> float:
        return float(str(cell).replace(",", ""))

    return f"{value(rows[-1][column]) / value(rows[0][column]):.2f}"


def main() -> None:
    args = parse_args(__doc__ or "")
    report = Report("bench_recovery", args.quick)
    sizes = [100, 1_000] if args.quick else [100, 10_000, 100_000]
    with Emulator() as emulator:
        dynamo = dynamodb_rows(emulator, sizes)
    dynamo.append(
        [
            "**ratio largest/smallest**",
            ratio(dynamo, 1),
            ratio(dynamo, 2),
            ratio(dynamo, 3),
            ratio(dynamo, 4),
            ratio(dynamo, 5),
        ]
    )
    report.table(
        f"DynamoDB (ministack): one recovery tick with {DUE} due attempts",
        [
            "terminal attempts in the table",
            "requests",
            "Query requests",
            "TransactWriteItems",
            "items read",
            "RCU",
        ],
        dynamo,
        align="lrrrrr",
    )
    lite = sqlite_rows(sizes)
    lite.append(["**ratio largest/smallest**", ratio(lite, 1), ratio(lite, 2), ratio(lite, 3)])
    report.table(
        f"SQLite: one recovery tick with {DUE} due attempts",
        ["terminal attempts in the file", "store reads", "rows read", "SQLite VM instructions"],
        lite,
        align="lrrr",
    )
    report.write(INTRO.format(due=DUE, largest=f"{sizes[-1]:,}"))


INTRO = """
Each row: {due} attempts approved through the protocol with their stream
records missed, then one recovery tick, counted. Between rows the table gains
terminal attempts written in bulk (the four event items of a real finished
attempt, without due-work entries). Items read on DynamoDB are the items the
answers carried (the due-bucket queries, one per bucket the table records, 256
on a new table, return the {due} due entries; the
worker then reads each attempt, its proposal and its directory records), so
they are the same whatever the table holds. On SQLite "rows read" counts the
rows the store's read methods returned, and the VM steps come from a progress
handler on every connection: a table scan would grow them with the file, an
index range does not. The target, ratio largest/smallest within 1.00 +- 0.05,
is met where the ratio row says 1.00 (counts, so they do not move between
runs).
"""


if __name__ == "__main__":
    main()
