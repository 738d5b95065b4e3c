"""Projection rebuild speed: ``adapters.rebuild.rebuild(ledger, "status")``, embedded
and on ministack, in events folded per second, beside a plain read of the same
streams in the same run.

Attempts are made through the protocol (each ends ``succeeded`` after four
events) without projecting them, so the first rebuild writes every status row;
the second finds every row identical and writes nothing. The baseline reads
every attempt stream (``select_events``) without folding or writing.

Run: ``.venv/bin/python bench/bench_rebuild.py [--quick]``.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import (
    ROOT,
    CapacityMeter,
    Emulator,
    Lifecycle,
    Report,
    Usage,
    parse_args,
)

from adapters.bootstrap import Ledger, build_ledger
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.rebuild import attempt_ids, rebuild
from adapters.settings import load_settings


def populate(ledger: Ledger, attempts: int) -> None:
    life = Lifecycle(ledger.store)
    worker = life.worker()
    for _ in range(attempts):
        life.run(0, worker)


def timed(operation: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = operation()
    return time.perf_counter() - start, result


def measure(ledger: Ledger, meter: CapacityMeter | None = None) -> list[list[Any]]:
    ids = list(attempt_ids(ledger))
    events = sum(len(ledger.store.read_stream(i)) for i in ids)
    rows = []

    def read_all() -> int:
        return sum(len(ledger.store.read_stream(i)) for i in attempt_ids(ledger))

    def run(label: str, operation: Callable[[], Any], check: Callable[[Any], None]) -> None:
        used = Usage()
        if meter is not None:
            with meter.measure() as used:
                seconds, result = timed(operation)
        else:
            seconds, result = timed(operation)
        check(result)
        rows.append([label, len(ids), events, f"{seconds:.2f}", f"{events / seconds:,.0f}",
                     f"{used.total / len(ids):.2f}" if meter else "-"])

    run("plain read of every attempt stream (baseline)", read_all,
        lambda n: None if n == events else (_ for _ in ()).throw(AssertionError(n)))
    run("rebuild status, views empty (writes every row)", lambda: rebuild(ledger, "status"),
        lambda r: None if r.total == len(ids) and not r.identical else
        (_ for _ in ()).throw(AssertionError(r)))
    run("rebuild status again (every row identical)", lambda: rebuild(ledger, "status"),
        lambda r: None if r.identical == len(ids) else (_ for _ in ()).throw(AssertionError(r)))
    base = float(rows[0][4].replace(",", ""))
    for row in rows:
        row.insert(5, f"{float(row[4].replace(',', '')) / base:.2f}")
    return rows


HEADERS = ["operation", "attempts", "events", "seconds", "events/s", "ratio to plain read",
           "requests per attempt"]


def main() -> None:
    args = parse_args(__doc__ or "")
    report = Report("bench_rebuild", args.quick)
    embedded, dynamo = (30, 10) if args.quick else (600, 200)
    base = ROOT / "var"
    base.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base, prefix="bench-rebuild-") as tmp:
        ledger = build_ledger(load_settings(store="sqlite",
                                            sqlite_path=str(Path(tmp) / "ledger.db")))
        populate(ledger, embedded)
        rows = measure(ledger)
        ledger.close()
    report.table("Embedded (SQLite)", HEADERS, rows, align="lrrrrrr")
    with Emulator() as emulator:
        client = emulator.client()
        meter = CapacityMeter(client)
        table = emulator.table(client)
        ledger = build_ledger(load_settings(store="dynamodb", dynamodb_table=table),
                              recorder=DynamoDBLedgerRecorder(table, client))
        populate(ledger, dynamo)
        rows2 = measure(ledger, meter)
        client.delete_table(TableName=table)
        client.close()
    report.table("DynamoDB (ministack)", HEADERS, rows2, align="lrrrrrr")
    report.write(INTRO.format(embedded=embedded, dynamo=dynamo))


INTRO = """
{embedded} attempts embedded, {dynamo} on ministack, each made through the
protocol. Enumerating the attempts is the one place a batch job reads the whole
store: SQL on SQLite, a paginated `Scan` on DynamoDB (an admin operation, never
on the request or worker path). A rebuild then reads each attempt stream with
a consistent `Query`, folds it, compares it with the live row (a `GetItem`),
and writes it when it differs (a `PutItem`): so on DynamoDB it is about three
requests per attempt, and its speed is the emulator's request rate divided by
that. The ratio to the plain read is what folding, comparing and writing add.
"""


if __name__ == "__main__":
    main()
