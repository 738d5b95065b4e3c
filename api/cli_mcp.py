"""``ledger mcp``: the ledger as an MCP server for agents, over stdio or
streamable HTTP, in front of the downstream servers of the executors file."""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from api.cli_common import fail, one_line_errors, start_up_over, stop_gracefully


class Transport(StrEnum):
    STDIO = "stdio"
    HTTP = "http"


def mcp_command(
    transport: Annotated[
        Transport,
        typer.Option(help="stdio: the client starts this process; http: streamable HTTP at /mcp."),
    ] = Transport.STDIO,
    config: Annotated[
        Path | None,
        typer.Option(
            help="The MCP server's file (TOML): proposer, actors, presenter, capabilities "
            "(docs/mcp.md)."
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="Interface to listen on (http).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port (http).")] = 8100,
    worker: Annotated[
        bool,
        typer.Option(
            "--worker/--no-worker",
            help="Also run the worker and the recovery loop here (they run the gated "
            "calls once approved); --no-worker when `ledger serve` runs them.",
        ),
    ] = True,
) -> None:
    """Serve the ledger's MCP tools (list_capabilities, propose_action,
    get_action_status) and the gated tools of the downstream MCP servers of
    LEDGER_EXECUTORS_FILE, on the store the LEDGER_* settings name.

    Over stdio the client is trusted as the file's proposer; over http every
    request needs a proposer bearer token. Presentation tokens go to the
    file's presenter (the actors' channel), never to the agent.

    Over http, SIGTERM or Ctrl-C stops it gracefully, as `ledger serve`: no
    new connections, nothing more leased, the executor calls in flight
    finish and are recorded (at most LEDGER_SHUTDOWN_GRACE_SECONDS), open
    get_action_status waits then answer the status they see, and it exits 0;
    a second signal exits at once."""
    with one_line_errors():
        from adapters.backend import PreflightError
        from adapters.bootstrap import build_ledger, preflight
        from adapters.logs import configure_logging
        from adapters.runtime import build_runtime
        from adapters.settings import load_settings
        from api.http.auth import TokenVerifier
        from api.http.server import HttpServer, ServeLimits
        from api.mcp.config import load_config
        from api.mcp.gateway import Gateway
        from api.mcp.presenter import WebhookPresenter
        from api.mcp.server import ToolHandlers, bearer_principal, build_server, stdio_principal
        from api.mcp.tools import McpContext
        from api.mcp.transports import MCP_PATH, http_app, serve_stdio
        from api.service.attempts import end_waits
        from api.signals import StopSignals

        settings = load_settings()
        checked = load_config(config, os.environ)
        verifier = TokenVerifier.from_settings(settings) if transport is Transport.HTTP else None
        if worker:
            try:
                preflight(settings)
            except PreflightError as exc:
                fail(str(exc))
        configure_logging(settings.effective_log_format.value)  # on stderr: stdout may be MCP's
        ledger = build_ledger(settings)
        presenter = None
        if checked.file.presenter is not None and checked.presenter_secret is not None:
            presenter = WebhookPresenter(checked.file.presenter, checked.presenter_secret)
        ctx = McpContext(ledger, checked, presenter)
        principal_of: Any = (
            stdio_principal(checked.file.proposer) if verifier is None else bearer_principal
        )
        server = build_server(ToolHandlers(ctx, Gateway.of(ctx), principal_of))
        runtime = build_runtime(ledger) if worker else None
        try:
            if runtime is not None:
                runtime.start()
            if verifier is None:
                print(
                    f"ledger mcp on stdio as proposer {checked.file.proposer} "
                    f"(store: {ledger.backend.describe()})",
                    file=sys.stderr,
                    flush=True,
                )
                start_up_over()
                serve_stdio(server)
                return
            http = HttpServer(
                http_app(server, verifier, host=host, port=port),
                host=host,
                port=port,
                limits=ServeLimits.from_settings(settings),
                grace=settings.shutdown_grace_seconds,
            )
            typer.echo(
                f"ledger mcp on http://{host}:{port}{MCP_PATH} "
                f"(store: {ledger.backend.describe()}; proposer bearer tokens)"
            )
            with StopSignals() as stopping:
                if not http.start():
                    raise typer.Exit(1)
                start_up_over()
                stopping.wait(alive=lambda: http.running)
                stop_gracefully(stopping, settings, runtime, http, lambda: end_waits(ledger))
        finally:
            if runtime is not None and not runtime.draining.is_set():
                runtime.stop(grace=settings.shutdown_grace_seconds)
            if presenter is not None:
                presenter.close()
            ledger.close()


def register(app: typer.Typer) -> None:
    """Add ``mcp`` to the ``ledger`` command."""
    app.command("mcp")(mcp_command)
