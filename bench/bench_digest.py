"""Audit digests at scale, and what the head index costs each commit.

1. **Scale** (SQLite): a ledger of N streams (100,000; ``--quick``: 2,000), each
   a directory record with three events. Taking a digest reads the head index
   only (one row per stream) and builds the Merkle tree; verifying replays
   every stream's chain (reads every event) and compares each head. Both are
   timed, with their peak Python memory (``tracemalloc``, a separate pass),
   and their cost per stream. An inclusion proof's size is printed too.
2. **Cost per commit**: the same commits with the head index on and off, side
   by side: SQLite single-event commits per second, and on ministack the
   DynamoDB requests and write units of one attempt's whole happy path
   (approval, lease, dispatch marker, result), counted with
   ``harness.CapacityMeter``.

Run: ``.venv/bin/python bench/bench_digest.py [--quick]``.
"""

from __future__ import annotations

import json
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness import (
    ROOT,
    CapacityMeter,
    Emulator,
    Lifecycle,
    Report,
    Usage,
    WithoutHeadIndex,
    parse_args,
)

from adapters.audit.digests import digest_text, verify_ledger
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from adapters.store import LedgerStore
from domain.digest import Digest, build_digest
from domain.directory import DirectoryRecord
from domain.ports import Commit
from domain.proofs import check_proof, make_proof
from domain.spec import format_utc

AT = "2026-01-01T00:00:00Z"
EVENTS_PER_STREAM = 3
BATCH = 500  # records per commit while populating (one SQLite transaction)


def sqlite_store(path: Path, *, head_index: bool = True) -> LedgerStore:
    recorder = SQLiteLedgerRecorder(open_datastore(str(path)))
    recorder.create_table()
    return LedgerStore(recorder if head_index else WithoutHeadIndex(recorder))


def populate(store: LedgerStore, streams: int) -> None:
    for start in range(0, streams, BATCH):
        records = []
        for n in range(start, min(start + BATCH, streams)):
            record = DirectoryRecord(
                record_id=f"actor:user-{n:07d}", kind="actor", values={"enabled": True}, at=AT
            )
            for enabled in (False, True)[: EVENTS_PER_STREAM - 1]:
                record.update({"enabled": enabled}, AT)
            records.append(record)
        store.commit(Commit(aggregates=records))


def take(store: LedgerStore) -> Digest:
    return build_digest("bench", format_utc(datetime.now(UTC)), store.stream_heads())


def timed(operation: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = operation()
    return time.perf_counter() - start, result


def cpu_timed(operation: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall and CPU seconds: on a shared machine the CPU time is the steadier figure."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = operation()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def peak_memory(operation: Callable[[], Any]) -> float:
    tracemalloc.start()
    try:
        operation()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def scale(streams: int, tmp: Path) -> tuple[list[list[Any]], list[list[Any]]]:
    store = sqlite_store(tmp / "scale.db")
    populate_s, _ = timed(lambda: populate(store, streams))
    events = streams * EVENTS_PER_STREAM
    digest_s, digest_cpu, digest = cpu_timed(lambda: take(store))
    assert digest.stream_count == streams
    verify_s, verify_cpu, verdict = cpu_timed(lambda: verify_ledger(store, digest))
    assert verdict.ok, verdict.message
    digest_mb = peak_memory(lambda: take(store))
    verify_mb = peak_memory(lambda: verify_ledger(store, digest))
    size = len(digest_text(digest).encode())
    rows = [
        [
            "take a digest (head index, Merkle root)",
            f"{digest_s:.2f}",
            f"{digest_cpu:.2f}",
            f"{digest_cpu / streams * 1e6:.1f}",
            f"{digest_mb:.1f}",
        ],
        [
            "verify the ledger extends it (every chain)",
            f"{verify_s:.2f}",
            f"{verify_cpu:.2f}",
            f"{verify_cpu / streams * 1e6:.1f}",
            f"{verify_mb:.1f}",
        ],
    ]
    stream_id = digest.heads[streams // 2].stream_id
    events_of, _ = store.audit_events(stream_id)
    proof_s, proof = timed(lambda: make_proof(digest, stream_id, 1, events_of))
    check_s, why = timed(lambda: check_proof(proof, digest))
    assert why is None, why
    facts = [
        ["streams / events", f"{streams:,} / {events:,}"],
        ["populating (500 records per commit)", f"{populate_s:.1f} s"],
        ["digest file size", f"{size / 2**20:.1f} MiB ({size / streams:.0f} bytes per stream)"],
        [
            "inclusion proof: Merkle path / chain path",
            f"{len(proof['merkle_path'])} hashes / {len(proof['chain'])} events, "
            f"{len(json.dumps(proof)):,} bytes",
        ],
        [
            "inclusion proof: make (tree rebuilt) / check offline",
            f"{proof_s * 1000:.0f} ms / {check_s * 1000:.2f} ms",
        ],
    ]
    store.recorder.close()
    return rows, facts


def sqlite_commit_cost(commits: int, tmp: Path) -> list[list[Any]]:
    rows = []
    rates = {}
    for head_index in (False, True, False, True):  # interleaved: the machine is shared
        store = sqlite_store(tmp / f"commit-{head_index}-{len(rates)}.db", head_index=head_index)
        records = [
            DirectoryRecord(record_id=f"actor:c-{n}", kind="actor", values={"enabled": True}, at=AT)
            for n in range(commits)
        ]
        seconds, _ = timed(
            lambda s=store, r=records: [  # type: ignore[misc]
                s.commit(Commit(aggregates=[one])) for one in r
            ]
        )
        rates.setdefault(head_index, []).append(commits / seconds)
        store.recorder.close()
    off = max(rates[False])
    on = max(rates[True])
    rows.append(["single-event commit, head index off", f"{off:,.0f}", "1.00"])
    rows.append(["single-event commit, head index on", f"{on:,.0f}", f"{on / off:.2f}"])
    return rows


def dynamodb_commit_cost(attempts: int) -> list[list[Any]]:
    rows = []
    with Emulator() as emulator:
        client = emulator.client()
        meter = CapacityMeter(client)
        for head_index in (False, True):
            table = emulator.table(client, prefix=f"digest{int(head_index)}")
            recorder = DynamoDBLedgerRecorder(table, client)
            store = LedgerStore(recorder if head_index else WithoutHeadIndex(recorder))
            life = Lifecycle(store)
            worker = life.worker()
            total = Usage()
            for n in range(attempts):
                with meter.measure() as used:
                    life.run(0, worker)
                total = total + used
                del n
            label = "on" if head_index else "off"
            rows.append(
                [
                    f"one attempt's happy path, head index {label}",
                    f"{total.writes / attempts:.1f}",
                    f"{total.wcu / attempts:.1f}",
                    f"{total.gsi_wcu / attempts:.1f}",
                    _per_attempt(total, attempts),
                ]
            )
            client.delete_table(TableName=table)
        client.close()
    return rows


def _per_attempt(total: Usage, attempts: int) -> str:
    return ", ".join(f"{op} {n / attempts:g}" for op, n in sorted(total.requests.items()))


def head_hash_cost(commits: int) -> list[list[Any]]:
    """The head index hashes each commit's newest event: that hash, timed alone."""
    records = []
    for n in range(commits):
        record = DirectoryRecord(
            record_id=f"actor:h-{n}", kind="actor", values={"enabled": True}, at=AT
        )
        records.append(record)
    seconds, _ = timed(lambda: [r.chain_head for r in records])
    return [
        [
            "hash of a commit's newest event (the head), alone",
            f"{commits / seconds:,.0f}",
            f"{seconds / commits * 1e6:.0f} µs",
        ]
    ]


def main() -> None:
    args = parse_args(__doc__ or "")
    report = Report("bench_digest", args.quick)
    streams, commits, attempts = (2_000, 300, 3) if args.quick else (100_000, 3_000, 20)
    base = ROOT / "var"
    base.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base, prefix="bench-digest-") as tmp:
        rows, facts = scale(streams, Path(tmp))
        report.table(
            f"Digest over {streams:,} streams (SQLite)",
            ["operation", "wall s", "CPU s", "CPU µs per stream", "peak MiB (Python)"],
            rows,
            align="lrrrr",
        )
        report.table("Sizes", ["what", "figure"], facts, align="ll")
        report.table(
            "Head index cost per commit (SQLite)",
            ["operation", "commits/s", "ratio"],
            sqlite_commit_cost(commits, Path(tmp)),
            align="lrr",
        )
        report.table(
            "Of which hashing",
            ["operation", "per second", "each"],
            head_hash_cost(commits),
            align="lrr",
        )
    report.table(
        "Head index cost per attempt (DynamoDB, ministack, counted)",
        [
            "operation",
            "write requests",
            "table WCU",
            "GSI WCU",
            "requests by operation (per attempt)",
        ],
        dynamodb_commit_cost(attempts),
        align="lrrrl",
    )
    report.write(INTRO)


INTRO = """
Taking a digest reads one head-index row per stream (never the events) and
hashes one Merkle leaf per stream plus the inner nodes; verifying reads every
event of every listed stream and re-hashes the chains, so it costs what the
ledger holds, not what it changed. Memory is the Python heap at its peak
(``tracemalloc``): the digest keeps every head in memory (about 200 bytes
each), verification one stream at a time. On DynamoDB the head index is one
more item per stream in each commit's transaction: a lone event becomes a
two-item ``TransactWriteItems`` instead of a conditional ``PutItem``. Write
units are computed from item sizes (1 WCU per KB per item, doubled inside a
transaction; see harness.CapacityMeter).
"""


if __name__ == "__main__":
    main()
