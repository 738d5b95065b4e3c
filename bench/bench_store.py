"""Store throughput, side by side in one run: DynamoDB (ministack) and SQLite.

For each backend: raw conditional single-item writes per second, ledger
single-event appends per second (the event and its head-index entry, as the
ledger writes every event), and ledger multi-stream commits per second (the
approval shape: two new streams, a read-set check, a lookup, a due-work entry
and the head-index entry of each stream), each with its ratio to the raw
write; for DynamoDB also the HTTP requests per operation, counted with a
botocore event hook.

Run: ``.venv/bin/python bench/bench_store.py [--quick]`` (starts and stops its own
ministack; writes bench/results/bench_store.md, or bench_store.quick.md for a
``--quick`` smoke run).
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eventsourcing.persistence import StoredEvent  # noqa: E402

from adapters.dynamodb.client import make_client  # noqa: E402
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder  # noqa: E402
from adapters.dynamodb.schema import create_table  # noqa: E402
from adapters.recorder import LedgerRecorder  # noqa: E402
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore  # noqa: E402
from domain.ports import DueWork, Lookup, ReadCheck, StreamHead  # noqa: E402
from domain.spec import ATTEMPT_ID_PREFIX  # noqa: E402
from tests.support import ministack  # noqa: E402
from tests.support.faults import RequestCounter  # noqa: E402

OPS = 50  # operations per sample
WARMUP = 25
REPEATS = 15  # samples per row, taken round-robin across the rows; the median is reported
STATE = b'{"at":"2026-11-29T12:00:00Z","step":"queued","payload_hash":"sha256:' + b"ab" * 32 + b'"}'
RESULTS = ROOT / "bench" / "results" / "bench_store.md"


def rate(operation: Callable[[int], None], ops: int = OPS) -> float:
    """Operations per second of ``operation(i)`` run sequentially."""
    start = time.perf_counter()
    for i in range(ops):
        operation(i)
    return ops / (time.perf_counter() - start)


def median_rates(operations: list[Callable[[int], None]]) -> list[float]:
    """Short samples, round-robin over the rows, so that drift and noise from
    the rest of the machine (fsync stalls, other processes) hit every row alike."""
    for operation in operations:
        for i in range(WARMUP):
            operation(-1 - i)
    samples: list[list[float]] = [[] for _ in operations]
    for _ in range(REPEATS):
        for index, operation in enumerate(operations):
            samples[index].append(rate(operation))
    return [statistics.median(s) for s in samples]


def unique() -> str:
    return uuid.uuid4().hex[:16]


HEAD = "sha256:" + "cd" * 32


def event(stream: str) -> StoredEvent:
    return StoredEvent(originator_id=stream, originator_version=1, topic="bench:Event", state=STATE)


def head(stream: str) -> StreamHead:
    """The head-index entry the ledger writes in the commit that moves ``stream``."""
    return StreamHead(stream, 1, HEAD)


def ledger_ops(recorder: LedgerRecorder) -> tuple[Callable[[int], None], Callable[[int], None]]:
    """(single-event append, approval-shaped multi-stream commit)."""
    directory = f"actor:{unique()}"
    recorder.insert_events([event(directory)])

    def single(_: int) -> None:
        stream = f"stream:{unique()}"
        recorder.insert_events([event(stream)], heads=[head(stream)])

    def multi(i: int) -> None:
        attempt, proposal = ATTEMPT_ID_PREFIX + unique(), f"proposal:{unique()}"
        recorder.insert_events(
            [event(proposal), event(attempt)],
            read_checks=[ReadCheck(directory, 1)],
            lookups=[Lookup(f"token:{unique()}", {"proposal": attempt})],
            due=[DueWork(attempt, None if i % 7 == 0 else _due_time())],
            heads=[head(proposal), head(attempt)],
        )

    return single, multi


def _due_time() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)


def bench_dynamodb() -> list[tuple[str, float, float | None]]:
    node = ministack.start()
    try:
        client = make_client(
            endpoint_url=node.url,
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
        )
        table = f"bench-{unique()}"
        create_table(client, table)
        counter = RequestCounter(client)
        recorder = DynamoDBLedgerRecorder(table, client)

        def raw_put(_: int) -> None:
            client.put_item(
                TableName=table,
                Item={
                    "pk": {"S": f"raw:{unique()}"},
                    "sk": {"N": "1"},
                    "topic": {"S": "bench:Event"},
                    "state": {"B": STATE},
                },
                ConditionExpression="attribute_not_exists(#pk)",
                ExpressionAttributeNames={"#pk": "pk"},
            )

        single, multi = ledger_ops(recorder)
        names = [
            "raw conditional PutItem",
            "ledger single-event append",
            "ledger multi-stream commit",
        ]
        operations = [raw_put, single, multi]
        requests = []
        for operation in operations:  # requests per operation, counted on their own
            counter.reset()
            for i in range(50):
                operation(10_000 + i)
            requests.append(counter.total / 50)
        rates = median_rates(operations)
        client.close()
        return list(zip(names, rates, requests, strict=True))
    finally:
        node.stop()


def bench_sqlite() -> list[tuple[str, float, float | None]]:
    with tempfile.TemporaryDirectory() as tmp:
        raw = sqlite3.connect(str(Path(tmp) / "raw.db"), isolation_level=None)
        raw.execute("PRAGMA journal_mode=WAL")
        raw.execute(
            "CREATE TABLE events (pk TEXT, sk INTEGER, topic TEXT, state BLOB, "
            "PRIMARY KEY (pk, sk)) WITHOUT ROWID"
        )

        def raw_insert(_: int) -> None:
            with raw:  # a conditional insert: the primary key refuses a taken slot
                raw.execute("BEGIN")
                raw.execute(
                    "INSERT INTO events VALUES (?,?,?,?)",
                    (f"raw:{unique()}", 1, "bench:Event", STATE),
                )

        recorder = SQLiteLedgerRecorder(open_datastore(str(Path(tmp) / "ledger.db")))
        recorder.create_table()
        single, multi = ledger_ops(recorder)
        rates = median_rates([raw_insert, single, multi])
        names = [
            "raw conditional INSERT",
            "ledger single-event append",
            "ledger multi-stream commit",
        ]
        rows: list[tuple[str, float, float | None]] = [
            (name, ops, None) for name, ops in zip(names, rates, strict=True)
        ]
        recorder.close()
        raw.close()
        return rows


def ministack_version() -> str:
    try:
        python = Path(ministack.find_executable()).parent / "python"
        out = subprocess.run(
            [str(python), "-c", "import importlib.metadata as m; print(m.version('ministack'))"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError, ministack.MinistackError):
        return "unknown"


def render(results: dict[str, list[tuple[str, float, float | None]]]) -> str:
    lines = [
        "| backend | operation | ops/s | ratio to raw | requests/op |",
        "|---|---|---:|---:|---:|",
    ]
    for backend, rows in results.items():
        raw_rate = rows[0][1]
        for name, ops, requests in rows:
            per = f"{requests:.2f}" if requests is not None else "-"
            lines.append(f"| {backend} | {name} | {ops:,.0f} | {ops / raw_rate:.2f} | {per} |")
    return "\n".join(lines)


def main() -> None:
    global OPS, WARMUP, REPEATS
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    quick = parser.parse_args().quick
    out_path = Path(os.environ.get("LEDGER_BENCH_RESULTS", RESULTS.parent)) / (
        "bench_store.quick.md" if quick else "bench_store.md"
    )
    if quick:
        OPS, WARMUP, REPEATS = 5, 2, 2
    started = time.perf_counter()
    results = {
        f"DynamoDB (ministack {ministack_version()})": bench_dynamodb(),
        "SQLite (WAL, one file)": bench_sqlite(),
    }
    table = render(results)
    elapsed = time.perf_counter() - started
    header = (
        "# bench_store\n\n"
        f"`python bench/bench_store.py`: median of {REPEATS} samples of {OPS} sequential "
        f"operations per row (after {WARMUP} warm-up), samples taken round-robin across "
        "the rows, one client, "
        f"one thread; Python {platform.python_version()}, {os.cpu_count()} CPUs, load "
        f"average {os.getloadavg()[0]:.1f} at the end, ran in {elapsed:.0f} s. "
        "A single-event append writes the event and its head-index entry (a "
        "TransactWriteItems of two items on DynamoDB, one transaction on SQLite). "
        "The multi-stream commit is the approval shape: two new streams, one "
        "read-set check, one lookup, one due-work entry and the head-index entry "
        "of each new stream (seven items in one TransactWriteItems on DynamoDB, "
        "one transaction on SQLite).\n\n"
        "The emulator runs its DynamoDB handlers one at a time in one local "
        "process, so absolute DynamoDB numbers say nothing about AWS latency or "
        "capacity; what carries over is the requests per operation (one request "
        "per commit, never a read before a write) and the shape of the ratios. On "
        "AWS a transactional write also costs twice the write units of a plain "
        "one per item. Repeated runs on this shared two-CPU machine move rows by "
        "10-20 %, so compare rows of one run, as the ratios do.\n\n"
    )
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(header + table + "\n")
    print(table)


if __name__ == "__main__":
    main()
