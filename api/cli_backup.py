"""``ledger backup`` and ``ledger restore``: a consistent copy of the embedded store
while it serves, and a restore that can never repeat an effect (I17).

The procedures, on SQLite and on DynamoDB (point-in-time recovery), are in
docs/backup.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from api.cli_common import fail, one_line_errors

LARGE_PAGES = 16_384  # 64 MiB of 4 KiB pages: progress is shown from there
MODES = (
    ("provider_idempotency", "retried with their key"),
    ("correlation_lookup", "looked up first"),
    ("operator_reconciliation_only", "outcome_unknown, for an admin"),
)


def backup_command(
    path: Annotated[str, typer.Argument(help="The new file to write (never overwritten).")],
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--no-progress",
            help="Show progress on stderr (default: for a store over 64 MiB).",
        ),
    ] = None,
) -> None:
    """Copy the embedded store to PATH, consistently, while the ledger serves.

    SQLite's online backup API takes one consistent snapshot; the copy is checked,
    synced and renamed into place only when whole. On DynamoDB the table's
    point-in-time recovery is the backup (see docs/backup.md).
    """
    with one_line_errors():
        from rich.console import Console

        from adapters.restore import back_up
        from adapters.settings import load_settings
        from adapters.sqlite.backup import BackupError

        settings = load_settings()
        err = Console(stderr=True, highlight=False)
        shown = [-1]

        def report(done: int, total: int) -> None:
            if not (progress or (progress is None and total >= LARGE_PAGES)):
                return
            percent = 100 * done // max(total, 1)
            if percent // 10 > shown[0]:
                shown[0] = percent // 10
                err.print(f"backup: {percent}% ({done} of {total} pages)")

        try:
            copied = back_up(settings, path, progress=report)
        except BackupError as exc:
            fail(str(exc))
        busy = "; the store was busy, so the rest was copied in one step" if copied.one_step else ""
        typer.echo(
            f"backup of {settings.sqlite_path} written to {copied.path}: "
            f"{copied.bytes / 1_048_576:.1f} MiB ({copied.pages} pages) in {copied.seconds} s"
            + busy
        )


def restore_command(
    backup: Annotated[
        str | None,
        typer.Argument(help="A file written by `ledger backup` (the embedded store)."),
    ] = None,
    mark: Annotated[
        bool,
        typer.Option(
            "--mark",
            help="The store was restored by other means (a DynamoDB point-in-time restore, "
            "a file copied back): only record it and settle what it may have lost.",
        ),
    ] = False,
    checkpoint: Annotated[
        str | None,
        typer.Option(
            "--checkpoint",
            help="The last audit checkpoint taken before the restore: say what it lost.",
        ),
    ] = None,
) -> None:
    """Put a backup back; every attempt unsettled in it counts as possibly dispatched.

    Stop every ledger process on the store first. A restored store can be older
    than what happened: provider_idempotency attempts are retried with their key,
    correlation_lookup attempts are looked up before anything else, operator-only
    attempts become outcome_unknown.
    Nothing is dispatched blindly. The store the backup replaces is kept beside
    it.
    """
    with one_line_errors():
        from adapters.restore import mark_restored, restore_backup
        from adapters.settings import load_settings
        from adapters.sqlite.backup import BackupError

        if (backup is None) == (not mark):
            fail("give a backup file to restore, or --mark when the store was restored already")
        if checkpoint is not None and not Path(checkpoint).is_file():
            fail(f"--checkpoint: no digest at {checkpoint}")
        settings = load_settings()
        try:
            if backup is not None:
                done = restore_backup(settings, backup, checkpoint=checkpoint)
            else:
                done = mark_restored(settings, checkpoint=checkpoint)
        except BackupError as exc:
            fail(str(exc))
        if done.copied is not None:
            typer.echo(f"restored {backup} to {done.copied.path}")
        if done.kept is not None:
            typer.echo(f"the store it replaced is kept at {done.kept}")
        if done.behind is not None:
            typer.echo(f"what the restore lost: {done.behind.message()}")
            for line in done.behind.lines():
                typer.echo(f"  {line}")
        marked = done.report.marked
        parts = [f"{marked[mode]} {mode} ({what})" for mode, what in MODES if marked[mode]]
        typer.echo(
            f"restore {done.restore_id} recorded: {done.report.total} attempts unsettled at the "
            "restored point are treated as possibly dispatched"
            + (": " + ", ".join(parts) if parts else "")
        )


def register(app: typer.Typer) -> None:
    """Add ``backup`` and ``restore`` to the ``ledger`` command."""
    app.command("backup")(backup_command)
    app.command("restore")(restore_command)
