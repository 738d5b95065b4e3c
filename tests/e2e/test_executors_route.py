"""`GET /api/conversational/executors` and `ledger executors --json`: every build this
process hosts, newest first per capability, with whether the directory allows it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from adapters.bootstrap import Ledger, build_ledger
from adapters.executors.fake import (
    FAKE_CAPABILITIES,
    fake_build_digest,
    fake_content_schema,
    fake_schema_digest,
)
from adapters.executors.registry import RegistryEntry
from adapters.settings import load_settings
from api.cli import app as cli_app
from api.http.app import create_app
from api.service.executors import newest_first
from domain.directory import DeliveryMode
from tests.support.http_helpers import DIRECTORY, Headers, assert_error

ROUTE = "/api/conversational/executors"
FAKE = "fake.provider_idempotency"


@dataclass(frozen=True)
class _Build:
    """An executor that is only ever listed (the route never calls one)."""

    capability: str
    build_digest: str
    delivery_mode: DeliveryMode = DeliveryMode.PROVIDER_IDEMPOTENCY

    def execute(self, request: object) -> object:  # pragma: no cover - never called
        raise AssertionError("listing an executor must not call it")


def _digest(char: str) -> str:
    return "sha256:" + char * 64


def allow(
    client: TestClient, admin: Headers, capability: str, digest: str, **values: object
) -> None:
    body = {"delivery_mode": "provider_idempotency", "available": True, **values}
    answer = client.put(
        f"{DIRECTORY}/executor-builds/{capability}/{digest}", json=body, headers=admin
    )
    assert answer.status_code == 200, answer.text


def test_proposers_and_admins_list_every_hosted_build(
    client: TestClient, bearer: Callable[..., Headers]
) -> None:
    for role in ("proposer", "admin"):
        answer = client.get(ROUTE, headers=bearer(role))
        assert answer.status_code == 200, answer.text
        items = answer.json()["items"]
        assert [i["capability"] for i in items] == sorted(FAKE_CAPABILITIES)
        for item in items:
            # every fake declares a content schema; its digest is the spec's schema_digest
            assert set(item) == {
                "capability",
                "executor_build",
                "delivery_mode",
                "available",
                "state",
                "content_schema",
                "schema_digest",
            }
            assert item["content_schema"] == fake_content_schema(item["capability"])
            assert item["schema_digest"] == fake_schema_digest(item["capability"])
            assert item["executor_build"] == fake_build_digest(item["capability"])
            assert item["delivery_mode"] == FAKE_CAPABILITIES[item["capability"]].value
            assert item["available"] is False  # nothing allowed in the directory yet
            assert item["state"] == "current"


def test_actors_channels_and_strangers_are_refused(
    client: TestClient, bearer: Callable[..., Headers]
) -> None:
    assert_error(client.get(ROUTE), 401, "unauthenticated")
    for role in ("actor", "channel", "metrics"):
        assert_error(client.get(ROUTE, headers=bearer(role)), 403, "forbidden")


def test_available_means_the_directory_allows_the_build_with_its_delivery_mode(
    client: TestClient, admin: Headers
) -> None:
    def available() -> bool:
        items = client.get(ROUTE, headers=admin).json()["items"]
        return next(i for i in items if i["capability"] == FAKE)["available"]

    digest = fake_build_digest(FAKE)
    allow(client, admin, FAKE, digest)
    assert available() is True
    allow(client, admin, FAKE, digest, available=False)  # withdrawn
    assert available() is False
    allow(client, admin, FAKE, digest, delivery_mode="correlation_lookup")  # not how it is hosted
    assert available() is False


def test_a_build_the_directory_allows_but_this_process_does_not_host_is_not_listed(
    client: TestClient, admin: Headers
) -> None:
    allow(client, admin, FAKE, _digest("e"))
    digests = [i["executor_build"] for i in client.get(ROUTE, headers=admin).json()["items"]]
    assert _digest("e") not in digests
    assert fake_build_digest(FAKE) in digests


def test_several_builds_of_a_capability_are_listed_newest_first(
    client: TestClient, ledger: Ledger, admin: Headers
) -> None:
    for char in "f1":  # registered later = newer; the digests sort the other way
        ledger.registry.register(_Build("tasks.create", _digest(char)), kind="test")
    allow(client, admin, "tasks.create", _digest("f"))
    items = [i for i in client.get(ROUTE, headers=admin).json()["items"]]
    tasks = [
        (i["executor_build"], i["available"]) for i in items if i["capability"] == "tasks.create"
    ]
    assert tasks == [(_digest("1"), False), (_digest("f"), True)]
    assert [i["capability"] for i in items] == sorted(i["capability"] for i in items)


def test_newest_first_orders_by_capability_then_the_later_registration() -> None:
    def entry(capability: str, char: str) -> RegistryEntry:
        return RegistryEntry(capability, _digest(char), DeliveryMode.PROVIDER_IDEMPOTENCY)

    registered = [entry("b", "1"), entry("a", "2"), entry("b", "3"), entry("a", "0")]
    assert newest_first(registered) == [
        entry("a", "0"),
        entry("a", "2"),
        entry("b", "3"),
        entry("b", "1"),
    ]


def test_the_cli_json_prints_what_the_route_answers_from_the_same_store(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.db")
    settings = load_settings(store="sqlite", sqlite_path=path, env="test")
    ledger = build_ledger(settings)
    try:
        with TestClient(create_app(settings, ledger=ledger)) as client:
            from api.http.auth import mint_token

            admin = {"Authorization": "Bearer " + mint_token(settings, subject="ops", role="admin")}
            allow(client, admin, FAKE, fake_build_digest(FAKE))
            over_http = client.get(ROUTE, headers=admin).json()
    finally:
        ledger.close()
    result = CliRunner().invoke(
        cli_app,
        ["executors", "--json"],
        env={"LEDGER_STORE": "sqlite", "LEDGER_SQLITE_PATH": path, "LEDGER_ENV": "test"},
        prog_name="ledger",
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == over_http
    assert [i["available"] for i in over_http["items"]].count(True) == 1


def test_the_cli_json_option_is_in_the_help() -> None:
    result = CliRunner().invoke(cli_app, ["executors", "--help"], prog_name="ledger")
    assert result.exit_code == 0
    assert "--json" in result.stdout
