"""The store a ``ledger mcp`` suite runs on: SQLite, and the DynamoDB emulator."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(params=["sqlite", pytest.param("dynamodb", marks=pytest.mark.dynamodb)])
def mcp_store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """The ``LEDGER_*`` (and emulator) variables of the store, for the processes the
    test starts; this process gets the AWS ones too (its admin ledger opens the same)."""
    if request.param == "sqlite":
        return {"LEDGER_STORE": "sqlite", "LEDGER_SQLITE_PATH": str(tmp_path / "ledger.db")}
    endpoint = request.getfixturevalue("dynamodb_endpoint")
    aws = {
        "AWS_ENDPOINT_URL_DYNAMODB": endpoint,
        "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": endpoint,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    for name, value in aws.items():
        monkeypatch.setenv(name, value)
    table = request.getfixturevalue("dynamodb_table_name")
    return {"LEDGER_STORE": "dynamodb", "LEDGER_DYNAMODB_TABLE": table, **aws}
