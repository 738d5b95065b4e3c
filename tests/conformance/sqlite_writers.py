"""Writer loops for the SQLite concurrency tests (importable by spawned processes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from adapters.store import LedgerStore
from domain.directory import DirectoryRecord
from domain.errors import ConcurrencyConflict, LedgerError
from domain.ports import Commit

AT = "2026-03-01T09:00:00Z"


def append_until_done(
    path: str, stream_id: str, writer: str, appends: int, start: Any = None
) -> dict[str, Any]:
    """Append ``appends`` changes to one record, re-reading after each lost race.

    Returns the versions this writer won, how many races it lost and the
    repr of any other error (there should be none).
    """
    recorder = SQLiteLedgerRecorder(open_datastore(path))
    store = LedgerStore(recorder)
    won: list[int] = []
    conflicts = 0
    errors: list[str] = []
    if start is not None:
        start.wait()
    try:
        while len(won) < appends and len(errors) < 5:
            record = store.get(DirectoryRecord, stream_id)
            assert record is not None
            record.update({"revision": f"{writer}-{len(won)}"}, at=AT)
            try:
                store.commit(Commit(aggregates=[record]))
            except ConcurrencyConflict:
                conflicts += 1
                continue
            except LedgerError as exc:
                errors.append(repr(exc))
                continue
            won.append(record.version)
    finally:
        recorder.close()
    return {"writer": writer, "won": won, "conflicts": conflicts, "errors": errors}


def process_main(
    path: str, stream_id: str, writer: str, appends: int, start: Any, results: Any
) -> None:
    """Entry point of one writer process: report through a queue."""
    results.put(append_until_done(path, stream_id, writer, appends, start))


def database_path(directory: Path) -> str:
    return str(directory / "ledger.db")
