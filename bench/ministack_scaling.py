"""Lifecycles per second on ministack by client processes and threads, and where
both cores' time went meanwhile; cold approvals before and after the batched
directory read (plumbing of ``bench_throughput.py``; not a benchmark on its own).

Each shape ``processes x threads`` forks that many client processes (each its
own boto3 client, table and directory, as separate Lambda containers or
servers would be), releases them together and reads from ``/proc`` over the
same window: the emulator's CPU, the client processes' CPU, everything else
on the machine, and idle time. A process runs Python on one core at a time
(the GIL), so one client process is saturated near 100 % of one core.

Inside each client, botocore event hooks read the calling thread's own CPU
clock (``time.thread_time``, which does not count waiting for the GIL or the
network) at each stage of every request: building it (validation,
serialisation, endpoint rules, SigV4 signing), sending it and reading the
response (``http.client``, urllib3), and parsing the answer. The rest of a
lifecycle's thread CPU is the ledger's own code (domain and adapters).
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from harness import CapacityMeter, Emulator, Lifecycle, dynamodb_store, run_threads

from adapters.dynamodb.client import client_config, make_client
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.dynamodb.schema import create_table
from adapters.store import LedgerStore
from domain.base import LedgerEvent
from domain.services.approval import approve
from domain.services.read_cache import ReadCache

THREADS = 8
SHAPES = ((1, 1), (1, 2), (1, 4), (1, THREADS), (2, 4))
STAGES = ("build", "http", "parse")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()  # noqa: SIM115
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_seconds() -> tuple[float, float]:
    """(all CPU time, idle time) of the machine so far, summed over its cores."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    return sum(values) / tick, (values[3] + values[4]) / tick


class RequestStages:
    """Thread CPU seconds per request stage, from botocore's own events."""

    def __init__(self, client: Any) -> None:
        self.seconds = dict.fromkeys(STAGES, 0.0)
        self.requests = 0
        self._local = threading.local()
        self._lock = threading.Lock()
        events = client.meta.events
        events.register("provide-client-params.dynamodb", self._mark("start"))
        events.register("before-send.dynamodb", self._mark("sent"))
        events.register("before-parse.dynamodb", self._mark("received"))
        events.register("after-call.dynamodb", self._done)

    def _mark(self, name: str) -> Any:
        def handler(**_: Any) -> None:  # returns None: botocore goes on as usual
            setattr(self._local, name, time.thread_time())

        return handler

    def _done(self, **_: Any) -> None:
        now, local = time.thread_time(), self._local
        with self._lock:
            self.requests += 1
            self.seconds["build"] += local.sent - local.start
            self.seconds["http"] += local.received - local.sent
            self.seconds["parse"] += now - local.received


@dataclass
class ClientRun:
    """What one client process reports."""

    lifecycles: int
    cpu: float  # the process's CPU seconds (all threads, user + system)
    thread_cpu: float  # the lifecycle threads' own CPU seconds
    stages: dict[str, float] = field(default_factory=dict)
    requests: int = 0


def client_process(
    url: str, threads: int, per_thread: int, ready: Any, go: Any, results: Any
) -> None:
    client = make_client(
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        config=client_config(max_pool_connections=2 * threads),
    )
    table = f"bench-{uuid.uuid4().hex[:12]}"
    create_table(client, table)
    life = Lifecycle(dynamodb_store(client, table), actors=threads)
    workers = [life.worker() for _ in range(threads)]
    run_threads(threads, lambda t: life.run(t, workers[t]) and None)  # warm-up
    stages = RequestStages(client)
    thread_cpu = [0.0] * threads

    def lifecycles(t: int) -> None:
        start = time.thread_time()
        for _ in range(per_thread):
            assert life.run(t, workers[t]).value == "succeeded"
        thread_cpu[t] = time.thread_time() - start

    ready.wait()
    go.wait()
    cpu = time.process_time()
    run_threads(threads, lifecycles)
    results.put(
        ClientRun(
            threads * per_thread,
            time.process_time() - cpu,
            sum(thread_cpu),
            dict(stages.seconds),
            stages.requests,
        )
    )
    client.delete_table(TableName=table)
    client.close()


@dataclass
class Shape:
    processes: int
    threads: int
    rate: float
    emulator: float  # share of one core, over the window
    clients: float
    others: float
    idle: float
    emulator_ms: float  # CPU milliseconds per lifecycle
    client_ms: float
    runs: list[ClientRun]


def run_shape(url: str, server_pid: int, processes: int, threads: int, lifecycles: int) -> Shape:
    ctx = multiprocessing.get_context("fork")
    # a client that dies breaks the barriers (timeout) instead of hanging the run
    ready = ctx.Barrier(processes + 1, timeout=300)
    go = ctx.Barrier(processes + 1, timeout=300)
    results = ctx.Queue()
    per_thread = max(1, lifecycles // (processes * threads))
    children = [
        ctx.Process(target=client_process, args=(url, threads, per_thread, ready, go, results))
        for _ in range(processes)
    ]
    for child in children:
        child.start()
    ready.wait()  # every client has its table, directory and warm connections
    server0, (all0, idle0) = cpu_seconds(server_pid), machine_seconds()
    start = time.perf_counter()
    go.wait()
    runs: list[ClientRun] = []
    while len(runs) < len(children):
        try:
            runs.append(results.get(timeout=1))
        except queue.Empty:
            failed = [c.exitcode for c in children if c.exitcode not in (None, 0)]
            if failed:
                raise RuntimeError(f"a client process failed (exit codes {failed})") from None
    elapsed = time.perf_counter() - start
    server, (all1, idle1) = cpu_seconds(server_pid) - server0, machine_seconds()
    for child in children:
        child.join()
    done = sum(r.lifecycles for r in runs)
    clients = sum(r.cpu for r in runs)
    idle = idle1 - idle0
    return Shape(
        processes,
        threads,
        done / elapsed,
        server / elapsed,
        clients / elapsed,
        (all1 - all0 - idle - server - clients) / elapsed,
        idle / elapsed,
        server / done * 1000,
        clients / done * 1000,
        runs,
    )


def scaling(
    url: str, server_pid: int, lifecycles: int, shapes: Sequence[tuple[int, int]] = SHAPES
) -> list[Shape]:
    return [run_shape(url, server_pid, p, t, lifecycles) for p, t in shapes]


def rows(shapes: list[Shape]) -> list[list[str]]:
    base = shapes[0].rate
    return [
        [
            f"{s.processes} x {s.threads}",
            f"{s.rate:,.1f}",
            f"{s.rate / base:.2f}",
            f"{s.emulator * 100:.0f} %",
            f"{s.clients * 100:.0f} %",
            f"{s.others * 100:.0f} %",
            f"{s.idle * 100:.0f} %",
            f"{s.emulator_ms:.1f}",
            f"{s.client_ms:.1f}",
        ]
        for s in shapes
    ]


HEADERS = [
    "processes x threads",
    "lifecycles/s",
    "ratio to 1 x 1",
    "emulator CPU",
    "client CPU",
    "other processes",
    "idle",
    "emulator CPU ms/lifecycle",
    "client CPU ms/lifecycle",
]


def stage_rows(shape: Shape) -> tuple[list[list[str]], dict[str, float]]:
    """Where one shape's client thread CPU went, per lifecycle."""
    done = sum(r.lifecycles for r in shape.runs)
    requests = sum(r.requests for r in shape.runs)
    thread_cpu = sum(r.thread_cpu for r in shape.runs)
    seconds = {k: sum(r.stages.get(k, 0.0) for r in shape.runs) for k in STAGES}
    ledger = thread_cpu - sum(seconds.values())
    process = sum(r.cpu for r in shape.runs)
    parts = [
        (
            "botocore: build the request (validate, serialise, endpoint rules, SigV4 sign)",
            seconds["build"],
        ),
        ("botocore + http.client: send it and read the response", seconds["http"]),
        ("botocore: parse the response", seconds["parse"]),
        ("the ledger's own code (domain, adapters, fakes)", ledger),
        (
            "the rest of the process (threads' start and switching, outside their clocks)",
            process - thread_cpu,
        ),
    ]
    table = [
        [name, f"{s / done * 1000:.2f}", f"{s / requests * 1000:.3f}", f"{s / process * 100:.0f} %"]
        for name, s in parts
    ]
    table.append(
        [
            "**client process, all**",
            f"**{process / done * 1000:.2f}**",
            f"{process / requests * 1000:.3f}",
            "100 %",
        ]
    )
    figures = {
        "botocore": sum(seconds.values()) / process,
        "ledger": ledger / process,
        "requests": requests / done,
    }
    return table, figures


STAGE_HEADERS = [
    "client CPU per lifecycle",
    "ms per lifecycle",
    "ms per request",
    "share of the client process",
]


# -- cold approvals, before and after the batched directory read ----------------------


class PerRecordReads(LedgerStore):
    """The path before the batched directory read: a ``Query`` per record."""

    def latest_events(self, stream_ids: Sequence[str]) -> Mapping[str, LedgerEvent]:
        found: dict[str, LedgerEvent] = {}
        for stream_id in stream_ids:
            events = self.events(stream_id)
            if events and isinstance(events[-1], LedgerEvent):
                found[stream_id] = events[-1]
        return found


def cold_approvals(
    emulator: Emulator, rounds: int, per_thread: int
) -> tuple[list[list[Any]], dict[str, float]]:
    """Approvals per second by ``THREADS`` threads, each approval in a context that has
    cached nothing (a fresh Lambda container), before and after the batched read."""
    client = emulator.client()
    meter = CapacityMeter(client)
    table = emulator.table(client)
    paths = {
        "before: a Query per directory record": PerRecordReads(
            DynamoDBLedgerRecorder(table, client)
        ),
        "after: head-index entries, then those versions": dynamodb_store(client, table),
    }
    life = Lifecycle(dynamodb_store(client, table), actors=THREADS)
    rates: dict[str, list[float]] = {name: [] for name in paths}
    cpu: dict[str, float] = dict.fromkeys(paths, 0.0)
    used: dict[str, Any] = {}
    for _ in range(rounds):
        for name, store in paths.items():  # alternate, so that noise hits both alike
            tokens = [
                [life.propose_and_present(t)[1] for _ in range(per_thread)] for t in range(THREADS)
            ]

            def approve_cold(
                t: int, i: int, store: LedgerStore = store, tokens: list[list[str]] = tokens
            ) -> None:
                ctx = replace(life.ctx, store=store, cache=ReadCache())
                approve(ctx, token=tokens[t][i], provenance=life.who(t))

            c0 = time.process_time()
            rates[name].append(timed_round(THREADS, per_thread, approve_cold))
            cpu[name] += time.process_time() - c0
    for name, store in paths.items():
        _, token = life.propose_and_present(0)
        with meter.measure() as one:
            approve(
                replace(life.ctx, store=store, cache=ReadCache()),
                token=token,
                provenance=life.who(0),
            )
        used[name] = one
    client.delete_table(TableName=table)
    client.close()
    done = rounds * THREADS * per_thread
    before, after = (statistics.median(r) for r in rates.values())
    rows = [
        [
            name,
            f"{statistics.median(rates[name]):,.1f}",
            f"{statistics.median(rates[name]) / before:.2f}",
            str(used[name].total),
            used[name].ops(),
            f"{used[name].rcu:g}",
            f"{cpu[name] / done * 1000:.2f}",
        ]
        for name in paths
    ]
    return rows, {"cold_ratio": after / before}


def timed_round(threads: int, per_thread: int, operation: Callable[[int, int], None]) -> float:
    """Operations per second of ``threads`` threads doing ``per_thread`` each."""
    start = time.perf_counter()
    run_threads(threads, lambda t: [operation(t, i) for i in range(per_thread)] and None)
    return threads * per_thread / (time.perf_counter() - start)
