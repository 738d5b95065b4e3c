"""Events at exact slots on SQLite: one SELECT per hundred slots, the same
events the one-slot-per-statement path reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent

import adapters.sqlite.recorder as sqlite_recorder
from adapters.recorder import LedgerRecorder
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore


def _event(stream: str, version: int) -> StoredEvent:
    return StoredEvent(
        originator_id=stream,
        originator_version=version,
        topic="tests:Event",
        state=f"{stream}@{version}".encode(),
    )


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement the recorder reads through ``read`` from now on."""
    reads: list[str] = []
    real = sqlite_recorder.read

    def counted(datastore: Any, statement: str, params: Any = ()) -> Any:
        reads.append(statement)
        return real(datastore, statement, params)

    monkeypatch.setattr(sqlite_recorder, "read", counted)
    return reads


def test_slots_are_read_in_one_select_per_hundred_and_absent_ones_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = SQLiteLedgerRecorder(open_datastore(str(tmp_path / "l.db")))
    recorder.create_table()
    names = [f"actor:{n}" for n in range(3)]
    for name in names:
        recorder.insert_events([_event(name, v) for v in range(1, 51)])
    wanted = [(name, v) for name in names for v in range(1, 51)]  # 150 present
    asked = [*wanted, (names[0], 51), ("actor:never", 1), (names[1], 7)]  # 2 absent, 1 twice
    reads = _count_reads(monkeypatch)
    found = recorder.select_events_at(asked)
    monkeypatch.undo()

    def key(e: StoredEvent) -> tuple[str, int]:
        return str(e.originator_id), e.originator_version

    assert sorted(set(map(key, found))) == sorted(wanted)
    one_by_one = {key(e): e for e in LedgerRecorder.select_events_at(recorder, asked)}
    assert {key(e): e for e in found} == one_by_one
    assert len(reads) == 2  # 153 distinct slots: two SELECTs
    recorder.close()


def test_the_newest_event_of_each_stream_in_one_select_per_hundred_streams(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = SQLiteLedgerRecorder(open_datastore(str(tmp_path / "l.db")))
    recorder.create_table()
    names = [f"actor:{n}" for n in range(150)]
    for n, name in enumerate(names):  # streams of different lengths: 1..7 events
        recorder.insert_events([_event(name, v) for v in range(1, n % 7 + 2)])
    asked = [*names, "actor:never", names[3]]  # one without events, one twice
    reads = _count_reads(monkeypatch)
    found = recorder.select_latest_events(asked)
    monkeypatch.undo()

    newest = {str(e.originator_id): e for e in found}
    assert len(found) == len(newest) == 150
    assert {n: e.originator_version for n, e in newest.items()} == {
        name: n % 7 + 1 for n, name in enumerate(names)
    }
    one_by_one = LedgerRecorder.select_latest_events(recorder, asked)
    assert newest == {str(e.originator_id): e for e in one_by_one}
    assert len(reads) == 2  # 151 distinct streams: two SELECTs
    recorder.close()
