"""The ``ledger`` command: serve the API, mint development tokens, manage the table.

Every command reads the same settings (``load_settings``) and fails with one
line on stderr and a non-zero exit status, never a traceback (``cli_common``).
The command groups live beside this module (``cli_audit``, ``cli_channels``, ...)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from api.cli_audit import audit_app
from api.cli_backup import register as register_backup_commands
from api.cli_channels import channels_app
from api.cli_common import (
    collect_less_during_start_up,
    note_without_executors,
    start_up_over,
    stop_gracefully,
    warn_unknown_variables,
)
from api.cli_common import fail as _fail
from api.cli_common import one_line_errors as _one_line_errors
from api.cli_dynamodb import dynamodb_app
from api.cli_executors import executors_app
from api.cli_grants import grants_app
from api.cli_mcp import register as register_mcp_command
from api.cli_policies import policies_app
from api.cli_projections import projections_app
from api.cli_token import register as register_token_command
from api.cli_webhooks import webhooks_app
from api.signals import StopSignals

if TYPE_CHECKING:
    from adapters.settings import Settings

app = typer.Typer(
    name="ledger",
    help="Event-sourced execution ledger: approved external actions, executed at most once.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from api.version import package_version

        typer.echo(f"ledger {package_version()}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=_print_version,
            help="Print the installed version and exit.",
        ),
    ] = False,
) -> None:
    """Event-sourced execution ledger: approved external actions, executed at most once."""
    warn_unknown_variables()


app.add_typer(dynamodb_app, name="dynamodb")
app.add_typer(projections_app, name="projections")
app.add_typer(executors_app, name="executors")
app.add_typer(audit_app, name="audit")
app.add_typer(webhooks_app, name="webhooks")
app.add_typer(channels_app, name="channels")
app.add_typer(policies_app, name="policies")
app.add_typer(grants_app, name="grants")


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port.")] = 8000,
    worker: Annotated[
        bool,
        typer.Option("--worker/--no-worker", help="Also run the worker and the recovery loop."),
    ] = True,
) -> None:
    """Serve the HTTP API (OpenAPI at /docs), with the worker and recovery, on the store.

    SIGTERM or Ctrl-C stops it gracefully: no new connections, nothing more
    leased, the requests and executor calls in flight finish and are recorded
    (at most LEDGER_SHUTDOWN_GRACE_SECONDS; open ?wait= long polls then answer
    the status they see), then it exits 0; a second signal exits at once."""
    with _one_line_errors():
        from adapters.audit.checkpoints import checkpoint_loop
        from adapters.bootstrap import build_ledger
        from adapters.runtime import build_runtime
        from adapters.settings import load_settings
        from api.http.app import create_app
        from api.http.server import HttpServer, ServeLimits
        from api.service.attempts import end_waits

        settings = load_settings()
        if worker:
            _preflight(settings)
        _configure_logging(settings)
        ledger = _observed(build_ledger(settings))
        note_without_executors(ledger)
        runtime = build_runtime(ledger) if worker else None
        api = create_app(settings, ledger=ledger)
        checkpoints = checkpoint_loop(settings, ledger.store, ledger.clock)
        http = HttpServer(
            api,
            host=host,
            port=port,
            limits=ServeLimits.from_settings(settings),
            grace=settings.shutdown_grace_seconds,
        )
        mode = "API, worker and recovery" if worker else "API only"
        typer.echo(
            f"ledger {mode} on http://{host}:{port} "
            f"(store: {ledger.backend.describe()}; docs at /docs, console at /console)"
        )
        _start_metrics_listener(ledger)
        if checkpoints is not None:
            checkpoints.run_once(raise_errors=True)  # a bad key or directory stops start-up
            checkpoints.start()
        try:
            with StopSignals() as stopping:
                if runtime is not None:
                    runtime.start()
                if not http.start():
                    raise typer.Exit(1)  # uvicorn said why (the port in use, ...)
                start_up_over()
                stopped = stopping.wait(alive=lambda: http.running)
                stop_gracefully(stopping, settings, runtime, http, lambda: end_waits(ledger))
                if not stopped:
                    raise typer.Exit(1)  # the server ended by itself
        finally:
            if checkpoints is not None:
                checkpoints.stop()
            if runtime is not None and not runtime.draining.is_set():
                runtime.stop(grace=0)
            ledger.close()


def _preflight(settings: Settings) -> None:
    """Before anything is opened: what the loops read must answer (one line naming
    the fix)."""
    from adapters.backend import PreflightError
    from adapters.bootstrap import preflight

    try:
        preflight(settings)
    except PreflightError as exc:
        _fail(str(exc))


def _configure_logging(settings: Settings) -> None:
    """Text or JSON lines (LEDGER_LOG_FORMAT), every record through the redaction filter."""
    from adapters.logs import configure_logging

    configure_logging(settings.effective_log_format.value)


def _observed(ledger: Any) -> Any:
    """The ledger with a tracer when the OTEL_* settings configure an exporter."""
    from adapters.tracing import tracer_from_environment

    try:
        ledger.tracer = tracer_from_environment()
    except ValueError as exc:
        _fail(str(exc))
    return ledger


def _start_metrics_listener(ledger: Any) -> None:
    """LEDGER_METRICS_LISTEN: the metrics page on its own address, for a scraper."""
    address = ledger.settings.metrics_address
    if address is None:
        return
    from prometheus_client import start_http_server

    host, port = address
    try:
        start_http_server(port, addr=host, registry=ledger.metrics.registry)
    except OSError as exc:
        _fail(f"LEDGER_METRICS_LISTEN: cannot listen on {host}:{port} ({exc.strerror})")
    typer.echo(f"metrics on http://{ledger.settings.metrics_listen}/metrics")


@app.command("worker")
def worker_command() -> None:
    """Run the worker (fed by the store's notification log or stream) and recovery.

    SIGTERM or Ctrl-C stops it gracefully: nothing more is leased, the executor
    calls in flight finish and are recorded (at most LEDGER_SHUTDOWN_GRACE_SECONDS),
    then it exits 0; a second signal exits at once."""
    with _one_line_errors():
        from adapters.bootstrap import build_ledger
        from adapters.runtime import build_runtime
        from adapters.settings import load_settings

        settings = load_settings()
        _preflight(settings)
        _configure_logging(settings)
        ledger = _observed(build_ledger(settings))
        note_without_executors(ledger)
        runtime = build_runtime(ledger)
        _start_metrics_listener(ledger)
        typer.echo(
            f"ledger worker running (store: {ledger.backend.describe()}); "
            "SIGTERM or Ctrl-C stops it gracefully"
        )
        try:
            _run_until_interrupted(runtime, settings)
        finally:
            ledger.close()


def _run_until_interrupted(runtime: Any, settings: Settings) -> None:
    """Start the runtime's loops and block until SIGTERM or Ctrl-C; then stop
    them gracefully (a second signal exits at once)."""
    with StopSignals() as stopping:
        runtime.start()
        start_up_over()
        try:
            stopping.wait()
        finally:
            stop_gracefully(stopping, settings, runtime, None)


@app.command("recover")
def recover_command(
    once: Annotated[bool, typer.Option("--once", help="Run one recovery tick and exit.")] = False,
) -> None:
    """Run recovery over the due-work index (every LEDGER_RECOVERY_INTERVAL_SECONDS)."""
    with _one_line_errors():
        from adapters.bootstrap import build_ledger
        from adapters.runtime import Runtime
        from adapters.settings import load_settings
        from domain.services.recovery import RecoveryReport, run_recovery

        settings = load_settings()
        if not settings.execution_enabled:
            _fail("execution is disabled (LEDGER_EXECUTION_ENABLED=false); recovery leases nothing")
        ledger = _observed(build_ledger(settings))

        def show(report: RecoveryReport) -> None:
            outcomes = ", ".join(f"{k}={v}" for k, v in sorted(report.outcomes.items()))
            typer.echo(
                f"recovery: examined {report.examined} due attempts"
                + (f" ({outcomes})" if outcomes else "")
            )

        try:
            if once:
                show(run_recovery(ledger.make_worker()))
                return
            _configure_logging(settings)
            _run_until_interrupted(
                Runtime(
                    ledger,
                    None,
                    recovery_interval=settings.recovery_interval_seconds,
                    on_recovery=show,
                ),
                settings,
            )
        finally:
            ledger.close()


@app.command()
def demo() -> None:
    """Tell the whole story on a throwaway embedded store: approve, execute, recover, resolve."""
    with _one_line_errors():
        from rich.console import Console

        from api.demo import run_demo

        run_demo(Console(highlight=False))


@app.command("fake-executors")
def fake_executors() -> None:
    """One line per fake executor: <capability> <build_digest> <delivery_mode>."""
    with _one_line_errors():
        from rich.console import Console

        from adapters.executors.fake import FAKE_CAPABILITIES, fake_build_digest
        from adapters.settings import load_settings

        settings = load_settings()
        for capability, mode in FAKE_CAPABILITIES.items():
            typer.echo(f"{capability} {fake_build_digest(capability)} {mode.value}")
        if not settings.fake_executors_enabled:
            Console(stderr=True).print("note: fake executors are disabled by the settings")


register_token_command(app)
register_backup_commands(app)
register_mcp_command(app)


def main() -> None:
    """Entry point of the ``ledger`` script."""
    collect_less_during_start_up()
    app(prog_name="ledger")
