"""The embedded store's online backup (issue 25.6): a copy taken while writers commit
is one consistent snapshot, and a store found behind the last checkpoint at
start-up is recorded as restored."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from adapters.audit.checkpoints import CheckpointLoop
from adapters.audit.digests import write_checkpoint
from adapters.settings import load_settings
from adapters.sqlite.backup import BackupError, backup_store, restore_store
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from adapters.store import LedgerStore
from domain.audit import verify_chain
from domain.directory import DirectoryKind
from domain.restore import RESTORE_LOG_ID, RestoreLog
from domain.services.directory import put_record
from domain.services.execution import WorkerPolicy
from domain.services.restore import pending_restore, settle_pending_restore
from tests.support.clocks import FixedClock
from tests.support.worlds.execution import MODES, ExecutionWorld


def open_store(path: Path) -> LedgerStore:
    recorder = SQLiteLedgerRecorder(open_datastore(str(path)))
    recorder.create_table()
    return LedgerStore(recorder)


def consistent(path: Path) -> int:
    """Every stream of a copy replays its chain to its head-index entry; the count."""
    store = LedgerStore(SQLiteLedgerRecorder(open_datastore(str(path))))
    try:
        heads = list(store.stream_heads())
        for head in heads:
            events, bad = store.audit_events(head.stream_id)
            assert bad is None
            assert verify_chain(head.stream_id, events, (head.version, head.head)).ok
            assert len(events) == head.version  # the index and the events are one snapshot
        return len(heads)
    finally:
        store.recorder.close()


@pytest.mark.parametrize("step_pages", [1, 2048])
def test_a_backup_under_concurrent_writers_is_one_snapshot(tmp_path: Path, step_pages: int) -> None:
    """Four threads commit directory changes while the copy runs (in steps of one page,
    so writers change the source under it and it must fall back to one step)."""
    source = tmp_path / "ledger.db"
    store = open_store(source)
    clock = FixedClock()
    for n in range(200):
        put_record(
            store,
            clock,
            kind=DirectoryKind.TARGET,
            record_id=f"target:t{n}",
            values={"revision": "r0"},
        )
    stop = threading.Event()
    written = [0]

    def write(worker: int) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            put_record(
                store,
                clock,
                kind=DirectoryKind.TARGET,
                record_id=f"target:w{worker}",
                values={"revision": f"r{n}"},
            )
            written[0] += 1

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    try:
        copies = []
        for n in range(3):
            progress: list[tuple[int, int]] = []
            copied = backup_store(
                str(source),
                str(tmp_path / f"copy-{n}.db"),
                progress=lambda done, total, seen=progress: seen.append((done, total)),
                step_pages=step_pages,
            )
            copies.append(copied)
            assert progress and all(done <= total for done, total in progress)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert written[0] > 0
    for copied in copies:
        assert consistent(Path(copied.path)) >= 200
    store.recorder.close()


def test_a_copy_changed_under_it_too_often_is_taken_in_one_step(tmp_path: Path) -> None:
    """A writer commits between the copy's steps: SQLite starts the copy over each
    time; after three restarts the rest is copied in one step, which is one snapshot
    holding every write committed before it."""
    source = tmp_path / "ledger.db"
    store = open_store(source)
    clock = FixedClock()
    for n in range(100):
        put_record(
            store,
            clock,
            kind=DirectoryKind.TARGET,
            record_id=f"target:t{n}",
            values={"revision": "r0"},
        )
    steps = [0]

    def write_between_steps(done: int, total: int) -> None:
        steps[0] += 1
        put_record(
            store,
            clock,
            kind=DirectoryKind.TARGET,
            record_id=f"target:between{steps[0]}",
            values={"revision": "r1"},
        )

    copied = backup_store(
        str(source), str(tmp_path / "copy.db"), progress=write_between_steps, step_pages=4
    )
    assert copied.one_step
    assert consistent(Path(copied.path)) == 100 + steps[0]  # every write before the copy
    store.recorder.close()


def test_a_partial_copy_never_looks_like_a_backup(tmp_path: Path) -> None:
    source = tmp_path / "ledger.db"
    open_store(source).recorder.close()
    target = tmp_path / "b.db"

    def fail(done: int, total: int) -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(BackupError, match="No space left on device"):
        backup_store(str(source), str(target), progress=fail)
    assert not target.exists()
    assert not any(p.name.startswith(".b.db.partial") for p in tmp_path.iterdir())


def test_a_store_behind_the_last_checkpoint_is_recorded_as_restored(tmp_path: Path) -> None:
    """A backup put back by hand (no `ledger restore`): the first checkpoint of the next
    start-up finds the store behind the last one, records the restore, and the attempts
    it found unsettled are marked before anything leases them."""
    path = tmp_path / "ledger.db"
    checkpoints = tmp_path / "checkpoints"
    settings = load_settings(
        store="sqlite", sqlite_path=str(path), audit_checkpoint_dir=str(checkpoints)
    )
    store = open_store(path)
    from adapters.executors.fake import register_fakes
    from adapters.executors.registry import StaticExecutorRegistry

    registry = StaticExecutorRegistry()
    effects = register_fakes(registry)
    world = ExecutionWorld(store, registry=registry, effects=effects)
    attempts = [world.approved(mode) for mode in MODES]
    backup_store(str(path), str(tmp_path / "backup.db"))
    worker = world.worker()
    for attempt_id in attempts:
        worker.process(attempt_id)
    write_checkpoint(settings, store, world.clock, str(checkpoints))
    store.recorder.close()

    restore_store(str(tmp_path / "backup.db"), str(path))  # by hand: nothing recorded
    restored = LedgerStore(SQLiteLedgerRecorder(open_datastore(str(path))))
    world.clock.advance(1)
    loop = CheckpointLoop(settings, restored, world.clock, str(checkpoints), 3600)
    loop.run_once(raise_errors=True)
    assert loop.restore is not None
    log = restored.get(RestoreLog, RESTORE_LOG_ID)
    assert log is not None and log.latest is not None
    assert log.latest["source"] == "checkpoint"
    assert log.latest["lost"]["streams_behind"] == len(attempts)
    ctx = world.ctx.__class__(**{**world.ctx.__dict__, "store": restored})
    assert pending_restore(ctx) == loop.restore
    report = settle_pending_restore(ctx, WorkerPolicy())
    assert report is not None and report.total == len(attempts)
    # a later start finds the store extending its own start-up checkpoint: nothing new
    again = CheckpointLoop(settings, restored, world.clock, str(checkpoints), 3600)
    world.clock.advance(1)
    again.run_once(raise_errors=True)
    assert again.restore is None
    restored.recorder.close()
