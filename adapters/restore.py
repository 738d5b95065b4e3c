"""Putting a backup back, and recording that a store was put back (I17).

``restore_backup`` (the embedded store) keeps the store it replaces beside it,
copies the backup in (``adapters.sqlite.backup``), then does what
``mark_restored`` does for any store (a DynamoDB table restored to a point in
time, a file copied back by other means): it records the restore in the
restore log and settles it, so that every attempt unsettled at the restored
point is treated as possibly dispatched before anything leases it
(``domain.services.restore``). Given the last audit checkpoint taken before
the restore, it also says what the restore lost.

Every ledger process on the store must be stopped first: a running process
keeps what it read (its read cache, its leases) from the store it had.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adapters.audit.digests import Behind, load_digest, verify_ledger
from adapters.bootstrap import build_ledger
from adapters.settings import Settings, StoreKind
from adapters.sqlite.backup import BackupError, Copied, Progress, backup_store, restore_store
from domain.restore import RestoreSource
from domain.services.restore import RestoreReport, record_restore, settle_restore


@dataclass(frozen=True)
class Restored:
    """What a restore did."""

    restore_id: str
    report: RestoreReport
    behind: Behind | None = None
    copied: Copied | None = None
    kept: str | None = None  # where the store the backup replaced is kept


def _behind(ledger: Any, checkpoint: str | None) -> Behind | None:
    if checkpoint is None:
        return None
    verdict = verify_ledger(ledger.store, load_digest(checkpoint))
    if verdict.ok:
        return None
    if verdict.behind is None:
        raise BackupError(
            f"the store does not extend the checkpoint {checkpoint} in a way a restore "
            f"explains: {verdict.message}"
        )
    return verdict.behind


def mark_restored(
    settings: Settings,
    *,
    source: RestoreSource = RestoreSource.MARK,
    checkpoint: str | None = None,
    **ledger_options: Any,
) -> Restored:
    """Record that the store was restored, and settle what it may have lost."""
    ledger = build_ledger(settings, **ledger_options)
    try:
        behind = _behind(ledger, checkpoint)
        ctx = ledger.context
        restore_id = record_restore(
            ctx, source=source, lost=behind.summary() if behind is not None else None
        )
        report = settle_restore(ctx, ledger.worker_policy(), restore_id)
    finally:
        if not ledger_options:
            ledger.close()
    return Restored(restore_id, report, behind)


def back_up(settings: Settings, target: str, *, progress: Progress | None = None) -> Copied:
    """A consistent copy of the embedded store at ``target``, while it serves."""
    if settings.store is not StoreKind.SQLITE:
        raise BackupError(
            "ledger backup copies the embedded store (LEDGER_STORE=sqlite); a DynamoDB "
            "table is backed up by its point-in-time recovery (docs/backup.md)"
        )
    return backup_store(settings.sqlite_path, target, progress=progress)


def restore_backup(settings: Settings, backup: str, *, checkpoint: str | None = None) -> Restored:
    """Put the backup ``backup`` back as the embedded store, then ``mark_restored``."""
    if settings.store is not StoreKind.SQLITE:
        raise BackupError(
            "a backup file restores the embedded store (LEDGER_STORE=sqlite); after a "
            "DynamoDB point-in-time restore run `ledger restore --mark` on the new table"
        )
    target = settings.sqlite_path
    kept = None
    if Path(target).exists():
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        kept = f"{target}.before-restore-{stamp}-{os.getpid()}"
        backup_store(target, kept)  # nothing is lost: the replaced store stays beside it
    copied = restore_store(backup, target)
    marked = mark_restored(settings, source=RestoreSource.COMMAND, checkpoint=checkpoint)
    return Restored(marked.restore_id, marked.report, marked.behind, copied, kept)
