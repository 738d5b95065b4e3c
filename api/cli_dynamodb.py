"""``ledger dynamodb``: manage the DynamoDB table."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from api.cli_common import one_line_errors as _one_line_errors

dynamodb_app = typer.Typer(help="Manage the DynamoDB table.", no_args_is_help=True)


@dynamodb_app.command("create-table")
def create_table() -> None:
    """Create the ledger table (LEDGER_DYNAMODB_TABLE) and wait until it is active.

    The client comes from boto3's environment (AWS_ENDPOINT_URL_DYNAMODB, region...).
    """
    with _one_line_errors():
        from adapters.settings import load_settings

        settings = load_settings()
        from adapters.dynamodb.client import client_config, make_client
        from adapters.dynamodb.schema import create_table as create

        # A few retries: creating a table is rare and should survive a throttle.
        client = make_client(
            config=client_config(retries={"total_max_attempts": 3, "mode": "standard"})
        )
        created = create(client, settings.dynamodb_table, wait=True)
        state = "created" if created else "already existed"
        typer.echo(f"table {settings.dynamodb_table} {state}; it is active")


def _recorder() -> Any:
    from adapters.dynamodb.client import client_config, make_client
    from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
    from adapters.settings import load_settings

    settings = load_settings()
    client = make_client(
        config=client_config(retries={"total_max_attempts": 3, "mode": "standard"})
    )
    return DynamoDBLedgerRecorder(
        table_name=settings.dynamodb_table,
        client=client,
        due_buckets=settings.due_work_buckets,
    )


def _describe(layout: Any, due_setting: int) -> str:
    checks = "shard copies" if layout.checks_shards else "each record's own next slot"
    recorded = "recorded" if layout.version else "not recorded (a table made before the layout)"
    due = f"due buckets {layout.due_buckets}"
    if not layout.due_buckets:
        due = (
            f"due buckets not recorded (each process's LEDGER_DUE_WORK_BUCKETS, here {due_setting})"
        )
    grants = f"grant use shards {layout.grant_shards}"
    if not layout.grant_shards:
        grants = "grant use shards 0 (a grant's uses on its own record)"
    return (
        f"head buckets {layout.head_buckets}, directory shards {layout.directory_shards}, "
        f"policy-set shards {layout.policy_set_shards}, {due}, {grants}, checks read {checks}; "
        f"layout {recorded}"
    )


@dynamodb_app.command("layout")
def show_layout() -> None:
    """Print the table's layout: head buckets, directory shards, due buckets, grant shards."""
    with _one_line_errors():
        recorder = _recorder()
        shown = _describe(recorder.read_layout(), recorder.due_buckets)
        typer.echo(f"table {recorder.table_name}: {shown}")


@dynamodb_app.command("migrate")
def migrate(
    head_buckets: Annotated[
        int, typer.Option(help="Head-index buckets to have (1-4096; never lowered).")
    ] = 512,
    directory_shards: Annotated[
        int, typer.Option(help="Copies of each directory record's version (0-32; never lowered).")
    ] = 16,
    policy_set_shards: Annotated[
        int,
        typer.Option(help="Copies of the policy set's version (0-96; never lowered)."),
    ] = 96,
    due_buckets: Annotated[
        int,
        typer.Option(
            help="Due-work index buckets every process uses (256-1024 on a table that "
            "records none, else never lowered)."
        ),
    ] = 256,
    grant_shards: Annotated[
        int,
        typer.Option(
            help="Use shards of each standing grant made from now on (0-1024; never "
            "lowered). Run it once every process runs this version."
        ),
    ] = 256,
) -> None:
    """Move the table to more head buckets, directory shards, due buckets and grant shards.

    Safe while the ledger runs and safe to run again: every directory record gets
    its shard copies before any check reads them, and every reader of due work
    enumerates the new due buckets before any writer uses them (docs/dynamodb.md,
    "No hot key").
    """
    with _one_line_errors():
        from adapters.dynamodb.migrate import migrate as run

        recorder = _recorder()
        report = run(
            recorder,
            head_buckets=head_buckets,
            directory_shards=directory_shards,
            policy_set_shards=policy_set_shards,
            due_buckets=due_buckets,
            grant_shards=grant_shards,
        )
        setting = recorder.due_buckets
        typer.echo(f"table {recorder.table_name} was: {_describe(report.before, setting)}")
        typer.echo(
            f"table {recorder.table_name} now: {_describe(report.after, setting)} "
            f"({report.records_striped} directory records given their copies)"
        )
