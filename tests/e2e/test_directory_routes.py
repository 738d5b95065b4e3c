"""Directory admin routes: happy paths, idempotency and every kind of bad input."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support.http_helpers import DIRECTORY, FIXED_NOW_TEXT, Headers, assert_error

DIGEST = "sha256:" + "ab" * 32
CANARY = "sk_live_CANARY_7f3a9c"


@dataclass(frozen=True)
class Route:
    """One directory resource: its path, a valid body, a changed body, the expected record."""

    name: str
    path: str
    body: dict[str, Any]
    changed: dict[str, Any]
    expected: dict[str, Any]
    bad_paths: tuple[str, ...]


ROUTES = [
    Route(
        "actor",
        "/actors/alice",
        {"enabled": True},
        {"enabled": False, "groups": ["ops", "finance"]},
        {"id": "alice", "kind": "actor", "enabled": True, "groups": []},
        ("/actors/-alice", "/actors/" + "a" * 129, "/actors/al%20ice", "/actors/al%3Bice"),
    ),
    Route(
        "identity-binding",
        "/identity-bindings/ib-1",
        {"actor_id": "alice", "channel": "slack", "external_id": "U123", "active": True},
        {"actor_id": "alice", "channel": "slack", "external_id": "U123", "active": False},
        {
            "id": "ib-1",
            "kind": "identity-binding",
            "actor_id": "alice",
            "channel": "slack",
            "external_id": "U123",
            "active": True,
        },
        ("/identity-bindings/_x", "/identity-bindings/" + "b" * 129, "/identity-bindings/a%23b"),
    ),
    Route(
        "channel-binding",
        "/channel-bindings/cb-1",
        {"conversation_key": "C042", "channel": "slack", "active": True},
        {"conversation_key": "C043", "channel": "slack", "active": True},
        {
            "id": "cb-1",
            "kind": "channel-binding",
            "conversation_key": "C042",
            "channel": "slack",
            "active": True,
        },
        ("/channel-bindings/.x", "/channel-bindings/" + "c" * 129, "/channel-bindings/a%21"),
    ),
    Route(
        "grant",
        "/actors/alice/permissions/tasks.write",
        {"granted": True},
        {"granted": False},
        {
            "id": "alice:tasks.write",
            "kind": "grant",
            "actor_id": "alice",
            "permission": "tasks.write",
            "granted": True,
        },
        (
            "/actors/-a/permissions/tasks.write",
            "/actors/alice/permissions/Tasks.Write",
            "/actors/alice/permissions/" + "t" * 65,
        ),
    ),
    Route(
        "executor-build",
        f"/executor-builds/fake.provider_idempotency/{DIGEST}",
        {"delivery_mode": "provider_idempotency", "available": True},
        {"delivery_mode": "provider_idempotency", "available": False},
        {
            "id": f"fake.provider_idempotency:{DIGEST}",
            "kind": "executor-build",
            "capability": "fake.provider_idempotency",
            "build_digest": DIGEST,
            "delivery_mode": "provider_idempotency",
            "available": True,
        },
        (
            f"/executor-builds/Fake/{DIGEST}",
            "/executor-builds/fake.x/sha256:abc",
            f"/executor-builds/fake.x/md5:{'ab' * 32}",
            f"/executor-builds/fake.x/{DIGEST.upper()}",
        ),
    ),
    Route(
        "target",
        "/targets/task:42",
        {"revision": "r7"},
        {"revision": "r8"},
        {"id": "task:42", "kind": "target", "target_revision": "r7"},
        ("/targets/:task", "/targets/" + "t" * 129, "/targets/task%2042"),
    ),
]
ROUTE_IDS = [r.name for r in ROUTES]


def _wrong_values(value: Any) -> list[tuple[str, Any]]:
    """Values of the wrong type or out of bounds for a field holding ``value``."""
    if isinstance(value, bool):
        return [("string", "yes"), ("canary", CANARY), ("int", 1), ("null", None), ("list", [True])]
    return [
        ("int", 123),
        ("bool", True),
        ("null", None),
        ("empty", ""),
        ("oversize", CANARY + "x" * 1000),
        ("object", {"a": "b"}),
    ]


def _bad_bodies(route: Route) -> list[tuple[str, Any]]:
    """Bodies that must be rejected: each field wrong, unknown fields, missing fields."""
    cases: list[tuple[str, Any]] = [
        ("empty-object", {}),
        ("unknown-field", {**route.body, CANARY: True}),
        ("list", [route.body]),
        ("string", "hello"),
        ("number", 7),
        ("null", None),
    ]
    for field, value in route.body.items():
        cases.append((f"{field}-missing", {k: v for k, v in route.body.items() if k != field}))
        for label, wrong in _wrong_values(value):
            cases.append((f"{field}-{label}", {**route.body, field: wrong}))
    return cases


BAD_BODY_CASES = [
    pytest.param(route, body, id=f"{route.name}-{label}")
    for route in ROUTES
    for label, body in _bad_bodies(route)
]
RAW_BODY_CASES = [
    pytest.param(route, raw, content_type, id=f"{route.name}-{label}")
    for route in ROUTES
    for label, raw, content_type in [
        ("malformed-json", b'{"enabled": tru', "application/json"),
        ("trailing-garbage", json.dumps(route.body).encode() + b"}", "application/json"),
        ("empty-body", b"", "application/json"),
        ("no-content-type", json.dumps(route.body).encode(), None),
        ("form-encoded", b"enabled=true", "application/x-www-form-urlencoded"),
        ("not-utf8", b"\xff\xfe{", "application/json"),
    ]
]


def _assert_nothing_written(client: TestClient, route: Route, admin: Headers) -> None:
    assert_error(client.get(DIRECTORY + route.path, headers=admin), 404, "not_found")


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
def test_put_creates_then_repeats_idempotently_and_changes_bump_revision(
    client: TestClient, admin: Headers, route: Route
) -> None:
    url = DIRECTORY + route.path
    created = client.put(url, json=route.body, headers=admin)
    assert created.status_code == 200, created.text
    assert created.json() == {**route.expected, "revision": 1, "updated_at": FIXED_NOW_TEXT}

    repeated = client.put(url, json=route.body, headers=admin)
    assert repeated.status_code == 200
    assert repeated.json() == created.json()

    changed = client.put(url, json=route.changed, headers=admin)
    assert changed.status_code == 200
    assert changed.json()["revision"] == 2

    read = client.get(url, headers=admin)
    assert read.status_code == 200
    assert read.json() == changed.json()

    back = client.put(url, json=route.body, headers=admin)
    assert back.json()["revision"] == 3


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
def test_get_of_unknown_record_is_not_found(
    client: TestClient, admin: Headers, route: Route
) -> None:
    _assert_nothing_written(client, route, admin)


def test_records_of_different_kinds_do_not_collide(client: TestClient, admin: Headers) -> None:
    client.put(DIRECTORY + "/actors/alice", json={"enabled": True}, headers=admin)
    assert_error(client.get(DIRECTORY + "/targets/alice", headers=admin), 404, "not_found")
    assert_error(
        client.get(DIRECTORY + "/identity-bindings/alice", headers=admin), 404, "not_found"
    )


@pytest.mark.parametrize(("route", "body"), BAD_BODY_CASES)
def test_put_rejects_bad_bodies_without_writing(
    client: TestClient, admin: Headers, route: Route, body: Any
) -> None:
    response = client.put(DIRECTORY + route.path, json=body, headers=admin)
    assert_error(response, 422, "invalid_input")
    assert CANARY not in response.text
    _assert_nothing_written(client, route, admin)


@pytest.mark.parametrize(("route", "raw", "content_type"), RAW_BODY_CASES)
def test_put_rejects_unparseable_bodies(
    client: TestClient, admin: Headers, route: Route, raw: bytes, content_type: str | None
) -> None:
    headers = dict(admin)
    if content_type:
        headers["Content-Type"] = content_type
    response = client.put(DIRECTORY + route.path, content=raw, headers=headers)
    assert response.status_code in {400, 422}, response.text
    assert_error(response, response.status_code, "invalid_input")
    _assert_nothing_written(client, route, admin)


@pytest.mark.parametrize(
    ("route", "path"),
    [
        pytest.param(route, path, id=f"{route.name}-{i}")
        for route in ROUTES
        for i, path in enumerate(route.bad_paths)
    ],
)
@pytest.mark.parametrize("method", ["PUT", "GET"])
def test_bad_path_ids_are_rejected(
    client: TestClient, admin: Headers, route: Route, path: str, method: str
) -> None:
    body = route.body if method == "PUT" else None
    response = client.request(method, DIRECTORY + path, json=body, headers=admin)
    assert_error(response, 422, "invalid_input")


def test_an_encoded_slash_in_an_id_matches_no_route(client: TestClient, admin: Headers) -> None:
    response = client.put(DIRECTORY + "/actors/al%2Fice", json={"enabled": True}, headers=admin)
    assert_error(response, 404, "not_found")


def test_permission_outside_the_catalogue_is_unknown_permission(
    client: TestClient, admin: Headers
) -> None:
    url = DIRECTORY + "/actors/alice/permissions/payments.send"
    assert_error(client.put(url, json={"granted": True}, headers=admin), 422, "unknown_permission")
    assert_error(client.get(url, headers=admin), 404, "not_found")


@pytest.mark.parametrize("mode", ["correlation_lookup", "operator_reconciliation_only"])
def test_every_delivery_mode_is_accepted(client: TestClient, admin: Headers, mode: str) -> None:
    url = DIRECTORY + f"/executor-builds/fake.{mode}/{DIGEST}"
    response = client.put(url, json={"delivery_mode": mode, "available": True}, headers=admin)
    assert response.status_code == 200, response.text
    assert response.json()["delivery_mode"] == mode


def test_unknown_delivery_mode_is_rejected(client: TestClient, admin: Headers) -> None:
    url = DIRECTORY + f"/executor-builds/fake.x/{DIGEST}"
    response = client.put(
        url, json={"delivery_mode": "best_effort", "available": True}, headers=admin
    )
    assert_error(response, 422, "invalid_input")
    assert "best_effort" not in response.json()["detail"]


def test_strings_are_nfc_normalized(client: TestClient, admin: Headers) -> None:
    decomposed = "Cafe\u0301"
    response = client.put(
        DIRECTORY + "/targets/doc:1", json={"revision": decomposed}, headers=admin
    )
    assert response.json()["target_revision"] == "Caf\u00e9"
    again = client.put(DIRECTORY + "/targets/doc:1", json={"revision": "Caf\u00e9"}, headers=admin)
    assert again.json()["revision"] == 1
