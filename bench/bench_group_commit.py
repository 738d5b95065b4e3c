"""Group commit on SQLite: lifecycles per second with 1, 4 and 8 callers as
threads of one process, one transaction per write ("before",
``group_commit_before.py``) beside writes that arrive together committed in one
transaction ("after", the code as it is), on disk and in RAM, in one run.

Each caller has its own actor and worker and runs whole lifecycles (propose,
present, approve, the worker's lease, dispatch marker, call and result) on one
store; rounds alternate the paths and the caller counts so noise hits them
alike, and the figures are medians of the rounds. Beside the rates: this
process's CPU per lifecycle, and the write transactions per lifecycle (a trace
callback on every connection counts ``BEGIN IMMEDIATE``): below the writes per
lifecycle, several callers' writes shared a transaction.

Run: ``.venv/bin/python bench/bench_group_commit.py [--quick]``.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from group_commit_before import OneByOneRecorder
from harness import ROOT, Lifecycle, Report, parse_args, run_threads

from adapters.sqlite.datastore import LedgerDatastore
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from adapters.store import LedgerStore

CALLERS = (1, 4, 8)
PATHS: dict[str, type[SQLiteLedgerRecorder]] = {
    "before": OneByOneRecorder,
    "after": SQLiteLedgerRecorder,
}


class WriteCounter:
    """Counts ``BEGIN IMMEDIATE`` on every connection a datastore opens."""

    def __init__(self) -> None:
        self.writes = 0
        self._lock = threading.Lock()

    def attach(self, datastore: LedgerDatastore) -> None:
        connect = datastore._connect

        def traced() -> Any:
            connection = connect()

            def trace(statement: str) -> None:
                if statement.startswith("BEGIN IMMEDIATE"):
                    with self._lock:
                        self.writes += 1

            connection._sqlite_conn.set_trace_callback(trace)
            return connection

        datastore._connect = traced  # type: ignore[method-assign]


def run(
    callers: int, total: int, op: Callable[[int], None], counter: WriteCounter
) -> tuple[float, float, float]:
    """(lifecycles/s, CPU ms per lifecycle, write transactions per lifecycle)."""
    per = total // callers
    writes = counter.writes
    start, cpu = time.perf_counter(), time.process_time()
    run_threads(callers, lambda t: [op(t) for _ in range(per)] and None)
    done = callers * per
    return (
        done / (time.perf_counter() - start),
        (time.process_time() - cpu) / done * 1000,
        (counter.writes - writes) / done,
    )


def side_by_side(rounds: int, total: int) -> tuple[list[list[Any]], dict[str, float]]:
    rows: list[list[Any]] = []
    figures: dict[str, float] = {}
    shm = Path("/dev/shm")
    for fs, where in (("disk", ROOT), ("RAM", shm if shm.is_dir() else ROOT)):
        with tempfile.TemporaryDirectory(dir=where, prefix="bench-group-") as tmp:
            lives: dict[str, tuple[Callable[[int], None], WriteCounter, LedgerStore]] = {}
            for name, recorder_class in PATHS.items():
                datastore = open_datastore(f"{tmp}/{name}.db")
                counter = WriteCounter()
                counter.attach(datastore)
                recorder = recorder_class(datastore)
                recorder.create_table()
                life = Lifecycle(LedgerStore(recorder), actors=max(CALLERS))
                workers = [life.worker() for _ in range(max(CALLERS))]

                def op(t: int, life: Lifecycle = life, workers: list[Any] = workers) -> None:
                    outcome = life.run(t, workers[t])
                    assert outcome.value == "succeeded", outcome

                lives[name] = (op, counter, life.store)
                run(max(CALLERS), max(CALLERS), op, counter)  # warm-up
            found: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
            for n in range(rounds):  # alternate, so that noise hits both alike
                order = list(lives.items()) if n % 2 == 0 else list(reversed(lives.items()))
                for name, (op, counter, _) in order:
                    for callers in CALLERS:
                        found.setdefault((name, callers), []).append(
                            run(callers, total, op, counter)
                        )
            for name, (_, _, store) in lives.items():

                def med(
                    callers: int, i: int, name: str = name, found: dict[Any, Any] = found
                ) -> float:
                    return statistics.median(r[i] for r in found[(name, callers)])

                one, four, eight = (med(c, 0) for c in CALLERS)
                rows.append(
                    [
                        fs,
                        name,
                        f"{one:,.0f}",
                        f"{four:,.0f}",
                        f"{eight:,.0f}",
                        f"{four / one:.2f}",
                        f"{eight / four:.2f}",
                        f"{med(1, 1):.1f}",
                        f"{med(4, 1):.1f}",
                        f"{med(8, 1):.1f}",
                        f"{med(1, 2):.1f}",
                        f"{med(4, 2):.1f}",
                        f"{med(8, 2):.1f}",
                    ]
                )
                figures[f"{fs} {name} 4/1"] = four / one
                figures[f"{fs} {name} 8/4"] = eight / four
                store.recorder.close()
    return rows, figures


def main() -> None:
    args = parse_args(__doc__ or "")
    report = Report("bench_group_commit", args.quick)
    rounds, total = (2, 8) if args.quick else (5, 48)
    rows, figures = side_by_side(rounds, total)
    report.table(
        "SQLite: lifecycles per second with 1, 4 and 8 callers (threads), same run",
        [
            "file system",
            "path",
            "1 caller",
            "4 callers",
            "8 callers",
            "4 / 1",
            "8 / 4",
            "CPU ms/lifecycle, 1",
            "CPU ms, 4",
            "CPU ms, 8",
            "write tx/lifecycle, 1",
            "write tx, 4",
            "write tx, 8",
        ],
        rows,
        align="llrrrrrrrrrrr",
    )
    verdict = (
        "**4 callers against 1, after: {disk_after_4/1:.2f}x on disk, {RAM_after_4/1:.2f}x in "
        "RAM (before: {disk_before_4/1:.2f}x and {RAM_before_4/1:.2f}x); target >= 1.0x. 8 "
        "callers against 4, after: {disk_after_8/4:.2f}x on disk, {RAM_after_8/4:.2f}x in RAM "
        "(before: {disk_before_8/4:.2f}x and {RAM_before_8/4:.2f}x); target >= 1.0x.**"
    )
    for key, value in figures.items():
        verdict = verdict.replace("{" + key.replace(" ", "_") + ":.2f}", f"{value:.2f}")
    report.write(verdict + "\n\n" + INTRO.format(rounds=rounds, total=total))


INTRO = """
Medians of {rounds} alternating rounds of {total} lifecycles per caller count
(1 caller: {total} in a row; 4 and 8 callers: their share each, own actor
and worker, at once), threads of one process, one store per path (the same
per-thread connections, WAL, `synchronous=NORMAL` with the durable commits at
FULL). "before" commits every write in a transaction of its own, taken in turn
on the process's write lock; "after" lets the callers whose writes queue
behind a commit in progress share the next one, each write in a savepoint of
its own (a clash undoes only that write). "write tx" counts `BEGIN IMMEDIATE`
per lifecycle: a lifecycle makes the same writes on both paths, so fewer
transactions mean writes shared one. On a machine loaded by other work (see
the load average above) a lone caller is starved of CPU more than several, so
the rates move between runs; the CPU per lifecycle moves less.
"""


if __name__ == "__main__":
    main()
