"""Throughput as callers are added, as ratios measured in one run.

0. SQLite: full lifecycles per second with 1 caller and with 4 concurrent
   callers, before (the library's connection pool, a transaction around every
   read) and after (a connection per thread, reads of one ``SELECT``), side by
   side in alternating rounds, on disk and in RAM; and the statements one
   lifecycle makes on each path. ``--sqlite-path before`` (or ``after``) runs
   one path alone.
1. Full lifecycles per second (propose, present, approve, worker run to
   ``succeeded``) with 8 client threads, against raw conditional ``PutItem``
   per second with the same 8 threads, in alternating rounds.
2. Approvals per second when 25 threads approve the same presentation at once
   (one commits, 24 converge on the stored attempt) against 25 threads each
   approving a distinct proposal.

3. Ministack: lifecycles per second by client processes x threads (1 x 1, 2,
   4, 8 and 2 x 4), with the share of a core the emulator, the clients, other
   processes and idle time took meanwhile, and where a client's CPU goes per
   request stage (``ministack_scaling.py``).
4. Cold approvals per second with 8 threads (each in a context that has
   cached nothing), before (a ``Query`` per directory record) and after (the
   head index, then one batch of those versions), in alternating rounds.

Run: ``.venv/bin/python bench/bench_throughput.py [--quick] [--sqlite-only |
--ministack-only] [--sqlite-path before|after|both]``.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import embedded_callers
import ministack_scaling
from harness import (
    ROOT,
    CapacityMeter,
    Emulator,
    Lifecycle,
    Report,
    dynamodb_store,
    run_threads,
)
from ministack_scaling import THREADS, cpu_seconds, timed_round

CONTENDERS = 25


def lifecycles_vs_raw(
    emulator: Emulator, rounds: int, raw_ops: int, lifecycles: int
) -> tuple[list[list[Any]], dict[str, float]]:
    client = emulator.client()
    meter = CapacityMeter(client)
    table = emulator.table(client)
    life = Lifecycle(dynamodb_store(client, table), actors=THREADS)
    workers = [life.worker() for _ in range(THREADS)]
    state = b'{"at":"2026-11-29T12:00:00Z","step":"queued","payload_hash":"sha256:' + b"ab" * 32

    def raw_put(t: int, i: int) -> None:
        client.put_item(
            TableName=table,
            Item={
                "pk": {"S": f"raw:{uuid.uuid4().hex}"},
                "sk": {"N": "1"},
                "topic": {"S": "bench:Event"},
                "state": {"B": state},
            },
            ConditionExpression="attribute_not_exists(#pk)",
            ExpressionAttributeNames={"#pk": "pk"},
        )

    def lifecycle(t: int, i: int) -> None:
        outcome = life.run(t, workers[t])
        assert outcome.value == "succeeded", outcome

    timed_round(THREADS, 2, raw_put)  # warm-up: connections, code paths
    timed_round(THREADS, 1, lifecycle)
    raw_rates, life_rates = [], []
    server = emulator.node.process.pid
    cpu = {"raw": [0.0, 0.0], "life": [0.0, 0.0]}  # [server, client] CPU seconds
    counts = {"raw": 0, "life": 0}

    def phase(kind: str, per_thread: int, op: Callable[[int, int], None]) -> float:
        s0, c0 = cpu_seconds(server), time.process_time()
        result = timed_round(THREADS, per_thread, op)
        cpu[kind][0] += cpu_seconds(server) - s0
        cpu[kind][1] += time.process_time() - c0
        counts[kind] += THREADS * per_thread
        return result

    for _ in range(rounds):  # alternate, so that noise hits both alike
        raw_rates.append(phase("raw", raw_ops, raw_put))
        life_rates.append(phase("life", lifecycles, lifecycle))
    with meter.measure() as used:
        life.run(0, workers[0])
    raw, full = statistics.median(raw_rates), statistics.median(life_rates)
    client.delete_table(TableName=table)
    client.close()

    def ms(kind: str, side: int) -> float:
        return cpu[kind][side] / counts[kind] * 1000

    rows = [
        [
            "raw conditional PutItem",
            f"{raw:,.0f}",
            "1.00",
            "1",
            "1",
            f"{ms('raw', 0):.2f}",
            f"{ms('raw', 1):.2f}",
        ],
        [
            "full lifecycle (propose, present, approve, worker)",
            f"{full:,.1f}",
            f"{full / raw:.3f} (1/{raw / full:.1f})",
            str(used.total),
            str(used.writes),
            f"{ms('life', 0):.2f}",
            f"{ms('life', 1):.2f}",
        ],
    ]
    return rows, {
        "raw": raw,
        "lifecycle": full,
        "requests": used.total,
        "writes": used.writes,
        "cpu_bound": (ms("raw", 0) + ms("raw", 1)) / (ms("life", 0) + ms("life", 1)),
        "server_per_request": ms("life", 0) / used.total / ms("raw", 0),
        "client_per_request": ms("life", 1) / used.total / ms("raw", 1),
    }


def approvals_contention(
    emulator: Emulator, rounds: int
) -> tuple[list[list[Any]], dict[str, float]]:
    client = emulator.client()
    table = emulator.table(client)
    life = Lifecycle(dynamodb_store(client, table), actors=CONTENDERS)

    def run_round(tokens: list[tuple[int, str]]) -> tuple[float, set[str]]:
        barrier = threading.Barrier(CONTENDERS)
        answers: list[str] = [""] * CONTENDERS

        def one(i: int) -> None:
            n, token = tokens[i]
            barrier.wait()
            answers[i] = life.approve(token, n)

        start = time.perf_counter()
        run_threads(CONTENDERS, one)
        return CONTENDERS / (time.perf_counter() - start), set(answers)

    same_rates, spread_rates = [], []
    for r in range(rounds + 1):
        _, token = life.propose_and_present(0)
        rate, attempts = run_round([(0, token)] * CONTENDERS)
        assert len(attempts) == 1, attempts  # every answer names the one attempt
        spread = [(n, life.propose_and_present(n)[1]) for n in range(CONTENDERS)]
        rate2, attempts2 = run_round(spread)
        assert len(attempts2) == CONTENDERS
        if r:  # the first round warms up
            same_rates.append(rate)
            spread_rates.append(rate2)
    client.delete_table(TableName=table)
    client.close()
    same, spread = statistics.median(same_rates), statistics.median(spread_rates)
    rows = [
        ["25 distinct proposals, one approval each", f"{spread:,.1f}", "1.00", "25 attempts"],
        [
            "25 approvals of one presentation at once",
            f"{same:,.1f}",
            f"{same / spread:.2f}",
            "1 attempt, 25 answers naming it",
        ],
    ]
    return rows, {"same": same, "spread": spread}


def sqlite_section(report: Report, quick: bool, only: str) -> dict[str, float]:
    import tempfile

    rounds, total = (2, 4) if quick else (5, 24)
    if only != "both":
        embedded_callers.PATHS = {only: embedded_callers.PATHS[only]}
    rows, figures = embedded_callers.callers_side_by_side(rounds, total)
    report.table(
        f"SQLite: lifecycles per second, 1 vs {embedded_callers.CALLERS} callers",
        [
            "file system",
            "path",
            "1 caller",
            f"{embedded_callers.CALLERS} callers",
            "ratio",
            "CPU ms/lifecycle, 1 caller",
            f"CPU ms/lifecycle, {embedded_callers.CALLERS} callers",
            "CPU ratio",
        ],
        rows,
        align="llrrrrrr",
    )
    if only in ("both", "after"):
        prows, pfig = embedded_callers.processes_side_by_side(rounds, total)
        report.table(
            f"SQLite (path after): 1 vs {embedded_callers.CALLERS} callers as "
            "threads of one process and as processes of their own, alternating",
            [
                "file system",
                "callers",
                "1 caller",
                f"{embedded_callers.CALLERS} callers",
                "ratio",
                "CPU ms/lifecycle, 1 caller",
                f"CPU ms/lifecycle, {embedded_callers.CALLERS} callers",
            ],
            prows,
            align="llrrrrr",
        )
        figures.update(pfig)
    with tempfile.TemporaryDirectory(dir=ROOT, prefix="bench-count-") as tmp:
        counted, found = embedded_callers.statement_rows(tmp)
    report.table(
        "SQLite: statements per lifecycle (trace callback on every connection)",
        [
            "path",
            "reads (outside writes)",
            "transactions",
            "version checks in writes",
            "all statements",
        ],
        counted,
        align="lrrrr",
    )
    figures.update({f"reads {k}": v.get("reads", 0) for k, v in found.items()})
    figures.update({f"tx {k}": v.get("transactions", 0) for k, v in found.items()})
    figures.update({f"st {k}": v.get("statements", 0) for k, v in found.items()})
    figures.update(rounds=rounds, total=total, per=total // embedded_callers.CALLERS)
    return figures


class _Missing(dict[str, float]):
    """A figure of a path not run reads as nan."""

    def __missing__(self, key: str) -> float:
        return float("nan")


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a small smoke run (seconds); results are not meaningful",
    )
    parser.add_argument("--sqlite-only", action="store_true", help="skip the ministack parts")
    parser.add_argument("--ministack-only", action="store_true", help="skip the SQLite part")
    parser.add_argument(
        "--sqlite-path",
        choices=["before", "after", "both"],
        default="both",
        help="which SQLite path to measure (default: both, side by side)",
    )
    args = parser.parse_args()
    report = Report("bench_throughput", args.quick)
    sqlite_intro = ""
    if not args.ministack_only:
        sqlite = sqlite_section(report, args.quick, args.sqlite_path)
        sqlite_intro = SQLITE_INTRO.format_map(
            _Missing({k.replace(" ", "_"): v for k, v in sqlite.items()})
        )
    if args.sqlite_only:
        report.write(sqlite_intro)
        return
    rounds, raw_ops, lifecycles, contention_rounds = (2, 5, 1, 1) if args.quick else (4, 60, 4, 5)
    with Emulator() as emulator:
        rows, figures = lifecycles_vs_raw(emulator, rounds, raw_ops, lifecycles)
        report.table(
            f"{THREADS} client threads: lifecycles vs raw conditional writes",
            [
                "operation",
                "per second",
                "ratio to raw",
                "requests per op",
                "write requests per op",
                "emulator CPU ms per op",
                "client CPU ms per op",
            ],
            rows,
            align="lrrrrrr",
        )
        cold_rows, cold = ministack_scaling.cold_approvals(emulator, rounds, 2 if args.quick else 6)
        report.table(
            f"Cold approvals per second, {THREADS} threads (each approval in a "
            "process that has cached nothing)",
            [
                "directory reads",
                "approvals/s",
                "ratio to before",
                "requests per approval",
                "requests by operation",
                "RCU per approval",
                "client CPU ms per approval",
            ],
            cold_rows,
            align="lrrrlrr",
        )
        rows2, figures2 = approvals_contention(emulator, contention_rounds)
        report.table(
            f"Approvals per second, {CONTENDERS} threads",
            ["case", "approvals/s", "ratio to spread", "result"],
            rows2,
            align="lrrl",
        )
        shapes = ministack_scaling.scaling(
            emulator.url, emulator.node.process.pid, 8 if args.quick else 48
        )
        report.table(
            "Ministack: lifecycles per second by client processes and threads, "
            "and where both cores' time went (share of one core each)",
            ministack_scaling.HEADERS,
            ministack_scaling.rows(shapes),
            align="rrrrrrrrr",
        )
        eight = next(s for s in shapes if (s.processes, s.threads) == (1, THREADS))
        stages, split = ministack_scaling.stage_rows(eight)
        report.table(
            f"Ministack, 1 x {THREADS}: where the client's CPU goes (thread CPU "
            "clocks read by botocore event hooks at each stage of every request)",
            ministack_scaling.STAGE_HEADERS,
            stages,
            align="lrrr",
        )
    ratio = figures["lifecycle"] / figures["raw"]
    report.write(
        sqlite_intro
        + INTRO.format(
            threads=THREADS,
            rounds=rounds,
            raw_ops=raw_ops,
            lifecycles=lifecycles,
            ratio=ratio,
            inverse=1 / ratio,
            requests=figures["requests"],
            server=figures["server_per_request"],
            client=figures["client_per_request"],
            bound=figures["cpu_bound"],
            bound_inverse=1 / figures["cpu_bound"],
            verdict="met" if ratio >= 1 / 16 else "missed",
            contention=figures2["same"] / figures2["spread"],
            crounds=contention_rounds,
            cores=os.cpu_count() or 1,
            client_ms=eight.client_ms,
            emulator_ms=eight.emulator_ms,
            c_over_e=eight.client_ms / eight.emulator_ms,
            client_cap=1000 / eight.client_ms,
            emu_at_cap=eight.emulator_ms / eight.client_ms * 100,
            emulator_cap=1000 / eight.emulator_ms,
            machine_cap=(os.cpu_count() or 1) * 1000 / (eight.client_ms + eight.emulator_ms),
            botocore=split["botocore"] * 100,
            ledger=split["ledger"] * 100,
            botocore_ms=split["botocore"] * eight.client_ms,
            cold_ratio=cold["cold_ratio"],
        )
    )


SQLITE_INTRO = """
**SQLite, {callers} callers against 1, after: {disk_after:.2f}x on disk, {RAM_after:.2f}x
in RAM (before: {disk_before:.2f}x and {RAM_before:.2f}x); target >= 1.0x.** CPU per
lifecycle with {callers} callers against 1 (what contention would raise: lock
convoys, busy waits, retries), after: {disk_after_cpu:.2f}x on disk, {RAM_after_cpu:.2f}x
in RAM (before: {disk_before_cpu:.2f}x and {RAM_before_cpu:.2f}x). Medians of {rounds}
alternating rounds of {total} lifecycles each (1 caller: {total} in a row;
{callers} callers: {per} each, own actor and worker, at once). Reads per
lifecycle: {reads_before:.0f} before, {reads_after:.0f} after: this change
removes the transaction around each read and the pool, not reads (12 of the 18
are the directory records authorization reads, which the directory cache of
this issue removes); transactions per lifecycle {tx_before:.0f} -> {tx_after:.0f},
statements {st_before:.0f} -> {st_after:.0f}.

What serialised callers before (measured with timers around the pool's
``get_connection``, 4 callers): the library's pool issues every connection
through one semaphore, and a writer waiting for the writer lock holds it, so
readers queued behind writes (readers waited longer in total than writers);
and each read was three statements (``BEGIN``, ``SELECT``, ``ROLLBACK``), each a
release and re-acquisition of the GIL. Now a reader never waits for a writer
(its own connection; WAL), writers queue on a Python lock before ``BEGIN
IMMEDIATE`` (woken at once, instead of SQLite's busy handler sleeping), and the
write lock is held for about a tenth of the run. On a machine loaded by other
work (load average above) a lone caller is starved of CPU and several callers
win a larger share of the scheduler, so the rate ratio flatters both paths;
the CPU per lifecycle is the figure the load moves least.

**What bounds the threads ({callers} callers as threads of one process: {disk_threads:.2f}x on
disk, {RAM_threads:.2f}x in RAM; as processes of their own: {disk_processes:.2f}x and
{RAM_processes:.2f}x, in the same alternating rounds).** One caller already keeps
{disk_threads_busy:.2f} of a core busy running Python on disk and {RAM_threads_busy:.2f} in RAM
(rate x CPU per lifecycle). The GIL lets one thread of a process run Python at a
time, so threads added to that process cannot add CPU: the best they can do is
1.0x, and what they cost pushes the ratio under it: each SQLite statement gives up
the GIL and must win it back from callers running Python (the CPU per lifecycle
rises with the callers; the write lock covers only a transaction's own
statements, its level set before it). Callers in processes of their own share
the file through WAL and can use the second core (as `ledger serve` and
`ledger worker` run side by side); their writes still take the file's one
write lock in turn, waiting in SQLite's busy handler, which sleeps, instead of
on a Python lock, and on disk each durable commit holds that lock through its
fsync, so the disk rows are bound by the commits one after another. What would
lift both: fewer statements and fsyncs per lifecycle, or one writer committing
several callers' writes in one transaction and one fsync (group commit).
""".replace("{callers}", str(embedded_callers.CALLERS))

INTRO = """
One ministack process (the emulator runs its DynamoDB handlers one at a time),
one boto3 client shared by the threads, {threads} threads, {rounds} alternating
rounds (each thread: {raw_ops} raw writes, then {lifecycles} lifecycles); medians
of the rounds. Contention: {crounds} rounds after one warm-up, each a fresh
presentation approved by 25 threads released together by a barrier, then 25
distinct presentations approved by 25 threads.

**Lifecycles vs raw writes: ratio {ratio:.3f} = 1/{inverse:.1f}; target >= 1/16:
{verdict}.** A full lifecycle is {requests} DynamoDB requests against the raw
write's one, and every request costs about the same CPU, so the ratio is
bounded by about 1/requests whatever the client does. The requests are the
protocol (bench_protocol.md): 6 writes (the proposal, the presentation with its
token lookup, the approval, the lease, the marker and the result; the proposal's
first event is a lone `PutItem`, the rest are transactions) and 18 reads, 13 of
them directory records (the executor build at propose, then the six that I7
reads at approval and again before dispatch).

Profile (CPU time of both processes over the same rounds, read from
`/proc`, in the table): per request, a lifecycle's requests cost the emulator
{server:.2f}x the CPU of a raw write and the client {client:.2f}x (the client
also runs the domain: canonical JSON, hashes, pydantic, event folding; botocore
dominates it, as pyinstrument shows). Both processes share the machine's two
cores, so the CPU per operation of both together bounds the ratio: raw/lifecycle
CPU = {bound:.3f} = 1/{bound_inverse:.1f}, which is what was measured. The miss
is the number of requests, not a slow path in our code. The one client-side
hot spot found (hashing every event of every stream replayed, a fifth of the
CPU of a lifecycle) is fixed; see bench_embedded.md for before/after. What
would move this figure is fewer requests per lifecycle (bench_protocol.md,
"Worker reads", and bench/CAPACITY.md).

**Processes and threads on ministack** (the last two tables): lifecycles per
second by client processes x threads, and over the same window the share of
one core used by the emulator, by the client processes, by everything else on
the machine and left idle (the four add up to the machine's {cores} cores).
One client process runs Python on one core at a time (the GIL), so it is
saturated near 100 %; the emulator handles one request at a time, so it is
saturated near 100 % too. The CPU per lifecycle (last two columns) is the
figure the machine's other load moves least: at 1 x {threads} the client spends
**{client_ms:.1f} ms** of CPU per lifecycle and the emulator **{emulator_ms:.1f} ms**,
so the client needs {c_over_e:.2f}x the emulator's CPU for the same work.

**Verdict on "with {threads} threads it scales until the emulator is the
bottleneck": not reachable with one client process on {cores} cores, and the
profile bounds it.** One client process at 100 % of a core runs at most
1000/{client_ms:.1f} = {client_cap:.0f} lifecycles/s, where the emulator would be at
{emu_at_cap:.0f} % of a core; the emulator alone would allow 1000/{emulator_ms:.1f} =
{emulator_cap:.0f}/s, but client and emulator share the {cores} cores, so the machine
allows at most {cores}000/({client_ms:.1f} + {emulator_ms:.1f}) = {machine_cap:.0f}/s whatever
the shape. The emulator becomes the bottleneck before the machine only if a
lifecycle costs the client no more CPU than the emulator. Where the client's
CPU goes (the stage table, thread CPU clocks read at botocore's own events):
botocore and `http.client` take **{botocore:.0f} %** (building and signing each
request, sending it and reading the answer, parsing it) and the ledger's own
code {ledger:.0f} %. botocore alone costs the client {botocore_ms:.1f} ms per lifecycle,
more than the emulator's {emulator_ms:.1f} ms, and even the simplest request costs
the client more CPU than the emulator (the raw conditional `PutItem` in the
first ministack table), so no change in the ledger's own code can meet the
target on {cores} cores; what would: a cheaper HTTP client under botocore, or
more cores for more client processes (the `2 x 4` row runs the same {threads}
threads in two processes). Checked and not wasteful: one client shared by all
threads of a process, its pool (50 by default, 2 per thread here) larger than
the threads, no client or session built per call, no `TypeSerializer`
(items are built as DynamoDB JSON directly), no lock shared across requests
but the read cache's and botocore's connection pool. Turning off botocore's
client-side parameter validation would save about 6 % of the client's CPU; it
stays on: the emulator does not check everything DynamoDB does (request
token lengths, for one), so it is the only local check of those limits. When the "idle"
column is near 0 the machine itself was the bottleneck (other processes took
the rest), and rates in that run say little; the CPU per lifecycle still does.

**Cold approvals: {cold_ratio:.2f}x.** An approval served by a process that has
cached nothing (a fresh Lambda container) read each of the six directory
records with a `Query` of its own; now it reads them in two consistent
`BatchGetItem`s, their head-index entries (written in the same transaction as
each stream's newest event, so they name its version) and then the events at
those versions: 9 requests per cold approval become 5. A `BatchGetItem` is
billed per item (each at least 1 RCU) where a `Query` rounds its total, so the
batched read costs more read units (the RCU column): a few more read units,
at a fifth of a write unit's price, for four fewer round trips. Alternating
rounds, same table, same threads.

**Contention: ratio {contention:.2f}.** 25 approvals of one presentation
complete at this ratio to the rate of 25 approvals of distinct proposals: one
commit wins; a loser's commit fails on the proposal's slot, it re-reads the
proposal, finds it claimed and returns the stored attempt. A loser does the
same reads as a winner plus one proposal read and one attempt read, and skips
nothing but a write that fails, so the two cases cost about the same; every
answer names the one attempt (asserted).
"""


if __name__ == "__main__":
    main()
