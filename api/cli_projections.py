"""``ledger projections``: rebuild and check the views."""

from __future__ import annotations

from typing import Annotated

import typer

from api.cli_common import fail as _fail
from api.cli_common import one_line_errors as _one_line_errors

projections_app = typer.Typer(help="Rebuild and check the views.", no_args_is_help=True)


@projections_app.command("rebuild")
def projections_rebuild(
    view: Annotated[
        str | None, typer.Option("--view", help="status, due_work or find (default: all three).")
    ] = None,
    check: Annotated[
        bool, typer.Option("--check", help="Compare with the live views only; write nothing.")
    ] = False,
) -> None:
    """Fold every attempt stream again, compare with the live views, write the result."""
    with _one_line_errors():
        from rich.console import Console
        from rich.progress import Progress, TaskID

        from adapters.bootstrap import build_ledger
        from adapters.rebuild import VIEWS, attempt_ids, rebuild
        from adapters.settings import load_settings

        if view is not None and view not in VIEWS:
            _fail(f"--view must be one of: {', '.join(VIEWS)}")
        settings = load_settings()
        ledger = build_ledger(settings)
        try:
            total = sum(1 for _ in attempt_ids(ledger))
            for name in [view] if view else list(VIEWS):
                with Progress(console=Console(stderr=True)) as progress:
                    task = progress.add_task(f"rebuilding {name}", total=total)

                    def advance(n: int, bar: Progress = progress, t: TaskID = task) -> None:
                        bar.advance(t, n)

                    report = rebuild(ledger, name, write=not check, progress=advance)
                verb = "checked" if check else "rebuilt"
                typer.echo(
                    f"{name}: {verb} {report.total} attempts; "
                    f"{report.identical} identical to the live view, "
                    f"{len(report.changed)} differed"
                )
        finally:
            ledger.close()
