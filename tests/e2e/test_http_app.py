"""App-wide behaviour: probes, OpenAPI, the uniform error body, limits and the 500 boundary."""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import APIRouter
from fastapi.testclient import TestClient

import domain.errors as domain_errors
from adapters.bootstrap import Ledger
from adapters.settings import Settings
from api.http.app import create_app
from api.http.errors import STATUS_BY_CODE
from domain.errors import LedgerError, StoreUnavailable
from tests.support.http_helpers import DIRECTORY, Headers, assert_error

CANARY = "sk_live_CANARY_e2e_0b1d"

EXPECTED_STATUS = {
    "invalid_input": 422,
    "invalid_spec": 422,
    "unknown_permission": 422,
    "executor_build_unavailable": 422,
    "executor_build_draining": 422,
    "nondeterministic_renderer": 422,
    "not_found": 404,
    "approval_unavailable": 404,
    "concurrency_conflict": 409,
    "lookup_conflict": 409,
    "proposal_claimed": 409,
    "stale_version": 409,
    "proposal_conflicted": 409,
    "stale_revision": 409,
    "not_outcome_unknown": 409,
    "illegal_transition": 409,
    "commit_too_large": 422,
    "store_unavailable": 503,
    "unauthenticated": 401,
    "forbidden": 403,
    "reconciler_unavailable": 409,
    "executor_no_effect": 502,
    "executor_outcome_uncertain": 502,
    "executor_receipt_unusable": 502,
}
DOMAIN_ERRORS = sorted(
    (
        cls
        for _, cls in inspect.getmembers(domain_errors, inspect.isclass)
        if issubclass(cls, LedgerError) and cls is not LedgerError
    ),
    key=lambda cls: cls.__name__,
)


class BrokenStore:
    """A store whose every call fails the way a bug would."""

    def __getattr__(self, name: str) -> Any:
        def fail(*_: Any, **__: Any) -> Any:
            raise RuntimeError(f"boom {CANARY}")

        return fail


class DownStore:
    """A store that is unreachable."""

    def __getattr__(self, name: str) -> Any:
        def fail(*_: Any, **__: Any) -> Any:
            raise StoreUnavailable()

        return fail


def _client_with_store(settings: Settings, ledger: Ledger, store: Any) -> TestClient:
    return TestClient(create_app(settings, ledger=dataclasses.replace(ledger, store=store)))


def _make_error(cls: type[LedgerError]) -> LedgerError:
    try:
        return cls()
    except TypeError:
        return cls("stream-x")  # type: ignore[call-arg]


@pytest.fixture
def raising_client(settings: Settings, ledger: Ledger) -> Iterator[TestClient]:
    """An app with one extra route that raises the domain error named in the path."""
    app = create_app(settings, ledger=ledger)
    router = APIRouter()
    by_name = {cls.__name__: cls for cls in DOMAIN_ERRORS}

    @router.get("/raise/{name}")
    def raise_error(name: str) -> None:
        raise _make_error(by_name[name])

    app.include_router(router)
    with TestClient(app) as test_client:
        yield test_client


def test_healthz_is_ok(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_is_ready_when_the_store_answers(client: TestClient) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ready",
        "details": {
            "projections": {
                "status": {"events_behind": 0, "oldest_unprocessed_age_seconds": 0.0, "exact": True}
            }
        },
    }


def test_readyz_is_503_when_the_store_does_not_answer(settings: Settings, ledger: Ledger) -> None:
    client = _client_with_store(settings, ledger, BrokenStore())
    assert_error(client.get("/readyz"), 503, "store_unavailable")
    assert client.get("/healthz").status_code == 200


def test_docs_and_openapi_describe_the_directory_routes(client: TestClient) -> None:
    docs = client.get("/docs")
    assert docs.status_code == 200
    assert "swagger" in docs.text.lower()
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    for path in [
        "/actors/{actor_id}",
        "/identity-bindings/{binding_id}",
        "/channel-bindings/{binding_id}",
        "/actors/{actor_id}/permissions/{permission}",
        "/executor-builds/{capability}/{build_digest}",
        "/targets/{target_id}",
    ]:
        assert set(paths[DIRECTORY + path]) == {"put", "get"}, path
    assert "HTTPBearer" in spec["components"]["securitySchemes"]
    put_actor = paths[DIRECTORY + "/actors/{actor_id}"]["put"]
    assert put_actor["security"] == [{"HTTPBearer": []}]
    error_schema = put_actor["responses"]["422"]["content"]["application/json"]["schema"]
    assert error_schema == {"$ref": "#/components/schemas/ErrorBody"}


def test_unknown_route_is_uniform_not_found(client: TestClient) -> None:
    assert_error(client.get("/nothing/here"), 404, "not_found")
    assert_error(client.get("/api/conversational/nothing"), 404, "not_found")


def test_wrong_method_is_uniform_405_with_allow(client: TestClient, admin: Headers) -> None:
    response = client.delete(DIRECTORY + "/actors/alice", headers=admin)
    assert_error(response, 405, "method_not_allowed")
    # Starlette names the methods of the first route matching the path.
    assert response.headers["allow"] in {"GET", "PUT"}


def test_oversize_body_is_413_before_anything_is_written(
    client: TestClient, admin: Headers
) -> None:
    body = b'{"enabled": true, "pad": "' + b"x" * (64 * 1024) + b'"}'
    response = client.put(
        DIRECTORY + "/actors/alice",
        content=body,
        headers={**admin, "Content-Type": "application/json"},
    )
    assert_error(response, 413, "payload_too_large")
    assert_error(client.get(DIRECTORY + "/actors/alice", headers=admin), 404, "not_found")


def test_oversize_chunked_body_without_length_is_413(client: TestClient, admin: Headers) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"enabled": true, "pad": "'
        for _ in range(80):
            yield b"x" * 1024
        yield b'"}'

    response = client.put(
        DIRECTORY + "/actors/alice",
        content=chunks(),
        headers={**admin, "Content-Type": "application/json"},
    )
    assert "content-length" not in {k.lower() for k in response.request.headers}
    assert_error(response, 413, "payload_too_large")


def test_body_just_under_the_limit_reaches_validation(client: TestClient, admin: Headers) -> None:
    body = b'{"enabled": true, "pad": "' + b"x" * (60 * 1024) + b'"}'
    response = client.put(
        DIRECTORY + "/actors/alice",
        content=body,
        headers={**admin, "Content-Type": "application/json"},
    )
    assert_error(response, 422, "invalid_input")


def test_unexpected_exception_is_a_bare_500_and_logs_only_its_type(
    settings: Settings, ledger: Ledger, admin: Headers, caplog: pytest.LogCaptureFixture
) -> None:
    client = _client_with_store(settings, ledger, BrokenStore())
    with caplog.at_level(logging.DEBUG, logger="ledger"):
        response = client.put(DIRECTORY + "/actors/alice", json={"enabled": True}, headers=admin)
    assert response.status_code == 500
    assert response.json() == {"error": "internal_error", "detail": "Internal error."}
    assert "Traceback" not in response.text
    ours = [r for r in caplog.records if r.name.startswith("ledger")]
    assert [r.getMessage() for r in ours] == ["unhandled error: RuntimeError"]
    assert all(r.exc_info is None for r in ours)
    assert CANARY not in response.text


def test_store_outage_is_503_store_unavailable(
    settings: Settings, ledger: Ledger, admin: Headers
) -> None:
    client = _client_with_store(settings, ledger, DownStore())
    response = client.put(DIRECTORY + "/actors/alice", json={"enabled": True}, headers=admin)
    assert_error(response, 503, "store_unavailable")


def test_every_domain_error_code_has_the_expected_status() -> None:
    codes = {cls.code for cls in DOMAIN_ERRORS}
    assert codes <= set(STATUS_BY_CODE), codes - set(STATUS_BY_CODE)
    assert {code: STATUS_BY_CODE[code] for code in EXPECTED_STATUS} == EXPECTED_STATUS


@pytest.mark.parametrize("cls", DOMAIN_ERRORS, ids=lambda cls: cls.__name__)
def test_domain_errors_raised_by_a_route_become_the_uniform_body(
    raising_client: TestClient, cls: type[LedgerError]
) -> None:
    response = raising_client.get(f"/raise/{cls.__name__}")
    assert_error(response, STATUS_BY_CODE[cls.code], cls.code)
    assert response.json()["detail"] == cls.default_detail
    if response.status_code == 401:
        assert response.headers["www-authenticate"] == "Bearer"


def test_an_unmapped_subclass_takes_its_parents_status(settings: Settings, ledger: Ledger) -> None:
    class TooManyThings(domain_errors.InvalidInput):
        code = "too_many_things"

    app = create_app(settings, ledger=ledger)

    @app.get("/too-many")
    def too_many() -> None:
        raise TooManyThings()

    assert_error(TestClient(app).get("/too-many"), 422, "too_many_things")
