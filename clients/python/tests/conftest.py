"""Fixtures of the Python client's tests: a real `ledger serve` per store (SQLite and
the DynamoDB emulator, one per test session), its directory set up through the
client itself, and a fault proxy in front of it."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from fault_proxy import FaultProxy
from ledger_servers import ALICE, Actor, LedgerServer, dynamodb_env, enrol, start_server

from adapters.dynamodb.schema import create_table
from domain.services.approval import Provenance
from ledger_client import Client
from tests.support.dynamodb_fixtures import (  # noqa: F401 (fixtures)
    dynamodb_client,
    dynamodb_endpoint,
    new_table_name,
)


@pytest.fixture(
    scope="session",
    params=[
        pytest.param("sqlite", marks=pytest.mark.slow),
        pytest.param("dynamodb", marks=[pytest.mark.slow, pytest.mark.dynamodb]),
    ],
)
def ledger_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LedgerServer]:
    """`ledger serve` on the store of the parameter, with the fakes allowed for alice."""
    workdir = tmp_path_factory.mktemp(f"client-{request.param}")
    if request.param == "sqlite":
        env = {"LEDGER_STORE": "sqlite", "LEDGER_SQLITE_PATH": str(workdir / "ledger.db")}
    else:
        endpoint = request.getfixturevalue("dynamodb_endpoint")
        table = new_table_name()
        create_table(request.getfixturevalue("dynamodb_client"), table)
        env = dynamodb_env(endpoint, table)
    server = start_server(workdir, env, request.param)
    try:
        with Client(server.url, token=server.token("admin")) as admin:
            enrol(admin, ALICE)
            for build in admin.executors().items:
                admin.put_executor_build(
                    build.capability, build.executor_build, delivery_mode=build.delivery_mode
                )
        yield server
    finally:
        server.stop()


@pytest.fixture
def actor(ledger_server: LedgerServer) -> Actor:
    """A new actor, so what a test counts is its own."""
    tag = secrets.token_hex(4)
    who = Provenance(
        actor_id=f"actor-{tag}",
        identity_binding_id=f"ib-{tag}",
        channel_binding_id=f"cb-{tag}",
        conversation_key=f"conv-{tag}",
    )
    with Client(ledger_server.url, token=ledger_server.token("admin")) as admin:
        enrol(admin, who)
    return Actor(who, ledger_server.token("channel", provenance=who))


@pytest.fixture
def proxy(ledger_server: LedgerServer) -> Iterator[FaultProxy]:
    fault = FaultProxy(ledger_server.url)
    yield fault
    fault.close()


@pytest.fixture
def slept() -> list[float]:
    """What a client under test waited between tries (it does not really sleep)."""
    return []
