"""Lifecycles per second on SQLite with 1 and 4 concurrent callers, before and
after per-thread connections, and the statements one lifecycle makes
(plumbing of ``bench_throughput.py``; not a benchmark on its own).

"before" is the library's connection pool with a ``BEGIN``/``ROLLBACK``
around every read and one ``SELECT`` per version check
(``sqlite_before.py``); "after" is the default.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import ROOT, Lifecycle, run_threads, sqlite_store
from sqlite_before import PooledDatastore, PooledRecorder

from adapters.sqlite.datastore import LedgerDatastore
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from adapters.store import LedgerStore

CALLERS = 4
PATHS = {"before": True, "after": False}  # name -> pooled


def rate(callers: int, total: int, op: Callable[[int], None]) -> tuple[float, float]:
    """Operations per second, and this process's CPU milliseconds per operation
    (a figure the other load on a shared machine moves much less than a rate)."""
    per = total // callers
    start, cpu = time.perf_counter(), time.process_time()
    run_threads(callers, lambda t: [op(t) for _ in range(per)] and None)
    done = callers * per
    return done / (time.perf_counter() - start), (time.process_time() - cpu) / done * 1000


class StatementCounter:
    """Counts the statements of every connection a datastore opens (trace callback):
    reads outside a write transaction apart from the statements inside one."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def attach(self, datastore: LedgerDatastore) -> None:
        def traced(connection: Any) -> Any:
            state = {"write": False}

            def trace(statement: str) -> None:
                verb = statement.split(None, 1)[0].upper()
                with self._lock:
                    if verb == "BEGIN":
                        self.counts["transactions"] += 1
                        state["write"] = "IMMEDIATE" in statement.upper()
                    elif verb in ("COMMIT", "ROLLBACK"):
                        state["write"] = False
                    elif verb == "SELECT":
                        self.counts["checks in writes" if state["write"] else "reads"] += 1
                    self.counts["statements"] += 1

            connection._sqlite_conn.set_trace_callback(trace)
            return connection

        if isinstance(datastore, PooledDatastore):
            create = datastore.pool._create_connection
            datastore.pool._create_connection = lambda: traced(create())  # type: ignore[method-assign]
        else:
            connect = datastore._connect
            datastore._connect = lambda: traced(connect())  # type: ignore[method-assign]


def statements_per_lifecycle(path: str, pooled: bool, lifecycles: int = 5) -> dict[str, float]:
    """The statements one lifecycle makes, on a datastore traced from its first connection."""
    sqlite_store(path).recorder.close()  # the tables
    datastore = PooledDatastore(path) if pooled else open_datastore(path)
    counter = StatementCounter()
    counter.attach(datastore)
    recorder = PooledRecorder(datastore) if pooled else SQLiteLedgerRecorder(datastore)
    life = Lifecycle(LedgerStore(recorder))
    worker = life.worker()
    life.run(0, worker)
    counter.counts.clear()
    for _ in range(lifecycles):
        assert life.run(0, worker).value == "succeeded"
    datastore.close()
    return {k: v / lifecycles for k, v in counter.counts.items()}


def callers_side_by_side(rounds: int, total: int) -> tuple[list[list[Any]], dict[str, float]]:
    """Rows (file system, path, 1 caller/s, 4 callers/s, ratio, CPU ms per lifecycle
    with 1 and with 4 callers, ratio) and the ratios by file system and path."""
    rows: list[list[Any]] = []
    figures: dict[str, float] = {}
    shm = Path("/dev/shm")
    for fs, where in (("disk", ROOT), ("RAM", shm if shm.is_dir() else ROOT)):
        with tempfile.TemporaryDirectory(dir=where, prefix="bench-callers-") as tmp:
            lives: dict[str, tuple[Lifecycle, list[Any]]] = {}
            for name, pooled in PATHS.items():
                life = Lifecycle(sqlite_store(f"{tmp}/{name}.db", pooled=pooled), actors=CALLERS)
                workers = [life.worker() for _ in range(CALLERS)]
                lives[name] = (life, workers)
                rate(CALLERS, CALLERS, _op(life, workers))  # warm-up
            rates: dict[tuple[str, int], list[float]] = {}
            cpu: dict[tuple[str, int], list[float]] = {}
            for _ in range(rounds):  # alternate, so that noise hits both alike
                for name, (life, workers) in lives.items():
                    for callers in (1, CALLERS):
                        per_second, ms = rate(callers, total, _op(life, workers))
                        rates.setdefault((name, callers), []).append(per_second)
                        cpu.setdefault((name, callers), []).append(ms)
            for name, (life, _) in lives.items():
                one = statistics.median(rates[(name, 1)])
                many = statistics.median(rates[(name, CALLERS)])
                cpu_one = statistics.median(cpu[(name, 1)])
                cpu_many = statistics.median(cpu[(name, CALLERS)])
                rows.append(
                    [
                        fs,
                        name,
                        f"{one:,.0f}",
                        f"{many:,.0f}",
                        f"{many / one:.2f}",
                        f"{cpu_one:.1f}",
                        f"{cpu_many:.1f}",
                        f"{cpu_many / cpu_one:.2f}",
                    ]
                )
                figures[f"{fs} {name} cpu"] = cpu_many / cpu_one
                figures[f"{fs} {name}"] = many / one
                life.store.recorder.close()
    return rows, figures


def processes_side_by_side(rounds: int, total: int) -> tuple[list[list[Any]], dict[str, float]]:
    """The same lifecycles as ``callers_side_by_side`` (the path after), with 1 and
    with ``CALLERS`` callers each in a process of its own (forked after the
    directory is seeded; each opens its own connections to the one file),
    alternating with the threads of one process. Rows: file system, callers,
    1/s, N/s, ratio, CPU ms per lifecycle (all processes) with 1 and with N."""
    import multiprocessing
    import resource

    fork = multiprocessing.get_context("fork")

    def children_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def in_processes(op: Callable[[int], None], callers: int) -> tuple[float, float]:
        per = total // callers
        go = fork.Event()

        def child(t: int) -> None:
            go.wait()
            for _ in range(per):
                op(t)

        procs = [fork.Process(target=child, args=(t,)) for t in range(callers)]
        for proc in procs:
            proc.start()
        cpu, start = children_cpu(), time.perf_counter()
        go.set()
        for proc in procs:
            proc.join()
            assert proc.exitcode == 0, proc.exitcode
        done = callers * per
        return done / (time.perf_counter() - start), (children_cpu() - cpu) / done * 1000

    rows: list[list[Any]] = []
    figures: dict[str, float] = {}
    shm = Path("/dev/shm")
    for fs, where in (("disk", ROOT), ("RAM", shm if shm.is_dir() else ROOT)):
        with tempfile.TemporaryDirectory(dir=where, prefix="bench-procs-") as tmp:
            life = Lifecycle(sqlite_store(f"{tmp}/after.db", pooled=False), actors=CALLERS)
            workers = [life.worker() for _ in range(CALLERS)]
            op = _op(life, workers)
            rate(CALLERS, CALLERS, op)  # warm-up
            found: dict[tuple[str, int], list[tuple[float, float]]] = {}
            for _ in range(rounds):  # alternate, so that noise hits both alike
                for callers in (1, CALLERS):
                    found.setdefault(("threads", callers), []).append(rate(callers, total, op))
                    found.setdefault(("processes", callers), []).append(in_processes(op, callers))
            for kind in ("threads", "processes"):
                one = statistics.median(r for r, _ in found[(kind, 1)])
                many = statistics.median(r for r, _ in found[(kind, CALLERS)])
                cpu_one = statistics.median(c for _, c in found[(kind, 1)])
                cpu_many = statistics.median(c for _, c in found[(kind, CALLERS)])
                label = (
                    "threads of one process" if kind == "threads" else "one process each (forked)"
                )
                rows.append(
                    [
                        fs,
                        label,
                        f"{one:,.0f}",
                        f"{many:,.0f}",
                        f"{many / one:.2f}",
                        f"{cpu_one:.1f}",
                        f"{cpu_many:.1f}",
                    ]
                )
                figures[f"{fs} {kind}"] = many / one
                figures[f"{fs} {kind} busy"] = one * cpu_one / 1000
            life.store.recorder.close()
    return rows, figures


def _op(life: Lifecycle, workers: list[Any]) -> Callable[[int], None]:
    def op(t: int) -> None:
        outcome = life.run(t, workers[t])
        assert outcome.value == "succeeded", outcome

    return op


def statement_rows(tmp: str) -> tuple[list[list[Any]], dict[str, dict[str, float]]]:
    found = {
        name: statements_per_lifecycle(f"{tmp}/{name}-count.db", pooled)
        for name, pooled in PATHS.items()
    }
    keys = ["reads", "transactions", "checks in writes", "statements"]
    rows = [[name, *(f"{found[name].get(k, 0):.0f}" for k in keys)] for name in PATHS]
    return rows, found
