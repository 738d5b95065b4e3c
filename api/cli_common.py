"""What every ``ledger`` command shares: one line on stderr and exit 1 for any failure."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from adapters.settings import SettingsError, unknown_variable_warnings
from api.service.principal import Principal, Role
from domain.errors import LedgerError

OPERATOR = Principal(subject="ledger-cli", role=Role.ADMIN)
"""Who a ``ledger`` command calls the services as: whoever runs it holds the
store's credentials, so it is an admin."""


def fail(message: str) -> NoReturn:
    """Print one line on stderr and exit 1."""
    line = Text("error: ", style="bold red")
    line.append(" ".join(message.split()))
    Console(stderr=True, soft_wrap=True, highlight=False).print(line)
    raise typer.Exit(1)


def warn_unknown_variables(environ: Mapping[str, str] | None = None) -> None:
    """One warning line on stderr per ``LEDGER_*`` variable that looks like a
    misspelled setting (it would be ignored); never a failure."""
    for warning in unknown_variable_warnings(os.environ if environ is None else environ):
        Console(stderr=True, soft_wrap=True, highlight=False).print(Text(warning))


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn every failure into one line on stderr (secrets never reach messages)."""
    try:
        yield
    except typer.Exit:
        raise
    except SettingsError as exc:
        fail(str(exc))
    except LedgerError as exc:
        fail(f"{exc.code}: {exc.detail}")
    except (ConnectionError, TimeoutError) as exc:
        fail(f"cannot connect: {type(exc).__name__}: {exc}")
    except Exception as exc:
        origin = type(exc).__module__.split(".")[0]
        if origin in {"botocore", "boto3"}:
            fail(f"AWS: {type(exc).__name__}: {exc}")
        fail(f"{type(exc).__name__}: {exc}")


def note_without_executors(ledger: Any) -> None:
    """Say so at start-up when nothing can execute (every approval would be refused)."""
    if not ledger.registry.entries():
        Console(stderr=True, soft_wrap=True).print(
            "note: no executors are registered, so every approval is refused; set "
            "LEDGER_EXECUTORS_FILE or install a plugin (see `ledger executors`)"
        )
