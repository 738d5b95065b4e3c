"""``ledger executors``: the registered executors, as start-up builds them, and
``ledger executors check``: what switching to them would do to pending work."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from api.cli_common import fail as _fail
from api.cli_common import one_line_errors as _one_line_errors

if TYPE_CHECKING:
    from rich.console import Console

    from adapters.settings import Settings

executors_app = typer.Typer(
    help="One line per executor: <capability> <build_digest> <delivery_mode> <kind> "
    "<state> (current, or draining: kept only for the work bound to it).",
    invoke_without_command=True,
)


def _print_executors(settings: Settings) -> list[Any]:
    """Build the registry exactly as start-up does and print one line per executor;
    returns its entries."""
    from adapters.executors.loader import load_executors

    loaded = load_executors(settings)
    try:
        entries = sorted(loaded.registry.entries(), key=lambda e: (e.capability, e.build_digest))
        for entry in entries:
            typer.echo(
                f"{entry.capability} {entry.build_digest} {entry.delivery_mode.value} "
                f"{entry.kind} {entry.state}"
            )
        if not entries:
            from rich.console import Console

            Console(stderr=True, soft_wrap=True).print(
                "note: no executors are registered; set LEDGER_EXECUTORS_FILE or install a plugin"
            )
        return entries
    finally:
        loaded.registry.close()


def _print_json(settings: Settings) -> None:
    """What ``GET /executors`` answers, read from the configured store's directory."""
    from adapters.bootstrap import build_ledger
    from api.cli_common import operator
    from api.service.executors import executor_listing

    ledger = build_ledger(settings)
    try:
        listing = executor_listing(ledger, operator())
        typer.echo(listing.model_dump_json(exclude_none=True))
    finally:
        ledger.close()


@executors_app.callback()
def executors(
    ctx: typer.Context,
    as_json: bool = typer.Option(
        False,
        "--json",
        help='Print {"items": [...]} as GET /api/conversational/executors answers it: '
        "capability, executor_build, delivery_mode, available (the configured store's "
        "directory allows the build), newest build first per capability.",
    ),
) -> None:
    """One line per registered executor: <capability> <build_digest> <delivery_mode>
    <kind> <current|draining>.

    Built exactly as `serve`, `worker` and `recover` build it (fakes when the
    settings allow them, entry points of `execution_ledger.executors`, and
    LEDGER_EXECUTORS_FILE). Every listed build runs here; new proposals name a
    `current` one (a `draining` build, marked `draining = true` in the file,
    only runs what is already bound to it). Register a build in the directory
    with its digest.
    """
    if ctx.invoked_subcommand is not None:
        return
    with _one_line_errors():
        from adapters.settings import load_settings

        if as_json:
            _print_json(load_settings())
        else:
            _print_executors(load_settings())


@executors_app.command("check")
def executors_check(
    allow_dropping: Annotated[
        bool,
        typer.Option(
            "--allow-dropping",
            help="Exit 0 even when pending work is bound to a build these executors drop "
            "(its attempts then wait, listed as waiting_for_build).",
        ),
    ] = False,
    file_only: Annotated[
        bool,
        typer.Option(
            "--file-only",
            help="Only parse the file and resolve its variables; do not read the store.",
        ),
    ] = False,
) -> None:
    """Check the executors as start-up would build them, against the store.

    Parses the executors file, resolves every env: variable and prints the
    digests (sending no request to any provider), then compares them with the
    directory (is each build registered, available, with the same delivery
    mode?) and with the pending work (queued and executing attempts, open
    presentations): what switching every worker to these executors would
    do. Exits 1 with one line naming the entry and the key when the file is
    wrong, and 1 when pending work is bound to a build they drop (keep its
    entry, marked `draining = true`, until nothing is bound to it) unless
    --allow-dropping, or when a build's delivery mode differs from the
    directory's. Reads the store through its indexes only.
    """
    with _one_line_errors():
        from rich.console import Console

        from adapters.settings import load_settings

        settings = load_settings()
        entries = _print_executors(settings)
        source = (
            f"LEDGER_EXECUTORS_FILE {settings.executors_file}"
            if settings.executors_file
            else "no executors file"
        )
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        if not file_only:
            _check_against_store(settings, entries, err, allow_dropping)
        err.print(
            f"ok: {len(entries)} executors ({source}); every env: variable resolved; "
            "no request was sent"
        )


def _check_against_store(
    settings: Settings, entries: list[Any], err: Console, allow_dropping: bool
) -> None:
    """Compare with the directory and the pending work; exit 1 on what would be lost."""
    from pathlib import Path

    embedded = settings.store == "sqlite" and settings.sqlite_path != ":memory:"
    if embedded and not Path(settings.sqlite_path).exists():
        err.print(f"note: no store at {settings.sqlite_path} yet: no work is pending")
        return
    report = _report(settings, entries)
    for line in report.lines():
        err.print(line)
    if report.mismatched:
        entry = report.mismatched[0]
        _fail(
            f"{entry.capability} {entry.build_digest} is {entry.delivery_mode.value} here and "
            "another delivery mode in the directory; fix one before switching"
        )
    if report.dropped and not allow_dropping:
        _fail(
            "switching to these executors drops builds that pending work is bound to; "
            "keep their entries (marked draining = true) until nothing is bound to them, "
            "or pass --allow-dropping"
        )


def _report(settings: Settings, entries: Any) -> Any:
    from adapters.bootstrap import build_backend
    from adapters.executors.rollover import compare
    from adapters.store import LedgerStore
    from adapters.system import SystemClock

    backend = build_backend(settings)
    try:
        return compare(entries, LedgerStore(backend.recorder), backend.views, SystemClock().now())
    finally:
        backend.close()
