"""The embedded store's connections: one per thread, readers never queue behind
writers, reads of one statement run without a transaction, and connections of
finished threads are closed (nothing grows with the threads a server has had)."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent

from adapters.sqlite.datastore import LedgerDatastore
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from tests.conformance.backends import new_stream_id
from tests.support.stores import DurableCountingRecorder

JOIN_SECONDS = 30  # a deadlock shows as a thread still alive after this


def _recorder(path: str) -> SQLiteLedgerRecorder:
    recorder = SQLiteLedgerRecorder(open_datastore(path))
    recorder.create_table()
    return recorder


def _in_thread(target: Callable[[], object]) -> tuple[threading.Thread, dict[str, object]]:
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["result"] = target()
        except BaseException as exc:  # surfaced by the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def test_a_reader_answers_while_one_writer_holds_the_lock_and_another_waits(
    tmp_path: Path,
) -> None:
    # The library's pool hands connections out through one semaphore that a
    # waiting writer holds: a reader then waits for both writes to finish.
    recorder = _recorder(str(tmp_path / "ledger.db"))
    stream = new_stream_id()
    recorder.insert_events([StoredEvent(stream, 1, "topic", b"{}")])
    inside, release = threading.Event(), threading.Event()

    def hold_the_write_lock() -> None:
        with recorder._write_transaction() as c:
            c.execute("INSERT INTO ledger_heads VALUES ('held', 1, 'h')")
            inside.set()
            assert release.wait(JOIN_SECONDS)

    holder, _ = _in_thread(hold_the_write_lock)
    assert inside.wait(JOIN_SECONDS)
    waiting_writer, writer_box = _in_thread(
        lambda: recorder.insert_events([StoredEvent(stream, 2, "topic", b"{}")])
    )
    reader, box = _in_thread(lambda: recorder.select_events(stream))
    try:
        reader.join(JOIN_SECONDS)
        assert not reader.is_alive(), "the read waited for the writers"
        assert "error" not in box, box
        assert [e.originator_version for e in box["result"]] == [1]  # type: ignore[attr-defined]
    finally:
        release.set()
        holder.join(JOIN_SECONDS)
        waiting_writer.join(JOIN_SECONDS)
    assert "error" not in writer_box, writer_box
    assert [e.originator_version for e in recorder.select_events(stream)] == [1, 2]
    recorder.close()


def test_reads_of_one_statement_open_no_transaction(tmp_path: Path) -> None:
    recorder = _recorder(str(tmp_path / "ledger.db"))
    stream = new_stream_id()
    recorder.insert_events([StoredEvent(stream, 1, "topic", b"{}")])
    datastore = recorder.datastore
    assert isinstance(datastore, LedgerDatastore)
    statements: list[str] = []
    datastore._thread_connection()._sqlite_conn.set_trace_callback(statements.append)

    recorder.select_events(stream)
    recorder.get_lookup("absent")
    recorder.max_notification_id()

    assert [s.split()[0] for s in statements] == ["SELECT", "SELECT", "SELECT"]
    recorder.close()


def test_each_thread_reads_on_its_own_connection(tmp_path: Path) -> None:
    recorder = _recorder(str(tmp_path / "ledger.db"))
    datastore = recorder.datastore
    assert isinstance(datastore, LedgerDatastore)
    mine = datastore._thread_connection()
    thread, box = _in_thread(datastore._thread_connection)
    thread.join(JOIN_SECONDS)

    assert box["result"] is not mine
    assert datastore._thread_connection() is mine  # kept for the thread's next use
    recorder.close()


def test_connections_of_finished_threads_are_closed(tmp_path: Path) -> None:
    recorder = _recorder(str(tmp_path / "ledger.db"))
    datastore = recorder.datastore
    assert isinstance(datastore, LedgerDatastore)
    stream = new_stream_id()
    recorder.insert_events([StoredEvent(stream, 1, "topic", b"{}")])
    for _ in range(20):  # one short-lived thread after another, as a server's pool
        thread, box = _in_thread(lambda: recorder.select_events(stream))
        thread.join(JOIN_SECONDS)
        assert "error" not in box, box

    # This thread's and, at most, the last finished one's (closed at the next connect).
    assert datastore.open_connections <= 2
    recorder.close()
    assert datastore.open_connections == 0


def test_an_in_memory_store_is_one_database_for_every_thread() -> None:
    recorder = _recorder(":memory:")
    stream = new_stream_id()
    thread, box = _in_thread(
        lambda: recorder.insert_events([StoredEvent(stream, 1, "topic", b"{}")])
    )
    thread.join(JOIN_SECONDS)
    assert "error" not in box, box

    assert [e.originator_version for e in recorder.select_events(stream)] == [1]
    recorder.close()


def test_a_commit_of_many_streams_names_the_stream_already_written(tmp_path: Path) -> None:
    recorder = _recorder(str(tmp_path / "ledger.db"))
    streams = [new_stream_id() for _ in range(250)]  # over one SELECT's worth of checks
    recorder.insert_events([StoredEvent(streams[200], 1, "topic", b"{}")])
    from adapters.recorder import StreamConflictError

    with pytest.raises(StreamConflictError) as raised:
        recorder.insert_events([StoredEvent(s, 1, "topic", b"{}") for s in streams])

    assert raised.value.stream_id == streams[200]
    assert recorder.select_events(streams[0]) == []  # nothing of the commit was written
    recorder.close()


def _child_reads(recorder: SQLiteLedgerRecorder, stream: str, out: Any) -> None:
    datastore = recorder.datastore
    assert isinstance(datastore, LedgerDatastore)
    inherited = datastore._connections.copy()
    recorder.insert_events([StoredEvent(stream, 2, "topic", b"{}")])
    mine = datastore._thread_connection()
    out.put(
        (
            [e.originator_version for e in recorder.select_events(stream)],
            all(mine is not entry[1] for entry in inherited.values()),
        )
    )


def test_a_forked_child_opens_its_own_connections(tmp_path: Path) -> None:
    recorder = _recorder(str(tmp_path / "ledger.db"))
    stream = new_stream_id()
    recorder.insert_events([StoredEvent(stream, 1, "topic", b"{}")])
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=_child_reads, args=(recorder, stream, out))
    child.start()
    versions, fresh = out.get(timeout=JOIN_SECONDS)
    child.join(JOIN_SECONDS)

    assert child.exitcode == 0
    assert versions == [1, 2] and fresh
    assert [e.originator_version for e in recorder.select_events(stream)] == [1, 2]
    recorder.close()


def test_a_read_inside_a_write_on_the_same_thread_does_not_wait_for_itself() -> None:
    recorder = _recorder(":memory:")  # one connection and one lock for everything
    stream = new_stream_id()
    recorder.insert_events([StoredEvent(stream, 1, "topic", b"{}")])

    def read_inside_a_write() -> list[int]:
        with recorder._write_transaction():
            return [e.originator_version for e in recorder.select_events(stream)]

    thread, box = _in_thread(read_inside_a_write)
    thread.join(JOIN_SECONDS)
    assert not thread.is_alive(), "the read waited for its own write"
    assert box.get("result") == [1], box
    recorder.close()


def test_sqlite_memory_of_the_whole_process_is_bounded(tmp_path: Path) -> None:
    # One page cache per thread's connection: the soft heap limit caps them all.
    from adapters.sqlite.datastore import SOFT_HEAP_LIMIT_BYTES

    recorder = _recorder(str(tmp_path / "ledger.db"))
    rows = recorder.datastore.read("PRAGMA soft_heap_limit")  # type: ignore[attr-defined]
    assert 0 < rows[0][0] <= SOFT_HEAP_LIMIT_BYTES
    recorder.close()


def test_every_new_connection_takes_the_synchronous_level_given(tmp_path: Path) -> None:
    datastore = LedgerDatastore(str(tmp_path / "ledger.db"), synchronous="NORMAL")
    thread, box = _in_thread(lambda: datastore.read("PRAGMA synchronous"))
    thread.join(JOIN_SECONDS)

    assert datastore.read("PRAGMA synchronous")[0][0] == 1  # NORMAL
    assert box["result"][0][0] == 1  # type: ignore[index]
    datastore.close()


def test_close_leaves_a_running_threads_connection_to_that_thread(tmp_path: Path) -> None:
    """Shutdown closes the store while a worker may still be inside a statement
    (its executor call outlived the wait): closing that thread's connection from
    here could crash the process. It stays open for its thread, whose next use
    opens a fresh connection (a late result is still recorded)."""
    recorder = _recorder(str(tmp_path / "ledger.db"))
    datastore = recorder.datastore
    assert isinstance(datastore, LedgerDatastore)
    stream = new_stream_id()
    recorder.insert_events([StoredEvent(stream, 1, "topic", b"{}")])
    connected, closed = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def worker() -> int:
        recorder.select_events(stream)
        seen["connection"] = datastore._local.connection[2]
        connected.set()
        assert closed.wait(JOIN_SECONDS)
        # still usable by its own thread: closing it here would raise
        seen["old_still_open"] = seen["connection"]._sqlite_conn.execute("SELECT 1").fetchone()[0]
        recorder.insert_events([StoredEvent(stream, 2, "topic", b"{}")])  # a late result
        return len(recorder.select_events(stream))

    thread, box = _in_thread(worker)
    assert connected.wait(JOIN_SECONDS)
    recorder.select_events(stream)  # this thread's own connection: closed by close()
    mine = datastore._local.connection[2]
    recorder.close()
    closed.set()
    thread.join(JOIN_SECONDS)
    assert box == {"result": 2}, box
    assert seen["old_still_open"] == 1
    with pytest.raises(Exception, match="closed"):
        mine._sqlite_conn.execute("SELECT 1")
    recorder.close()


def test_each_commit_runs_at_its_own_level_set_outside_the_write_lock(tmp_path: Path) -> None:
    """Durable commits fsync (``synchronous=FULL``), every other write runs at the
    store's NORMAL; a connection keeps the level set last, so a run of durable
    commits sets it once, and it is set before the write lock is taken (the
    lock is held for the transaction's own statements only)."""
    recorder = DurableCountingRecorder(open_datastore(str(tmp_path / "ledger.db")))
    recorder.create_table()
    datastore = recorder.datastore
    assert isinstance(datastore, LedgerDatastore)
    stream = new_stream_id()
    seen: list[tuple[str, bool]] = []  # (statement, write lock held by this thread)
    level_at_write: list[int] = []
    connection = datastore.own_connection()
    assert connection is not None
    connection._sqlite_conn.set_trace_callback(
        lambda sql: seen.append((sql, datastore._write_lock._is_owned()))
    )  # type: ignore[attr-defined]

    def pragmas() -> list[tuple[str, bool]]:
        found = [s for s in seen if s[0].startswith("PRAGMA synchronous")]
        seen.clear()
        return found

    for version in (1, 2, 3):  # three durable commits in a row: one switch
        recorder.insert_events([StoredEvent(stream, version, "topic", b"{}")], durable=True)
    assert pragmas() == [("PRAGMA synchronous=FULL", False)]
    with datastore.transaction(commit=True) as c:  # a view write: the store's level
        c.execute("SELECT 1")
        level_at_write.append(connection._sqlite_conn.execute("PRAGMA synchronous").fetchone()[0])
    assert pragmas()[0] == ("PRAGMA synchronous=NORMAL", False)
    recorder.insert_events([StoredEvent(stream, 4, "topic", b"{}")], durable=False)
    assert pragmas() == []  # already NORMAL
    recorder.insert_events([StoredEvent(stream, 5, "topic", b"{}")], durable=True)
    assert pragmas() == [("PRAGMA synchronous=FULL", False)]
    assert level_at_write == [1]  # NORMAL
    assert recorder.durable_count == 4
    recorder.close()
