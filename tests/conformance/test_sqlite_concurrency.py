"""Optimistic concurrency on the embedded store: threads and OS processes.

design.md 7.7: SQLite has "the same semantics in one process or several": of any
number of writers appending the same version of a stream exactly one wins,
every other one gets ``ConcurrencyConflict``, and nothing is lost or doubled.
"""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path

from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from adapters.store import LedgerStore
from domain.directory import DirectoryKind, DirectoryRecord
from domain.errors import ConcurrencyConflict
from domain.ports import Commit
from tests.conformance.backends import new_sqlite_recorder, new_stream_id
from tests.conformance.sqlite_writers import AT, database_path, process_main

THREADS = 25
ROUNDS = 20


def _race(stores: list[LedgerStore], record_id: str, round_no: int) -> list[str]:
    """Every thread loads the same version, then all commit at once."""
    copies = []
    for n, store in enumerate(stores):
        record = store.get(DirectoryRecord, record_id)
        assert record is not None
        record.update({"revision": f"round-{round_no}-writer-{n}"}, at=AT)
        copies.append(record)
    barrier = threading.Barrier(len(stores))
    outcomes = [""] * len(stores)

    def write(n: int) -> None:
        barrier.wait()
        try:
            stores[n].commit(Commit(aggregates=[copies[n]]))
        except ConcurrencyConflict as exc:
            outcomes[n] = "conflict" if exc.stream_id == record_id else f"other stream {exc}"
        except Exception as exc:  # anything else is a failure of the contract
            outcomes[n] = repr(exc)
        else:
            outcomes[n] = "won"

    threads = [threading.Thread(target=write, args=(n,)) for n in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def _check_rounds(stores: list[LedgerStore]) -> None:
    store = stores[0]
    record = DirectoryRecord(
        record_id=f"target:{new_stream_id()}",
        kind=DirectoryKind.TARGET.value,
        values={"revision": "r0"},
        at=AT,
    )
    store.commit(Commit(aggregates=[record]))

    for round_no in range(ROUNDS):
        outcomes = _race(stores, record.id, round_no)

        assert outcomes.count("won") == 1, outcomes
        assert outcomes.count("conflict") == THREADS - 1, outcomes
        winner = outcomes.index("won")
        loaded = store.get(DirectoryRecord, record.id)
        assert loaded is not None
        assert loaded.version == round_no + 2
        assert loaded.text("revision") == f"round-{round_no}-writer-{winner}"
    assert [s.originator_version for s in store.read_stream(record.id)] == list(
        range(1, ROUNDS + 2)
    )


def test_one_of_25_threads_sharing_a_store_wins_each_round(tmp_path: Path) -> None:
    recorder = new_sqlite_recorder(tmp_path)
    try:
        store = LedgerStore(recorder)
        _check_rounds([store] * THREADS)
    finally:
        recorder.close()


def test_one_of_25_threads_with_their_own_connections_wins_each_round(tmp_path: Path) -> None:
    # Separate recorders share no in-process writer lock: only SQLite's own
    # file locking decides, as between processes.
    first = new_sqlite_recorder(tmp_path)
    recorders = [first] + [
        SQLiteLedgerRecorder(open_datastore(database_path(tmp_path))) for _ in range(THREADS - 1)
    ]
    try:
        _check_rounds([LedgerStore(r) for r in recorders])
    finally:
        for recorder in recorders:
            recorder.close()


APPENDS_PER_PROCESS = 60


def test_two_processes_appending_to_one_file_lose_and_double_nothing(tmp_path: Path) -> None:
    writers = 2
    recorder = new_sqlite_recorder(tmp_path)
    store = LedgerStore(recorder)
    record = DirectoryRecord(
        record_id=f"target:{new_stream_id()}",
        kind=DirectoryKind.TARGET.value,
        values={"revision": "r0"},
        at=AT,
    )
    store.commit(Commit(aggregates=[record]))
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(writers)
    results = context.Queue()
    names = [f"proc{n}" for n in range(writers)]
    processes = [
        context.Process(
            target=process_main,
            args=(database_path(tmp_path), record.id, name, APPENDS_PER_PROCESS, start, results),
        )
        for name in names
    ]
    for process in processes:
        process.start()
    reports = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=30)
        assert process.exitcode == 0

    try:
        assert all(report["errors"] == [] for report in reports), reports
        won = sorted(v for report in reports for v in report["won"])
        total = writers * APPENDS_PER_PROCESS
        assert won == list(range(2, total + 2))  # disjoint and gap-free
        events = store.read_stream(record.id)
        assert [e.originator_version for e in events] == list(range(1, total + 2))
        written = [
            store.mapper.to_domain_event(e).data()["values"]["revision"]  # type: ignore[attr-defined]
            for e in events[1:]
        ]
        for report in reports:
            mine = [w for w in written if w.startswith(f"{report['writer']}-")]
            assert mine == [f"{report['writer']}-{n}" for n in range(APPENDS_PER_PROCESS)]
    finally:
        recorder.close()
