"""Periodic audit checkpoints: a digest file per tick, never overwritten, outliving errors."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from adapters.audit.checkpoints import CheckpointLoop, checkpoint_loop
from adapters.audit.digests import load_digest
from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.settings import load_settings
from adapters.store import LedgerStore
from domain.directory import DirectoryRecord
from domain.ports import Commit
from tests.support.clocks import FixedClock


class Ticks(threading.Event):
    """A stop event whose ``wait`` returns at once, ``ticks`` times, then stops the loop."""

    def __init__(self, ticks: int, clock: FixedClock | None = None) -> None:
        super().__init__()
        self.ticks = ticks
        self.clock = clock

    def wait(self, timeout: float | None = None) -> bool:
        self.ticks -= 1
        if self.ticks < 0:
            return True
        if self.clock is not None and timeout is not None:
            self.clock.advance(timeout)
        return False


def test_checkpoints_are_off_unless_a_directory_is_set() -> None:
    store = LedgerStore(MemoryLedgerRecorder())
    assert checkpoint_loop(load_settings(store="memory"), store, FixedClock()) is None


def test_each_tick_writes_a_new_digest_of_the_ledger(tmp_path: Path) -> None:
    store = LedgerStore(MemoryLedgerRecorder())
    store.commit(
        Commit(
            aggregates=[
                DirectoryRecord(
                    record_id="actor:a", kind="actor", values={}, at="2026-01-01T00:00:00Z"
                )
            ]
        )
    )
    clock = FixedClock()
    settings = load_settings(
        store="memory",
        audit_checkpoint_dir=str(tmp_path / "cp"),
        audit_checkpoint_interval_seconds=60,
    )
    loop = checkpoint_loop(settings, store, clock)
    assert loop is not None and loop.interval == 60
    assert loop.run_once(raise_errors=True) is not None
    loop.stop_event = Ticks(2, clock)
    loop._loop()
    files = sorted((tmp_path / "cp").iterdir())
    assert len(files) == 3 == len(loop.written)
    assert all(load_digest(str(f)).stream_count == 1 for f in files)
    # the same instant again: refused, never overwritten; the loop logs and goes on
    assert loop.run_once() is None
    with pytest.raises(FileExistsError):
        loop.run_once(raise_errors=True)


def test_a_failing_store_does_not_stop_the_loop(tmp_path: Path) -> None:
    class Broken(LedgerStore):
        def stream_heads(self):  # type: ignore[no-untyped-def, override]
            raise OSError("disk gone")

    loop = CheckpointLoop(
        load_settings(store="memory"),
        Broken(MemoryLedgerRecorder()),
        FixedClock(),
        str(tmp_path),
        1.0,
        stop_event=Ticks(3),
    )
    loop._loop()
    assert loop.written == []
