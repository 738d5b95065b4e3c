"""Online backup and restore of the embedded store, through SQLite's backup API.

``backup_store`` copies a live store while it serves: the copy is one
consistent snapshot (SQLite's backup API restarts a copy that a writer changed
under it; after a few restarts the rest is copied in one step, which holds a
read snapshot and never blocks a writer in WAL mode). The copy is written next
to its destination, checked (``PRAGMA quick_check``), made a single file
(journal mode ``DELETE``, no ``-wal`` beside it), synced, and only then renamed
into place: a failed or interrupted backup leaves no file that looks like one.

``restore_store`` puts a backup back as the store (the ledger must be stopped),
through the same API, so the store's own ``-wal`` and ``-shm`` files are handled
by SQLite rather than overwritten. Recording the restore and settling what it
may have lost is the domain's job (``domain.services.restore``).

Every problem is a ``BackupError`` with one line naming the path and the fix.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

STEP_PAGES = 2048  # 8 MiB a step with 4 KiB pages
RESTARTS_BEFORE_ONE_STEP = 3
LEDGER_TABLE = "stored_events"
Progress = Callable[[int, int], None]
"""Called with (pages copied, pages in all) after each step."""


class BackupError(Exception):
    """A backup or restore could not be made; the message is one line naming the path."""


class _Restarted(Exception):
    """The source changed under a stepped copy too often: copy it in one step."""


@dataclass(frozen=True)
class Copied:
    """What a backup or restore copied."""

    path: str
    pages: int
    bytes: int
    seconds: float
    one_step: bool = False  # the store was busy: the copy was taken in one step


def _connect(path: str, *, read_only: bool = False) -> sqlite3.Connection:
    uri = f"file:{Path(path).resolve()}" + ("?mode=ro" if read_only else "")
    connection = sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None)
    connection.execute("PRAGMA busy_timeout = 30000")
    return connection


def _check_ledger(connection: sqlite3.Connection, what: str) -> None:
    try:
        found = connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (LEDGER_TABLE,)
        ).fetchone()
    except sqlite3.DatabaseError as exc:
        raise BackupError(f"{what} is not an SQLite database ({exc})") from None
    if found is None:
        raise BackupError(f"{what} is not a ledger store (it has no {LEDGER_TABLE} table)")


def _quick_check(connection: sqlite3.Connection, what: str) -> None:
    rows = connection.execute("PRAGMA quick_check").fetchall()
    if rows != [("ok",)]:
        raise BackupError(f"{what} fails SQLite's integrity check: {rows[0][0]}")


def _copy(
    source: sqlite3.Connection,
    target: sqlite3.Connection,
    progress: Progress | None,
    step_pages: int,
) -> bool:
    """Copy ``source`` into ``target``; True when it had to be done in one step."""
    seen = {"remaining": -1, "restarts": 0}

    def stepped(status: int, remaining: int, total: int) -> None:
        if seen["remaining"] != -1 and remaining > seen["remaining"]:
            seen["restarts"] += 1  # a writer changed the source: the copy started over
            if seen["restarts"] >= RESTARTS_BEFORE_ONE_STEP:
                raise _Restarted()
        seen["remaining"] = remaining
        if progress is not None:
            progress(total - remaining, total)

    try:
        source.backup(target, pages=step_pages, progress=stepped, sleep=0)
        return False
    except _Restarted:
        source.backup(target, pages=-1)  # one step: one read snapshot, however busy
        return True


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_directory(path: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system syncs directories
        _sync(path)


def _size(connection: sqlite3.Connection) -> tuple[int, int]:
    pages = int(connection.execute("PRAGMA page_count").fetchone()[0])
    size = int(connection.execute("PRAGMA page_size").fetchone()[0])
    return pages, pages * size


def check_target(target: str) -> Path:
    """Where a backup may go: a new file in an existing, writable directory."""
    path = Path(target)
    if path.exists():
        raise BackupError(f"{target} already exists: a backup never overwrites, choose a new name")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise BackupError(f"cannot write {target}: the directory {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise BackupError(f"cannot write {target}: the directory {folder} is not writable")
    return path


def backup_store(
    source: str,
    target: str,
    *,
    progress: Progress | None = None,
    step_pages: int = STEP_PAGES,
) -> Copied:
    """Copy the live store at ``source`` to the new file ``target`` (see the module)."""
    started = time.monotonic()
    destination = check_target(target)
    if not Path(source).is_file():
        raise BackupError(f"no store at {source} (LEDGER_SQLITE_PATH)")
    partial = destination.with_name(f".{destination.name}.partial-{os.getpid()}")
    try:
        reader = _connect(source)
    except sqlite3.Error as exc:
        raise BackupError(f"cannot open the store {source}: {exc}") from None
    try:
        _check_ledger(reader, f"the store {source}")
        try:
            writer = _connect(str(partial))
        except sqlite3.Error as exc:
            raise BackupError(f"cannot write {target}: {exc}") from None
        try:
            one_step = _copy(reader, writer, progress, step_pages)
            writer.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
            _quick_check(writer, f"the copy {target}")
            pages, size = _size(writer)
        finally:
            writer.close()
        _sync(partial)
        os.replace(partial, destination)
        _sync_directory(destination.parent if str(destination.parent) else Path("."))
    except sqlite3.Error as exc:
        raise BackupError(f"cannot back up {source} to {target}: {exc}") from None
    except OSError as exc:
        raise BackupError(f"cannot write {target}: {exc.strerror or exc}") from None
    finally:
        reader.close()
        with contextlib.suppress(OSError):
            partial.unlink()
    return Copied(str(destination), pages, size, round(time.monotonic() - started, 3), one_step)


def restore_store(backup: str, target: str, *, progress: Progress | None = None) -> Copied:
    """Put the backup at ``backup`` back as the store at ``target`` (the ledger stopped)."""
    started = time.monotonic()
    if not Path(backup).is_file():
        raise BackupError(f"no backup at {backup}")
    folder = Path(target).parent if str(Path(target).parent) else Path(".")
    if not folder.is_dir():
        raise BackupError(f"cannot restore to {target}: the directory {folder} does not exist")
    try:
        reader = _connect(backup, read_only=True)
    except sqlite3.Error as exc:
        raise BackupError(f"cannot open the backup {backup}: {exc}") from None
    try:
        _check_ledger(reader, f"the backup {backup}")
        _quick_check(reader, f"the backup {backup}")
        writer = _connect(target)
        try:
            _copy(reader, writer, progress, STEP_PAGES)
            writer.execute("PRAGMA journal_mode = WAL")  # the store's own mode
            pages, size = _size(writer)
        finally:
            writer.close()
    except sqlite3.OperationalError as exc:
        raise BackupError(
            f"cannot restore to {target}: {exc} (stop every ledger process on it first)"
        ) from None
    except sqlite3.Error as exc:
        raise BackupError(f"cannot restore {backup} to {target}: {exc}") from None
    finally:
        reader.close()
    return Copied(target, pages, size, round(time.monotonic() - started, 3))
