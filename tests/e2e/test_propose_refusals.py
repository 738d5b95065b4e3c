"""What propose refuses, over HTTP and in process alike: content that fails its
build's schema, a schema digest that is not the build's, an unknown or disabled
actor, an ungranted permission. Each is a 422 naming every failing field by
its JSON pointer, in the error body the OpenAPI document declares, and
nothing is stored."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from jsonschema import Draft202012Validator

from adapters.executors.fake import fake_schema_digest
from api.testing import open_test_ledger
from domain.errors import ActorDisabled, InvalidSpec, PermissionNotGranted, UnknownActor
from tests.support.http_helpers import (
    API,
    DIRECTORY,
    Headers,
    assert_error,
    spec,
)

CANARY = "zqxcanary8842"


def propose(client: TestClient, bearer: Callable[..., Headers], body: dict[str, Any]) -> Any:
    return client.post(f"{API}/proposals", headers=bearer("proposer"), json=body)


def pointers(answer: Any) -> list[str]:
    return [e["pointer"] for e in answer.json()["errors"]]


def matches_the_documented_error_body(client: TestClient, body: dict[str, Any]) -> None:
    document = client.get("/openapi.json").json()
    schema = {"$ref": "#/components/schemas/ErrorBody", "components": document["components"]}
    assert list(Draft202012Validator(schema).iter_errors(body)) == []


def inbox_is_empty(client: TestClient, bearer: Callable[..., Headers]) -> None:
    listed = client.get(f"{API}/proposals", params={"actor_id": "alice"}, headers=bearer("admin"))
    assert listed.status_code == 200 and listed.json()["items"] == [], listed.text


@pytest.mark.usefixtures("directory")
def test_content_that_fails_the_schema_names_every_field_and_echoes_nothing(
    client: TestClient, bearer: Callable[..., Headers]
) -> None:
    content = {"title": 5, "simulate": f"explode {CANARY}", "slow_seconds": -1, "note": CANARY}
    answer = propose(client, bearer, {"actor_id": "alice", "spec": spec(content=content)})

    assert_error(answer, 422, "invalid_spec")
    body = answer.json()
    assert sorted(pointers(answer)) == [
        "/spec/content/simulate",
        "/spec/content/slow_seconds",
        "/spec/content/title",
    ]
    assert body["error_count"] == 3
    messages = {e["pointer"]: e["message"] for e in body["errors"]}
    assert messages["/spec/content/title"] == "must be a string"
    assert messages["/spec/content/slow_seconds"] == "must be at least 0"
    assert messages["/spec/content/simulate"].startswith('must be one of "success", ')
    assert "/spec/content/title: must be a string" in body["detail"]
    assert CANARY not in answer.text
    matches_the_documented_error_body(client, body)
    inbox_is_empty(client, bearer)


@pytest.mark.usefixtures("directory")
def test_a_schema_digest_not_of_the_build_is_named_with_every_other_problem(
    client: TestClient, bearer: Callable[..., Headers]
) -> None:
    wrong = fake_schema_digest("fake.operator_only")  # another build's schema
    changed = spec(schema_digest=wrong, content={"title": ""}, expires_at="2020-01-01T00:00:00Z")
    answer = propose(client, bearer, {"actor_id": "alice", "spec": changed})

    assert_error(answer, 422, "invalid_spec")
    assert pointers(answer) == [
        "/spec/schema_digest",
        "/spec/content/title",
        "/spec/expires_at",
    ]
    assert "GET /executors" in answer.json()["errors"][0]["message"]
    inbox_is_empty(client, bearer)


@pytest.mark.usefixtures("directory")
@pytest.mark.parametrize(
    ("change", "code", "pointer"),
    [
        ("unknown", "unknown_actor", "/actor_id"),
        ("disabled", "actor_disabled", "/actor_id"),
        ("ungranted", "permission_not_granted", "/spec/permission"),
    ],
)
def test_an_actor_who_could_never_approve_is_refused_at_propose(
    client: TestClient,
    bearer: Callable[..., Headers],
    admin: Headers,
    change: str,
    code: str,
    pointer: str,
) -> None:
    actor = "mallory" if change == "unknown" else "alice"
    if change == "disabled":
        client.put(f"{DIRECTORY}/actors/alice", json={"enabled": False}, headers=admin)
    if change == "ungranted":
        client.put(
            f"{DIRECTORY}/actors/alice/permissions/tasks.write",
            json={"granted": False},
            headers=admin,
        )
    answer = propose(client, bearer, {"actor_id": actor, "spec": spec()})

    assert_error(answer, 422, code)
    assert pointers(answer) == [pointer]
    assert "mallory" not in answer.text
    matches_the_documented_error_body(client, answer.json())
    inbox_is_empty(client, bearer)


@pytest.mark.usefixtures("directory")
def test_sixty_failing_fields_list_fifty_and_count_sixty(
    client: TestClient, bearer: Callable[..., Headers]
) -> None:
    many = {**spec(), **{f"extra{n}": n for n in range(60)}}
    answer = propose(client, bearer, {"actor_id": "alice", "spec": many})

    assert_error(answer, 422, "invalid_input")
    body = answer.json()
    assert len(body["errors"]) == 50 and body["error_count"] == 60
    assert body["errors"][0]["message"] == "unknown field /spec/extra0 is not permitted"
    assert body["detail"].endswith("; 10 more not listed (60 problems in all)")
    assert "and 10 more" not in body["detail"]
    matches_the_documented_error_body(client, body)


def test_the_in_process_api_refuses_with_the_same_errors_and_problems() -> None:
    with open_test_ledger() as ledger:
        alice = ledger.add_approver("alice")
        with pytest.raises(UnknownActor) as unknown:
            ledger.propose("mallory", ledger.fake_spec())
        assert [p.pointer for p in unknown.value.problems] == ["/actor_id"]
        with pytest.raises(PermissionNotGranted):
            ledger.propose(alice.actor_id, ledger.fake_spec(permission="social.post"))
        with pytest.raises(InvalidSpec) as invalid:
            ledger.propose(alice.actor_id, ledger.fake_spec(content={"title": 1}))
        assert [p.pointer for p in invalid.value.problems] == ["/spec/content/title"]
        ledger.put_actor(alice.actor_id, enabled=False)
        with pytest.raises(ActorDisabled):
            ledger.propose(alice.actor_id, ledger.fake_spec())


def test_the_openapi_request_schema_says_what_each_digest_binds_and_who_computes_it(
    client: TestClient,
) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    spec_fields = schemas["ProposalSpec"]["properties"]
    assert all(field.get("description") for field in spec_fields.values()), [
        name for name, field in spec_fields.items() if not field.get("description")
    ]
    described = {name: spec_fields[name]["description"] for name in spec_fields}
    assert "GET /executors" in described["executor_build"]
    assert "content schema" in described["executor_build"]
    assert "GET /executors" in described["schema_digest"]
    assert "/spec/schema_digest" in described["schema_digest"]
    assert "computed by the proposer" in described["plugin_build"]
    assert described["policy_digest"].startswith("Reserved")
    assert "any well-formed" in described["policy_digest"]
    assert all(schemas["ProposalIn"]["properties"][f]["description"] for f in ("actor_id", "spec"))
    listed = schemas["ExecutorOut"]["properties"]
    assert {"content_schema", "schema_digest"} <= set(listed)
    body = schemas["ErrorBody"]["properties"]
    assert {"errors", "error_count"} <= set(body)
    assert set(schemas["FieldErrorOut"]["properties"]) == {"pointer", "message", "location"}
