"""What every ``ledger`` command shares: one line on stderr and exit 1 for any failure.

Every ``ledger`` process imports this module and the command modules, so they
import only typer at their top: each command imports what it needs when it
runs (``ledger --help`` loads no settings, no store and no web framework)."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any, NoReturn

import typer

if TYPE_CHECKING:
    from adapters.settings import Settings
    from api.service.principal import Principal
    from api.signals import StopSignals

START_UP_GC_THRESHOLD = 50_000
_DEFAULT_GC_THRESHOLDS: list[tuple[int, int, int]] = []


def collect_less_during_start_up() -> None:
    """Run the cyclic garbage collector every 50,000 allocations instead of 700
    until ``start_up_over``. Start-up (imports above all) allocates hundreds of
    thousands of objects that all live on: at the default threshold ``ledger
    serve`` ran about 260 collections on its way to serving, some 0.2 s of CPU
    that freed next to nothing."""
    thresholds = gc.get_threshold()
    _DEFAULT_GC_THRESHOLDS.append(thresholds)
    gc.set_threshold(START_UP_GC_THRESHOLD, *thresholds[1:])


def start_up_over() -> None:
    """A long-running command serves: back to the default collection thresholds."""
    if _DEFAULT_GC_THRESHOLDS:
        gc.set_threshold(*_DEFAULT_GC_THRESHOLDS.pop())


@cache
def operator() -> Principal:
    """Who a ``ledger`` command calls the services as: whoever runs it holds the
    store's credentials, so it is an admin."""
    from api.service.principal import Principal, Role

    return Principal(subject="ledger-cli", role=Role.ADMIN)


def stderr_line(text: str) -> None:
    """``text`` on stderr as one soft-wrapped line, no markup or highlighting."""
    from rich.console import Console
    from rich.text import Text

    Console(stderr=True, soft_wrap=True, highlight=False).print(Text(text))


def fail(message: str, code: int = 1) -> NoReturn:
    """Print one line on stderr and exit ``code``."""
    from rich.console import Console
    from rich.text import Text

    line = Text("error: ", style="bold red")
    line.append(" ".join(message.split()))
    Console(stderr=True, soft_wrap=True, highlight=False).print(line)
    raise typer.Exit(code)


def warn_unknown_variables(environ: Mapping[str, str] | None = None) -> None:
    """One warning line on stderr per ``LEDGER_*`` variable that looks like a
    misspelled setting (it would be ignored); never a failure."""
    from adapters.setting_names import unknown_variable_warnings

    for warning in unknown_variable_warnings(os.environ if environ is None else environ):
        stderr_line(warning)


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn every failure into one line on stderr (secrets never reach messages)."""
    try:
        yield
    except typer.Exit:
        raise
    except Exception as exc:
        fail(one_line(exc))


def one_line(exc: Exception) -> str:
    """What ``one_line_errors`` says of ``exc``."""
    from adapters.settings import SettingsError
    from domain.errors import LedgerError

    if isinstance(exc, SettingsError):
        return str(exc)
    if isinstance(exc, LedgerError):
        return f"{exc.code}: {exc.detail}"
    if isinstance(exc, ConnectionError | TimeoutError):
        return f"cannot connect: {type(exc).__name__}: {exc}"
    origin = type(exc).__module__.split(".")[0]
    if origin in {"botocore", "boto3"}:
        return f"AWS: {type(exc).__name__}: {exc}"
    return f"{type(exc).__name__}: {exc}"


def note_without_executors(ledger: Any) -> None:
    """Say so at start-up when nothing can execute (every approval would be refused)."""
    if not ledger.registry.entries():
        from rich.console import Console

        Console(stderr=True, soft_wrap=True).print(
            "note: no executors are registered, so every approval is refused; set "
            "LEDGER_EXECUTORS_FILE or install a plugin (see `ledger executors`)"
        )


def stop_gracefully(
    stopping: StopSignals,
    settings: Settings,
    runtime: Any,
    http: Any,
    end_waits: Callable[[], None] | None = None,
) -> None:
    """Lease nothing more, let the calls and requests in flight finish within the
    grace period (waits answer what they see once the worker has recorded its
    calls: ``end_waits``), say what was left to recovery (``ledger serve``,
    ``ledger worker``, ``ledger mcp --transport http``)."""
    import time

    grace = settings.shutdown_grace_seconds
    began = time.monotonic()
    if stopping.received is not None:
        typer.echo(
            f"ledger: {stopping.received.name}: stopping; leasing nothing more, letting "
            f"what is in flight finish (at most {grace:g} s; a second signal stops at once)"
        )
    if http is not None:
        http.shutdown()  # stops accepting now; requests in flight go on meanwhile
    left = 0
    if runtime is not None:
        left = runtime.stop(grace=grace).left_running
    if end_waits is not None:
        end_waits()
    if http is not None:
        http.wait(grace - (time.monotonic() - began))
    if runtime is None:
        typer.echo("ledger: stopped")
    elif left:
        typer.echo(f"ledger: stopped; {left} attempt(s) still running were left to recovery")
    else:
        typer.echo("ledger: stopped; every attempt in flight was recorded")
