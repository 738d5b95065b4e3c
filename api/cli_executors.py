"""``ledger executors``: the registered executors, as start-up builds them."""

from __future__ import annotations

import typer
from rich.console import Console

from adapters.settings import Settings, load_settings
from api.cli_common import one_line_errors as _one_line_errors

executors_app = typer.Typer(
    help="The registered executors: one line each, <capability> <build_digest> "
    "<delivery_mode> <kind>.",
    invoke_without_command=True,
)


def _print_executors(settings: Settings) -> int:
    """Build the registry exactly as start-up does and print one line per executor."""
    from adapters.executors.loader import load_executors

    loaded = load_executors(settings)
    try:
        entries = sorted(loaded.registry.entries(), key=lambda e: (e.capability, e.build_digest))
        for entry in entries:
            typer.echo(
                f"{entry.capability} {entry.build_digest} {entry.delivery_mode.value} {entry.kind}"
            )
        if not entries:
            Console(stderr=True, soft_wrap=True).print(
                "note: no executors are registered; set LEDGER_EXECUTORS_FILE or install a plugin"
            )
        return len(entries)
    finally:
        loaded.registry.close()


def _print_json(settings: Settings) -> None:
    """What ``GET /executors`` answers, read from the configured store's directory."""
    from adapters.bootstrap import build_ledger
    from api.cli_common import OPERATOR
    from api.service.executors import executor_listing

    ledger = build_ledger(settings)
    try:
        listing = executor_listing(ledger, OPERATOR)
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
    """One line per registered executor: <capability> <build_digest> <delivery_mode> <kind>.

    Built exactly as `serve`, `worker` and `recover` build it (fakes when the
    settings allow them, entry points of `execution_ledger.executors`, and
    LEDGER_EXECUTORS_FILE). Register a build in the directory with its digest.
    """
    if ctx.invoked_subcommand is not None:
        return
    with _one_line_errors():
        if as_json:
            _print_json(load_settings())
        else:
            _print_executors(load_settings())


@executors_app.command("check")
def executors_check() -> None:
    """Parse the executors file, resolve every env: variable, print the digests.

    Sends no request to any provider. Exits 1 with one line naming the entry and
    the key when something is wrong.
    """
    with _one_line_errors():
        settings = load_settings()
        count = _print_executors(settings)
        source = (
            f"LEDGER_EXECUTORS_FILE {settings.executors_file}"
            if settings.executors_file
            else "no executors file"
        )
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            f"ok: {count} executors ({source}); every env: variable resolved; no request was sent"
        )
