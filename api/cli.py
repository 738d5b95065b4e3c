"""The ``ledger`` command: serve the API, mint development tokens, manage the table.

Every command reads the same settings (``load_settings``) and fails with one
line on stderr and a non-zero exit status, never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from adapters.settings import Environment, Settings, SettingsError, StoreKind, load_settings
from api.cli_audit import SHOW, audit_app
from api.cli_webhooks import webhooks_app
from api.http.auth import DEFAULT_TTL_SECONDS, Role, mint_token
from domain.errors import LedgerError
from domain.spec import ATTEMPT_ID_PREFIX

MAX_TOKEN_TTL_SECONDS = 30 * 86400

app = typer.Typer(
    name="ledger",
    help="Event-sourced execution ledger: approved external actions, executed at most once.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
dynamodb_app = typer.Typer(help="Manage the DynamoDB table.", no_args_is_help=True)
app.add_typer(dynamodb_app, name="dynamodb")
projections_app = typer.Typer(help="Rebuild and check the views.", no_args_is_help=True)
app.add_typer(projections_app, name="projections")
executors_app = typer.Typer(
    help="The registered executors: one line each, <capability> <build_digest> "
         "<delivery_mode> <kind>.",
    invoke_without_command=True)
app.add_typer(executors_app, name="executors")
app.add_typer(audit_app, name="audit")
app.add_typer(webhooks_app, name="webhooks")


def _fail(message: str) -> NoReturn:
    """Print one line on stderr and exit 1."""
    line = Text("error: ", style="bold red")
    line.append(" ".join(message.split()))
    Console(stderr=True, soft_wrap=True, highlight=False).print(line)
    raise typer.Exit(1)


@contextmanager
def _one_line_errors() -> Iterator[None]:
    """Turn every failure into one line on stderr (secrets never reach messages)."""
    try:
        yield
    except typer.Exit:
        raise
    except SettingsError as exc:
        _fail(str(exc))
    except LedgerError as exc:
        _fail(f"{exc.code}: {exc.detail}")
    except (ConnectionError, TimeoutError) as exc:
        _fail(f"cannot connect: {type(exc).__name__}: {exc}")
    except Exception as exc:
        origin = type(exc).__module__.split(".")[0]
        if origin in {"botocore", "boto3"}:
            _fail(f"AWS: {type(exc).__name__}: {exc}")
        _fail(f"{type(exc).__name__}: {exc}")


STREAMS_UNREACHABLE = (
    "cannot reach the DynamoDB Streams endpoint {url} ({error}); set "
    "AWS_ENDPOINT_URL_DYNAMODB_STREAMS (on a local emulator, the same URL as "
    "AWS_ENDPOINT_URL_DYNAMODB)"
)


def _check_streams_endpoint(settings: Settings) -> None:
    """On DynamoDB, the worker and the projector read the table's stream: fail at
    start-up, in one line naming the variable, when its endpoint does not answer."""
    if settings.store is not StoreKind.DYNAMODB:
        return
    import boto3
    from botocore.exceptions import (
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        ReadTimeoutError,
    )

    from adapters.dynamodb.client import client_config

    client = boto3.client("dynamodbstreams",
                          config=client_config(connect_timeout=3, read_timeout=5))
    try:
        client.list_streams(Limit=1)
    except (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError,
            ConnectionClosedError) as exc:
        _fail(STREAMS_UNREACHABLE.format(url=client.meta.endpoint_url,
                                         error=type(exc).__name__))
    finally:
        client.close()


def _describe_store(settings: Settings) -> str:
    if settings.store is StoreKind.SQLITE:
        return f"sqlite {settings.sqlite_path}"
    if settings.store is StoreKind.DYNAMODB:
        return f"dynamodb table {settings.dynamodb_table}"
    return "memory (nothing is kept after exit)"


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port.")] = 8000,
    worker: Annotated[bool, typer.Option(
        "--worker/--no-worker", help="Also run the worker and the recovery loop.")] = True,
) -> None:
    """Serve the HTTP API (OpenAPI at /docs), with the worker and recovery, on the store."""
    with _one_line_errors():
        from adapters.audit.checkpoints import checkpoint_loop
        from adapters.bootstrap import build_ledger
        from adapters.runtime import build_runtime
        from api.http.app import create_app
        from api.http.server import ServeLimits, serve_http

        settings = load_settings()
        if worker:
            _check_streams_endpoint(settings)
        _configure_logging(settings)
        ledger = _observed(build_ledger(settings))
        _note_without_executors(ledger)
        runtime = build_runtime(ledger) if worker else None
        api = create_app(settings, ledger=ledger)
        checkpoints = checkpoint_loop(settings, ledger.store, ledger.clock)
        mode = "API, worker and recovery" if worker else "API only"
        typer.echo(f"ledger {mode} on http://{host}:{port} "
                   f"(store: {_describe_store(settings)}; docs at /docs, console at /console)")
        _start_metrics_listener(ledger)
        if checkpoints is not None:
            checkpoints.run_once(raise_errors=True)  # a bad key or directory stops start-up
            checkpoints.start()
        if runtime is not None:
            runtime.start()
        try:
            serve_http(api, host=host, port=port, limits=ServeLimits(
                header_timeout=settings.http_header_timeout_seconds,
                body_timeout=settings.http_body_timeout_seconds,
                keep_alive_timeout=settings.http_keep_alive_seconds,
                max_connections=settings.http_max_connections,
            ))
        finally:
            if checkpoints is not None:
                checkpoints.stop()
            if runtime is not None:
                runtime.stop()
            ledger.close()


def _note_without_executors(ledger: Any) -> None:
    """Say so at start-up when nothing can execute (every approval would be refused)."""
    if not ledger.registry.entries():
        Console(stderr=True, soft_wrap=True).print(
            "note: no executors are registered, so every approval is refused; set "
            "LEDGER_EXECUTORS_FILE or install a plugin (see `ledger executors`)")


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
    """Run the worker (fed by the store's notification log or stream) and recovery."""
    with _one_line_errors():
        from adapters.bootstrap import build_ledger
        from adapters.runtime import build_runtime

        settings = load_settings()
        _check_streams_endpoint(settings)
        _configure_logging(settings)
        ledger = _observed(build_ledger(settings))
        _note_without_executors(ledger)
        runtime = build_runtime(ledger)
        _start_metrics_listener(ledger)
        typer.echo(f"ledger worker running (store: {_describe_store(settings)}); Ctrl-C stops")
        try:
            _run_until_interrupted(runtime)
        finally:
            ledger.close()


def _run_until_interrupted(runtime: Any) -> None:
    """Start the runtime's loops and block until Ctrl-C; stop the loops either way."""
    runtime.start()
    try:
        runtime.stop_event.wait()
    except KeyboardInterrupt:
        pass
    finally:
        runtime.stop()


@app.command("recover")
def recover_command(
    once: Annotated[bool, typer.Option("--once", help="Run one recovery tick and exit.")] = False,
) -> None:
    """Run recovery over the due-work index (every LEDGER_RECOVERY_INTERVAL_SECONDS)."""
    with _one_line_errors():
        from adapters.bootstrap import build_ledger
        from adapters.runtime import Runtime
        from domain.services.recovery import RecoveryReport, run_recovery

        settings = load_settings()
        if not settings.execution_enabled:
            _fail("execution is disabled (LEDGER_EXECUTION_ENABLED=false); recovery leases nothing")
        ledger = _observed(build_ledger(settings))

        def show(report: RecoveryReport) -> None:
            outcomes = ", ".join(f"{k}={v}" for k, v in sorted(report.outcomes.items()))
            typer.echo(f"recovery: examined {report.examined} due attempts"
                       + (f" ({outcomes})" if outcomes else ""))

        try:
            if once:
                show(run_recovery(ledger.make_worker()))
                return
            _configure_logging(settings)
            _run_until_interrupted(Runtime(
                ledger, None, recovery_interval=settings.recovery_interval_seconds,
                on_recovery=show))
        finally:
            ledger.close()


@app.command()
def demo() -> None:
    """Tell the whole story on a throwaway embedded store: approve, execute, recover, resolve."""
    with _one_line_errors():
        from api.demo import run_demo

        run_demo(Console(highlight=False))


@audit_app.command(SHOW)
def audit(
    attempt_id: Annotated[str, typer.Argument(help="The execution attempt id (att_...).")],
    verify: Annotated[bool, typer.Option(
        "--verify", help="Exit 1 naming the first bad version if a hash chain is broken.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    output: Annotated[str, typer.Option(
        "--format", help="text, json or mermaid (the attempt's state diagram).")] = "text",
) -> None:
    """The redacted timeline of an attempt with its proposal and directory context.

    `ledger audit ATTEMPT_ID` is the same command.
    """
    with _one_line_errors():
        import json as jsonlib

        from adapters.bootstrap import build_ledger
        from projections.audit import audit_attempt, mermaid_state_diagram

        if output not in ("text", "json", "mermaid"):
            _fail("--format must be text, json or mermaid")
        settings = load_settings()
        ledger = build_ledger(settings)
        try:
            if len(attempt_id) > 80 or not attempt_id.startswith(ATTEMPT_ID_PREFIX):
                _fail("not_found: no such attempt")
            report = audit_attempt(ledger.store, ledger.views, attempt_id)
        finally:
            ledger.close()
        if not report["attempt"]["events"] and report["attempt"]["first_bad_version"] is None:
            _fail("not_found: no such attempt")
        if as_json or output == "json":
            typer.echo(jsonlib.dumps(report, indent=2, sort_keys=True))
        elif output == "mermaid":
            typer.echo(mermaid_state_diagram(report["attempt"]["events"]), nl=False)
        else:
            _print_audit(report)
        if verify and not report["verified"]:
            streams = [report["attempt"], *report["context"]]
            bad = next(s for s in streams if not s["verified"])
            _fail(f"verification failed: {bad['stream_id']} version "
                  f"{bad['first_bad_version']} ({bad['reason']})")


def _print_audit(report: dict[str, Any]) -> None:
    from rich.table import Table

    console = Console(highlight=False)
    for stream in [report["attempt"], *report["context"]]:
        mark = "verified" if stream["verified"] else (
            f"BROKEN at version {stream['first_bad_version']} ({stream['reason']})")
        table = Table("v", "type", "recorded at", "data", title=f"{stream['stream_id']}: {mark}",
                      title_justify="left")
        for event in stream["events"]:
            data = ", ".join(f"{k}={v}" for k, v in sorted(event["data"].items()))
            table.add_row(str(event["version"]), event["type"], event["recorded_at"], data)
        console.print(table)
    console.print("all chains verified" if report["verified"] else "verification FAILED")


@projections_app.command("rebuild")
def projections_rebuild(
    view: Annotated[str | None, typer.Option(
        "--view", help="status or due_work (default: both).")] = None,
    check: Annotated[bool, typer.Option(
        "--check", help="Compare with the live views only; write nothing.")] = False,
) -> None:
    """Fold every attempt stream again, compare with the live views, write the result."""
    with _one_line_errors():
        from rich.progress import Progress, TaskID

        from adapters.bootstrap import build_ledger
        from adapters.rebuild import VIEWS, attempt_ids, rebuild

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
                typer.echo(f"{name}: {verb} {report.total} attempts; "
                           f"{report.identical} identical to the live view, "
                           f"{len(report.changed)} differed")
        finally:
            ledger.close()


@app.command("fake-executors")
def fake_executors() -> None:
    """One line per fake executor: <capability> <build_digest> <delivery_mode>."""
    with _one_line_errors():
        from adapters.executors.fake import FAKE_CAPABILITIES, fake_build_digest

        settings = load_settings()
        for capability, mode in FAKE_CAPABILITIES.items():
            typer.echo(f"{capability} {fake_build_digest(capability)} {mode.value}")
        if not settings.fake_executors_enabled:
            Console(stderr=True).print("note: fake executors are disabled by the settings")


def _print_executors(settings: Settings) -> int:
    """Build the registry exactly as start-up does and print one line per executor."""
    from adapters.executors.loader import load_executors

    loaded = load_executors(settings)
    try:
        entries = sorted(loaded.registry.entries(), key=lambda e: (e.capability, e.build_digest))
        for entry in entries:
            typer.echo(f"{entry.capability} {entry.build_digest} {entry.delivery_mode.value} "
                       f"{entry.kind}")
        if not entries:
            Console(stderr=True, soft_wrap=True).print("note: no executors are registered; set "
                                       "LEDGER_EXECUTORS_FILE or install a plugin")
        return len(entries)
    finally:
        loaded.registry.close()


@executors_app.callback()
def executors(ctx: typer.Context) -> None:
    """One line per registered executor: <capability> <build_digest> <delivery_mode> <kind>.

    Built exactly as `serve`, `worker` and `recover` build it (fakes when the
    settings allow them, entry points of `execution_ledger.executors`, and
    LEDGER_EXECUTORS_FILE). Register a build in the directory with its digest.
    """
    if ctx.invoked_subcommand is not None:
        return
    with _one_line_errors():
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
        source = (f"LEDGER_EXECUTORS_FILE {settings.executors_file}"
                  if settings.executors_file else "no executors file")
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            f"ok: {count} executors ({source}); every env: variable resolved; "
            "no request was sent")


@app.command()
def token(
    sub: Annotated[str, typer.Option("--sub", help="The subject (`sub` claim).")],
    role: Annotated[Role, typer.Option("--role", help="The `role` claim.")],
    actor_id: Annotated[str | None, typer.Option(help="Channel tokens: actor id.")] = None,
    identity_binding_id: Annotated[
        str | None, typer.Option(help="Channel tokens: identity binding id.")] = None,
    channel_binding_id: Annotated[
        str | None, typer.Option(help="Channel tokens: channel binding id.")] = None,
    conversation_key: Annotated[
        str | None, typer.Option(help="Channel tokens: conversation key.")] = None,
    ttl: Annotated[int, typer.Option(
        min=1, max=MAX_TOKEN_TTL_SECONDS,
        help="Lifetime in seconds (at most LEDGER_AUTH_MAX_TOKEN_LIFETIME_SECONDS)."),
    ] = DEFAULT_TTL_SECONDS,
) -> None:
    """Print a development JWT (HS256, the configured secret) and nothing else on stdout.

    A channel token needs all four provenance options. Refused when LEDGER_ENV=production.
    """
    from domain.services.approval import Provenance

    with _one_line_errors():
        settings = load_settings()
        if settings.env is Environment.PRODUCTION:
            _fail("ledger token mints development tokens; refused when LEDGER_ENV=production")
        flags = {
            "actor_id": actor_id,
            "identity_binding_id": identity_binding_id,
            "channel_binding_id": channel_binding_id,
            "conversation_key": conversation_key,
        }
        provenance = None
        if role is Role.CHANNEL:
            missing = ["--" + name.replace("_", "-") for name, v in flags.items() if v is None]
            if missing:
                _fail(f"--role channel needs {', '.join(missing)}")
            provenance = Provenance(**{name: str(v) for name, v in flags.items()})
        elif any(v is not None for v in flags.values()):
            _fail("--actor-id, --identity-binding-id, --channel-binding-id and "
                  "--conversation-key are only for --role channel")
        typer.echo(mint_token(settings, subject=sub, role=role, provenance=provenance,
                              ttl_seconds=ttl))


@dynamodb_app.command("create-table")
def create_table() -> None:
    """Create the ledger table (LEDGER_DYNAMODB_TABLE) and wait until it is active.

    The client comes from boto3's environment (AWS_ENDPOINT_URL_DYNAMODB, region...).
    """
    with _one_line_errors():
        settings = load_settings()
        from adapters.dynamodb.client import client_config, make_client
        from adapters.dynamodb.schema import create_table as create

        # A few retries: creating a table is rare and should survive a throttle.
        client = make_client(config=client_config(
            retries={"total_max_attempts": 3, "mode": "standard"}))
        created = create(client, settings.dynamodb_table, wait=True)
        state = "created" if created else "already existed"
        typer.echo(f"table {settings.dynamodb_table} {state}; it is active")


def main() -> None:
    """Entry point of the ``ledger`` script."""
    app(prog_name="ledger")
