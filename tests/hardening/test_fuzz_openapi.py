"""Schema-driven fuzzing of the HTTP API (schemathesis over the app's own OpenAPI).

Every operation gets generated requests (valid and invalid) with a valid token
of each role, and without one: no answer is a 5xx, every answer matches the
status codes, content type and response schema the OpenAPI document declares,
and every error is the uniform ``{"error", "detail"}`` body. Malformed JSON,
oversize bodies and unknown fields are aimed at explicitly as well.
``LEDGER_FUZZ_EXAMPLES`` sets the examples per operation (CI keeps it small).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis import checks as st_checks

from adapters.bootstrap import Ledger
from api.http.middleware import DEFAULT_MAX_BODY_BYTES
from tests.support.hostile import odd_timestamps
from tests.support.http_helpers import Headers, assert_error_body
from tests.support.worlds.http_api import ROLES, HttpWorld, build_world, flat_routes

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("hermetic_env")]


EXAMPLES = int(os.environ.get("LEDGER_FUZZ_EXAMPLES", "6"))
CHECKS = [
    st_checks.not_a_server_error,
    st_checks.status_code_conformance,
    st_checks.content_type_conformance,
    st_checks.response_schema_conformance,
    st_checks.response_headers_conformance,
]


def uniform_error_body(ctx: Any, response: Any, case: Any) -> bool | None:
    """Every error answer is ``{"error": <code>, "detail": <text>}``, plus, on an
    error about the request's fields, ``errors`` and ``error_count``."""
    if response.status_code < 400:
        return None
    assert_error_body(json.loads(response.content), response.status_code)
    return None


@pytest.fixture
def http_world(client: TestClient, ledger: Ledger, bearer: Callable[..., Headers]) -> HttpWorld:
    return build_world(client, ledger, bearer)


@pytest.fixture
def api_schema(http_world: HttpWorld) -> Any:
    app = http_world.client.app
    assert isinstance(app, FastAPI)
    # "date-time" fields also get timestamps at the ends of the calendar with odd
    # offsets (one of them overflowed on conversion to UTC and answered 500)
    schemathesis.openapi.format("date-time", odd_timestamps())
    return schemathesis.openapi.from_asgi("/openapi.json", app)


@pytest.mark.parametrize(
    "mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["valid", "invalid"]
)
def test_no_5xx_and_every_answer_matches_the_schema(
    api_schema: Any, http_world: HttpWorld, mode: GenerationMode
) -> None:
    """Every operation, generated requests sent once per role and once without a token.

    (Driven through hypothesis directly: schemathesis' pytest loader does not
    run under this pytest version.)
    """
    roles = {role: http_world.headers(role) for role in ROLES}
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 20
    sent: list[int] = []
    unsatisfiable: list[str] = []

    for operation in operations:

        @hypothesis_settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(generation_mode=mode))
        def fuzz(case: Any) -> None:
            generated = dict(case.headers or {})
            generated.pop("Authorization", None)
            for role in ROLES:
                case.headers = {**generated, **roles[role]}
                case.call_and_validate(checks=CHECKS, additional_checks=[uniform_error_body])
                sent.append(1)

        try:
            fuzz()
        except Unsatisfiable:
            # nothing to break in an operation without parameters or body (e.g. /healthz)
            assert mode is GenerationMode.NEGATIVE
            unsatisfiable.append(operation.label)
    assert len(unsatisfiable) <= 6, unsatisfiable
    assert len(sent) >= (len(operations) - len(unsatisfiable)) * len(ROLES)


def test_the_schema_covers_every_route(http_world: HttpWorld) -> None:
    app = http_world.client.app
    assert isinstance(app, FastAPI)
    documented = {
        (method.upper(), path) for path, item in app.openapi()["paths"].items() for method in item
    }
    served = {
        (m, p)
        for m, p, _ in flat_routes(app)
        if p not in ("/openapi.json", "/docs", "/docs/oauth2-redirect")
        and not p.startswith("/console/")
        and p != "/console"
    }  # HTML pages
    assert served == documented


BODY_ROUTES = [
    ("PUT", "/api/conversational/directory/actors/alice", "admin"),
    ("POST", "/api/conversational/proposals", "proposer"),
    ("POST", "/api/conversational/approvals", "channel"),
    ("POST", "/api/conversational/execution-attempts/{queued}/resolve", "admin"),
]


def _send(
    http_world: HttpWorld,
    method: str,
    path: str,
    role: str,
    content: bytes,
    content_type: str = "application/json",
) -> Any:
    headers = {**http_world.headers(role), "Content-Type": content_type}
    return http_world.client.request(
        method, path.format(queued=http_world.queued), content=content, headers=headers
    )


def _uniform(response: Any, status: int | tuple[int, ...]) -> dict[str, Any]:
    statuses = status if isinstance(status, tuple) else (status,)
    assert response.status_code in statuses, response.text
    body: dict[str, Any] = response.json()
    assert_error_body(body, response.status_code)
    return body


@pytest.mark.parametrize(("method", "path", "role"), BODY_ROUTES)
@pytest.mark.parametrize(
    "content",
    [
        b"{",
        b"not json",
        b'{"a": }',
        b"[1, 2",
        b"\xff\xfe\x00",
        b'{"a": 1}{"b": 2}',
        b"",
        b'{"token": NaN}',
        b'{"token": "\\ud800"}',
    ],
    ids=[
        "open_brace",
        "text",
        "bad_value",
        "open_list",
        "binary",
        "two_docs",
        "empty",
        "nan",
        "lone_surrogate",
    ],
)
def test_malformed_json_is_a_uniform_4xx(
    http_world: HttpWorld, method: str, path: str, role: str, content: bytes
) -> None:
    body = _uniform(_send(http_world, method, path, role, content), (400, 422))
    assert body["error"] == "invalid_input"


@pytest.mark.parametrize(("method", "path", "role"), BODY_ROUTES)
def test_oversize_bodies_are_a_uniform_413(
    http_world: HttpWorld, method: str, path: str, role: str
) -> None:
    padding = "x" * (DEFAULT_MAX_BODY_BYTES + 1)
    body = _uniform(
        _send(http_world, method, path, role, json.dumps({"padding": padding}).encode()), 413
    )
    assert body["error"] == "payload_too_large"
    assert "xxxx" not in json.dumps(body)


@pytest.mark.parametrize(
    ("method", "path", "role", "payload", "unknown"),
    [
        (
            "PUT",
            "/api/conversational/directory/actors/alice",
            "admin",
            {"enabled": True, "sk_live_unknown_field": 1},
            ["/*"],  # a secret-shaped key is never named
        ),
        (
            "POST",
            "/api/conversational/approvals",
            "channel",
            {"token": "x" * 43, "actor_id": "mallory"},
            ["/actor_id"],
        ),
        (
            "POST",
            "/api/conversational/execution-attempts/{queued}/reconcile",
            "admin",
            {"expected_revision": 1, "provider_result": {"ok": True}},
            ["/provider_result"],
        ),
        (
            "POST",
            "/api/conversational/proposals",
            "proposer",
            {"actor_id": "alice", "spec": {"capability": "x"}, "extra": True},
            ["/extra"],
        ),
    ],
)
def test_unknown_fields_are_a_uniform_422_that_names_them_but_no_secret_or_value(
    http_world: HttpWorld,
    method: str,
    path: str,
    role: str,
    payload: dict[str, Any],
    unknown: list[str],
) -> None:
    body = _uniform(_send(http_world, method, path, role, json.dumps(payload).encode()), 422)
    assert body["error"] == "invalid_input"
    for sent in ("sk_live_unknown_field", "mallory"):  # a secret-shaped key, a value
        assert sent not in json.dumps(body)
    named = [e["pointer"] for e in body["errors"] if e["message"].startswith("unknown field")]
    assert named == unknown
    for pointer in unknown:
        assert f"unknown field {pointer} is not permitted" in body["detail"]


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"],
)
def test_a_body_that_is_not_json_is_a_uniform_4xx(http_world: HttpWorld, content_type: str) -> None:
    response = _send(
        http_world, "POST", "/api/conversational/approvals", "channel", b"token=abc", content_type
    )
    _uniform(response, (400, 415, 422))


@pytest.mark.parametrize(("method", "path", "role"), BODY_ROUTES)
def test_a_body_that_is_not_utf8_answers_a_documented_400(
    http_world: HttpWorld, method: str, path: str, role: str
) -> None:
    """Found by the fuzzer: a body that is not UTF-8 is refused with 400 (the
    framework cannot decode it), which the OpenAPI document did not declare."""
    body = _uniform(_send(http_world, method, path, role, b'\xff{"a": 1}'), 400)
    assert body["error"] == "invalid_input"
    app = http_world.client.app
    assert isinstance(app, FastAPI)
    template = path.replace("/alice", "/{actor_id}").replace("{queued}", "{attempt_id}")
    responses = app.openapi()["paths"][template][method.lower()]["responses"]
    assert "400" in responses
