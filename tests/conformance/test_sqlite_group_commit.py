"""Group commit on SQLite: writes queued behind a commit share the next one, and
each keeps its own answer (``adapters/sqlite/group_commit.py``).

The batches are made deterministic without timing: a second opener of the file
holds SQLite's write lock, so the first caller (the leader) waits in ``BEGIN
IMMEDIATE`` while every other caller queues behind it; when the lock is let go
the leader commits its own write and hands the lead to the oldest queued write,
whose caller commits all the others in one transaction.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from adapters.sqlite.group_commit import Batch, GroupCommit, Write
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from adapters.store import LedgerStore
from domain.directory import DirectoryKind, DirectoryRecord
from domain.errors import ConcurrencyConflict, LookupConflict, StoreUnavailable
from domain.ports import Commit, Lookup
from tests.conformance.backends import new_stream_id
from tests.conformance.sqlite_writers import AT

THREADS = 12
ROUNDS = 5


def until(condition: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.001)


def opened(path: Path) -> tuple[SQLiteLedgerRecorder, LedgerStore]:
    recorder = SQLiteLedgerRecorder(open_datastore(str(path)))
    recorder.create_table()
    return recorder, LedgerStore(recorder)


def batched(
    recorder: SQLiteLedgerRecorder, path: Path, writes: list[Callable[[], Any]]
) -> list[Any]:
    """Run ``writes`` on threads, all but the first queued behind it; each one's
    answer (``"ok"``, or the exception it raised)."""
    holder = open_datastore(str(path), lock_timeout=30)
    outcomes: list[Any] = [None] * len(writes)

    def run(n: int) -> None:
        try:
            writes[n]()
        except Exception as exc:
            outcomes[n] = exc
        else:
            outcomes[n] = "ok"

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(writes))]
    # BEGIN IMMEDIATE on a connection of another opener holds the file's write lock.
    connection = holder.own_connection()
    assert connection is not None
    cursor = connection.cursor()
    cursor.execute("BEGIN IMMEDIATE")
    try:
        threads[0].start()
        until(lambda: recorder.group_commit.leading())
        for thread in threads[1:]:
            thread.start()
        until(lambda: recorder.group_commit.queued() == len(writes) - 1)
    finally:
        cursor.execute("ROLLBACK")
        holder.close()
    for thread in threads:
        thread.join(30)
        assert not thread.is_alive()
    return outcomes


def new_record(store: LedgerStore) -> str:
    """A new target record's stream id."""
    record = DirectoryRecord(
        record_id=f"target:{new_stream_id()}",
        kind=DirectoryKind.TARGET.value,
        values={"revision": "r0"},
        at=AT,
    )
    store.commit(Commit(aggregates=[record]))
    return record.id


def updater(store: LedgerStore, record_id: str, revision: str) -> Callable[[], None]:
    record = store.get(DirectoryRecord, record_id)
    assert record is not None
    record.update({"revision": revision}, at=AT)
    return lambda: store.commit(Commit(aggregates=[record]))


@pytest.mark.parametrize("round_no", range(ROUNDS))
def test_a_clash_in_a_shared_transaction_fails_only_its_own_write(
    tmp_path: Path, round_no: int
) -> None:
    path = tmp_path / "l.db"
    recorder, store = opened(path)
    contested = new_record(store)
    spread = [new_record(store) for _ in range(THREADS)]
    log_before = recorder.max_notification_id()
    # interleaved: a racer on the contested stream, a writer of its own stream,
    # a lookup two of them create, ...
    writes: list[Callable[[], Any]] = []
    kinds: list[str] = []
    for n in range(THREADS):
        if n % 3 == 0:
            writes.append(updater(store, contested, f"racer-{n}"))
            kinds.append("racer")
        elif n % 3 == 1:
            writes.append(updater(store, spread[n], f"own-{n}"))
            kinds.append("own")
        else:
            key = f"lookup-{round_no}-{n // 6}"
            writes.append(lambda key=key: store.commit(Commit(lookups=[Lookup(key, {"n": "1"})])))
            kinds.append("lookup")
    outcomes = batched(recorder, path, writes)

    racers = [o for o, k in zip(outcomes, kinds, strict=True) if k == "racer"]
    assert racers.count("ok") == 1
    assert all(isinstance(o, ConcurrencyConflict) for o in racers if o != "ok")
    owns = [o for o, k in zip(outcomes, kinds, strict=True) if k == "own"]
    assert owns == ["ok"] * len(owns)  # never failed by a racer beside them
    lookups = [o for o, k in zip(outcomes, kinds, strict=True) if k == "lookup"]
    assert lookups.count("ok") == len({f"{n // 6}" for n in range(2, THREADS, 3)})
    assert all(isinstance(o, LookupConflict) for o in lookups if o != "ok")
    # what each winner wrote is there, once, and the log has no gap or double
    for n, kind in enumerate(kinds):
        if kind == "own":
            record = store.get(DirectoryRecord, spread[n])
            assert record is not None and record.text("revision") == f"own-{n}"
    winner = store.get(DirectoryRecord, contested)
    assert winner is not None and winner.version == 2
    log = recorder.select_notifications(start=log_before, limit=1000, inclusive_of_start=False)
    assert [n.id for n in log] == list(range(log_before + 1, log_before + 1 + len(log)))
    assert len(log) == len(owns) + 1  # one event per winning update (lookups have none)
    recorder.close()


def test_writes_queued_behind_a_commit_share_one_transaction(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    recorder, store = opened(path)
    streams = [new_record(store) for _ in range(THREADS)]
    writes = [updater(store, stream, "shared") for stream in streams]
    shared_before = recorder.group_commit.shared
    outcomes = batched(recorder, path, writes)
    assert outcomes == ["ok"] * THREADS
    # the leader committed alone; the others in one batch
    assert recorder.group_commit.shared - shared_before == THREADS - 1
    recorder.close()


def test_a_failed_batch_acknowledges_none_of_its_writes(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    recorder, store = opened(path)
    streams = [new_record(store) for _ in range(4)]
    writes = [updater(store, stream, "lost") for stream in streams]

    def failing(batch: Batch, durable: bool) -> None:
        from eventsourcing.persistence import OperationalError

        raise OperationalError("disk I/O error")

    recorder.group_commit = GroupCommit(failing, recorder._commit_one)
    outcomes = batched(recorder, path, writes)
    assert outcomes[0] == "ok"  # the leader's own write committed alone
    assert all(isinstance(o, StoreUnavailable) for o in outcomes[1:])
    for stream in streams[1:]:
        record = store.get(DirectoryRecord, stream)
        assert record is not None and record.version == 1  # nothing of the batch written
    recorder.close()


def test_a_lone_writer_commits_at_once_and_keeps_its_error() -> None:
    seen: list[str] = []

    def single(write: Write) -> Any:
        seen.append("single")
        return write.run(None)

    def batch(writes: Batch, durable: bool) -> None:
        raise AssertionError("a lone write needs no batch")

    group = GroupCommit(batch, single)
    assert group.submit(lambda _: 7, durable=True) == 7

    def clash(_: Any) -> Any:
        raise ValueError("clash")

    with pytest.raises(ValueError, match="clash"):
        group.submit(clash, durable=False)
    assert seen == ["single", "single"]
    assert not group.leading() and group.queued() == 0
