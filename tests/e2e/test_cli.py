"""The ``ledger`` command: help, development tokens, one-line failures, create-table."""

from __future__ import annotations

import sys
import types
from typing import Any

import jwt
import pytest
from botocore.exceptions import EndpointConnectionError
from fastapi.testclient import TestClient

from adapters.settings import load_settings
from api.http.app import create_app
from tests.support.cli import assert_one_line_failure, invoke
from tests.support.http_helpers import DIRECTORY, PROVENANCE

CUSTOM_SECRET = "a-custom-secret-of-more-than-thirty-two-characters"
CHANNEL_FLAGS = [
    "--actor-id",
    PROVENANCE.actor_id,
    "--identity-binding-id",
    PROVENANCE.identity_binding_id,
    "--channel-binding-id",
    PROVENANCE.channel_binding_id,
    "--conversation-key",
    PROVENANCE.conversation_key,
]


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["serve", "--help"],
        ["token", "--help"],
        ["dynamodb", "--help"],
        ["dynamodb", "create-table", "--help"],
    ],
    ids=" ".join,
)
def test_every_command_has_help(args: list[str]) -> None:
    result = invoke(args)
    assert result.exit_code == 0
    assert "Usage: ledger" in result.stdout


@pytest.mark.parametrize("args", [[], ["dynamodb"]], ids=["ledger", "ledger-dynamodb"])
def test_a_group_without_a_command_shows_help_and_fails(args: list[str]) -> None:
    result = invoke(args)
    assert result.exit_code == 2
    assert "Usage: ledger" in result.stdout + result.stderr


def test_root_help_lists_the_commands() -> None:
    result = invoke(["--help"])
    assert result.exit_code == 0
    for command in ("serve", "token", "dynamodb"):
        assert command in result.stdout


def test_token_prints_only_a_jwt_the_app_accepts() -> None:
    result = invoke(["token", "--sub", "root", "--role", "admin"], LEDGER_STORE="memory")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.endswith("\n") and result.stdout.count("\n") == 1
    token = result.stdout.strip()
    assert token.count(".") == 2 and " " not in token

    settings = load_settings(store="memory")
    with TestClient(create_app(settings)) as client:
        response = client.put(
            DIRECTORY + "/actors/alice",
            json={"enabled": True},
            headers={"Authorization": f"Bearer {token}"},
        )
    assert response.status_code == 200, response.text


def test_token_uses_the_configured_secret_and_ttl() -> None:
    result = invoke(
        ["token", "--sub", "ops", "--role", "proposer", "--ttl", "90"],
        LEDGER_AUTH_HS256_SECRET=CUSTOM_SECRET,
    )
    assert result.exit_code == 0, result.stderr
    claims = jwt.decode(result.stdout.strip(), CUSTOM_SECRET, algorithms=["HS256"])
    assert (claims["sub"], claims["role"], claims["exp"] - claims["iat"]) == ("ops", "proposer", 90)


def test_channel_token_carries_the_provenance_flags() -> None:
    result = invoke(["token", "--sub", "slack", "--role", "channel", *CHANNEL_FLAGS])
    assert result.exit_code == 0, result.stderr
    secret = load_settings().auth_hs256_secret.get_secret_value()
    claims = jwt.decode(result.stdout.strip(), secret, algorithms=["HS256"])
    assert claims["actor_id"] == PROVENANCE.actor_id
    assert claims["conversation_key"] == PROVENANCE.conversation_key


@pytest.mark.parametrize("missing", range(4))
def test_channel_token_needs_all_four_provenance_flags(missing: int) -> None:
    flags = CHANNEL_FLAGS[: 2 * missing] + CHANNEL_FLAGS[2 * missing + 2 :]
    result = invoke(["token", "--sub", "slack", "--role", "channel", *flags])
    assert_one_line_failure(result, CHANNEL_FLAGS[2 * missing])


def test_provenance_flags_are_refused_for_other_roles() -> None:
    result = invoke(["token", "--sub", "root", "--role", "admin", *CHANNEL_FLAGS])
    assert_one_line_failure(result, "only for --role channel")


def test_invalid_provenance_value_is_a_one_line_failure() -> None:
    flags = list(CHANNEL_FLAGS)
    flags[1] = "-not-an-id"
    result = invoke(["token", "--sub", "slack", "--role", "channel", *flags])
    assert_one_line_failure(result, "actor_id")


def test_token_is_refused_in_production_with_the_development_secret() -> None:
    result = invoke(["token", "--sub", "root", "--role", "admin"], LEDGER_ENV="production")
    assert_one_line_failure(result, "LEDGER_ENV=production")


def test_token_is_refused_in_production_even_with_a_real_secret() -> None:
    result = invoke(
        ["token", "--sub", "root", "--role", "admin"],
        LEDGER_ENV="production",
        LEDGER_AUTH_HS256_SECRET=CUSTOM_SECRET,
    )
    assert_one_line_failure(result, "LEDGER_ENV=production")
    assert CUSTOM_SECRET not in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["token", "--sub", "root", "--role", "admin"],
        ["serve", "--port", "1"],
        ["dynamodb", "create-table"],
    ],
    ids=["token", "serve", "create-table"],
)
@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("LEDGER_LEASE_SECONDS", "1"),
        ("LEDGER_STORE", "postgres"),
        ("LEDGER_PERMISSIONS", "Not A Name"),
        ("LEDGER_AUTH_HS256_SECRET", "short"),
    ],
)
def test_invalid_settings_fail_in_one_line_naming_the_variable(
    args: list[str], variable: str, value: str
) -> None:
    result = invoke(args, **{variable: value})
    assert_one_line_failure(result, variable)
    if variable == "LEDGER_AUTH_HS256_SECRET":
        assert value not in result.stderr.replace("LEDGER_AUTH_HS256_SECRET", "")


def test_unknown_role_is_a_usage_error() -> None:
    result = invoke(["token", "--sub", "root", "--role", "superuser"])
    assert result.exit_code == 2
    assert result.stdout == ""


@pytest.fixture
def fake_schema(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Replace the table creator and the client factory; record the calls."""
    calls: list[dict[str, Any]] = []

    def create_table(client: Any, table_name: str, *, wait: bool = True) -> bool:
        calls.append({"client": client, "table_name": table_name, "wait": wait})
        if table_name == "unreachable":
            raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9")
        return table_name != "existing"

    schema = types.ModuleType("adapters.dynamodb.schema")
    schema.create_table = create_table  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "adapters.dynamodb.schema", schema)
    monkeypatch.setattr("adapters.dynamodb.client.make_client", lambda **_: "client")
    return calls


def test_create_table_uses_the_configured_table_and_waits(fake_schema: list[Any]) -> None:
    result = invoke(["dynamodb", "create-table"], LEDGER_DYNAMODB_TABLE="ledger-test")
    assert result.exit_code == 0, result.stderr
    assert fake_schema == [{"client": "client", "table_name": "ledger-test", "wait": True}]
    assert "ledger-test created" in result.stdout
    again = invoke(["dynamodb", "create-table"], LEDGER_DYNAMODB_TABLE="existing")
    assert again.exit_code == 0
    assert "already existed" in again.stdout


def test_create_table_connection_error_is_one_line(fake_schema: list[Any]) -> None:
    result = invoke(["dynamodb", "create-table"], LEDGER_DYNAMODB_TABLE="unreachable")
    assert_one_line_failure(result, "EndpointConnectionError")
