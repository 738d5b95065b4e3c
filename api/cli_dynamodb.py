"""``ledger dynamodb``: manage the DynamoDB table."""

from __future__ import annotations

import typer

from adapters.settings import load_settings
from api.cli_common import one_line_errors as _one_line_errors

dynamodb_app = typer.Typer(help="Manage the DynamoDB table.", no_args_is_help=True)


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
        client = make_client(
            config=client_config(retries={"total_max_attempts": 3, "mode": "standard"})
        )
        created = create(client, settings.dynamodb_table, wait=True)
        state = "created" if created else "already existed"
        typer.echo(f"table {settings.dynamodb_table} {state}; it is active")
