"""The channel suites: a real `ledger serve` per store (SQLite, and the DynamoDB
emulator), once per session, with the signed webhooks going to the channels
(tests/support/channel_world.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adapters.dynamodb.schema import create_table
from tests.support.channel_world import LedgerUnderTest, start_ledger
from tests.support.dynamodb_fixtures import new_table_name


@pytest.fixture(autouse=True)
def _hermetic_env(hermetic_env: None) -> None:
    """No LEDGER_* variable from the outer environment leaks into these tests."""


@pytest.fixture(
    scope="session",
    params=[
        pytest.param("sqlite", marks=pytest.mark.slow),
        pytest.param("dynamodb", marks=[pytest.mark.slow, pytest.mark.dynamodb]),
    ],
)
def ledger(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LedgerUnderTest]:
    """`ledger serve` on the store of the parameter, the fake executors allowed."""
    workdir = tmp_path_factory.mktemp(f"channels-{request.param}")
    if request.param == "sqlite":
        env = {"LEDGER_STORE": "sqlite", "LEDGER_SQLITE_PATH": str(workdir / "ledger.db")}
    else:
        endpoint = request.getfixturevalue("dynamodb_endpoint")
        table = new_table_name()
        create_table(request.getfixturevalue("dynamodb_client"), table)
        env = {
            "LEDGER_STORE": "dynamodb",
            "LEDGER_DYNAMODB_TABLE": table,
            "AWS_ENDPOINT_URL_DYNAMODB": endpoint,
            "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": endpoint,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }
    server = start_ledger(workdir, env, request.param)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def sqlite_only(ledger: LedgerUnderTest) -> None:
    """For what the channel does alone (its message, its state file, a restart): the
    same on every store, so run once; what the ledger decides runs on both."""
    if ledger.store != "sqlite":
        pytest.skip("channel-side only: the same on every store, run on SQLite")
