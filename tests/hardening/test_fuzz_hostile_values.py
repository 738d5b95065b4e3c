"""Property-based fuzzing with the values schema-driven generation never makes.

The OpenAPI schema says "string" and "date-time"; the adversarial pass found
500s in what those words allow: offsets that overflow on conversion to UTC and
signed claims holding lone surrogates. These properties aim
``tests/support/hostile.py`` at every place such a value enters: spec
timestamps, every claim of a signed token, id fields of bodies, path ids. The
property is always the same: a 2xx or the uniform 4xx, never a 5xx, and
nothing hidden ever reaches a view. ``LEDGER_FUZZ_EXAMPLES`` scales it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import jwt
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from adapters.bootstrap import Ledger
from adapters.settings import Settings
from domain.spec import hidden_character
from tests.support.hostile import any_text, fits_in_utc, hostile_ids, odd_timestamps
from tests.support.http_helpers import API, PROVENANCE, Headers, assert_error_body, spec
from tests.support.worlds.http_api import HttpWorld, build_world

pytestmark = pytest.mark.usefixtures("hermetic_env")

EXAMPLES = int(os.environ.get("LEDGER_FUZZ_EXAMPLES", "6")) * 10
fuzz_settings = hypothesis_settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture
def http_world(client: TestClient, ledger: Ledger, bearer: Callable[..., Headers]) -> HttpWorld:
    return build_world(client, ledger, bearer)


def uniform(response: Any, *allowed: int) -> dict[str, Any]:
    """Never a 5xx; an error is the uniform body (``errors`` only on a 422)."""
    assert response.status_code < 500, response.text
    assert response.status_code in allowed, response.text
    body: dict[str, Any] = response.json()
    if response.status_code >= 400:
        assert_error_body(body, response.status_code)
    return body


def send_json(client: TestClient, method: str, path: str, headers: Headers, body: Any) -> Any:
    """Send ``body`` with ``\\u`` escapes, so lone surrogates travel as JSON allows."""
    return client.request(
        method,
        path,
        content=json.dumps(body).encode(),
        headers={**headers, "Content-Type": "application/json"},
    )


def signed(settings: Settings, claims: dict[str, Any]) -> Headers:
    now = int(time.time())
    body = {"iat": now, "exp": now + 600, **claims}
    secret = settings.auth_hs256_secret.get_secret_value()
    return {"Authorization": "Bearer " + jwt.encode(body, secret, algorithm="HS256")}


def test_odd_expiry_timestamps_are_stored_in_utc_or_refused(http_world: HttpWorld) -> None:
    @fuzz_settings
    @given(expires_at=odd_timestamps())
    def prop(expires_at: str) -> None:
        response = send_json(
            http_world.client,
            "POST",
            f"{API}/proposals",
            http_world.headers("proposer"),
            {"actor_id": "alice", "spec": spec(expires_at=expires_at)},
        )
        body = uniform(response, 201, 422)
        if response.status_code == 201:
            assert fits_in_utc(expires_at)
        elif not fits_in_utc(expires_at):
            assert body["error"] == "invalid_input"  # refused by the schema, not the domain
        else:
            assert body["error"] in {"invalid_input", "invalid_spec"}  # naive, or in the past

    prop()


CLAIM_ROUTES: list[tuple[str, str, Any]] = [
    ("GET", "/execution-attempts/{queued}", None),
    (
        "POST",
        "/execution-attempts/{resolvable}/resolve",
        {"expected_revision": 1, "resolution": "no_effect", "reason": "checked"},
    ),
    ("PUT", "/directory/actors/alice", {"enabled": True}),
    ("POST", "/approvals", {"token": "{token}"}),
]


def test_any_claim_value_is_refused_uniformly_or_reaches_nothing_hidden(
    http_world: HttpWorld, settings: Settings
) -> None:
    base: dict[str, Any] = {"sub": "chat-backend", "role": "channel", **PROVENANCE.__dict__}

    @fuzz_settings
    @given(
        claim=st.sampled_from(["sub", *PROVENANCE.__dict__]),
        value=st.one_of(hostile_ids, any_text),
        role=st.sampled_from(["admin", "channel", "actor"]),
        route=st.sampled_from(CLAIM_ROUTES),
    )
    def prop(claim: str, value: str, role: str, route: tuple[str, str, Any]) -> None:
        method, template, body = route
        claims = {**base, "role": role, claim: value}
        path = API + template.format(queued=http_world.queued, resolvable=http_world.resolvable)
        payload = (
            json.loads(json.dumps(body).replace("{token}", http_world.token))
            if body is not None
            else None
        )
        response = send_json(http_world.client, method, path, signed(settings, claims), payload)
        uniform(response, 200, 202, 401, 403, 404, 409, 422)
        read = claim == "sub" or role == "channel"  # other roles ignore provenance claims
        if read and (hidden_character(value) or not 1 <= len(value) <= 256):
            # refused at authentication: it never reaches an event or a view
            assert response.status_code == 401, response.text

    prop()


ID_FIELDS: list[tuple[str, str, str, Callable[[str], dict[str, Any]]]] = [
    (
        "PUT",
        "/directory/channel-bindings/cb-fuzz",
        "admin",
        lambda v: {"conversation_key": v, "channel": "slack", "active": True},
    ),
    (
        "PUT",
        "/directory/identity-bindings/ib-fuzz",
        "admin",
        lambda v: {"actor_id": "alice", "channel": "slack", "external_id": v, "active": True},
    ),
    ("PUT", "/directory/targets/task:fuzz", "admin", lambda v: {"revision": v}),
    (
        "POST",
        "/proposals",
        "proposer",
        lambda v: {"actor_id": "alice", "spec": spec(destination=v)},
    ),
    (
        "POST",
        "/proposals",
        "proposer",
        lambda v: {"actor_id": "alice", "spec": spec(target={"id": v, "base_revision": "r7"})},
    ),
    ("POST", "/proposals", "proposer", lambda v: {"actor_id": "alice", "spec": spec(sources=[v])}),
]


def test_hidden_characters_in_id_fields_are_a_uniform_422(http_world: HttpWorld) -> None:
    @fuzz_settings
    @given(field=st.sampled_from(ID_FIELDS), value=hostile_ids)
    def prop(field: tuple[str, str, str, Callable[[str], dict[str, Any]]], value: str) -> None:
        method, path, role, make = field
        response = send_json(
            http_world.client, method, API + path, http_world.headers(role), make(value)
        )
        assert uniform(response, 422)["error"] in {"invalid_input", "invalid_spec"}

    prop()


PATH_ROUTES = [
    ("GET", "/execution-attempts/{}", "admin", None),
    ("GET", "/execution-attempts/{}/events", "admin", None),
    ("POST", "/execution-attempts/{}/reconcile", "admin", {"expected_revision": 1}),
    (
        "POST",
        "/execution-attempts/{}/resolve",
        "admin",
        {"expected_revision": 1, "resolution": "no_effect", "reason": "checked"},
    ),
    (
        "POST",
        "/proposals/{}/presentations",
        "proposer",
        {
            "version": 1,
            "identity_binding_id": "ib-x",
            "channel_binding_id": "cb-x",
            "conversation_key": "C1",
        },
    ),
    ("GET", "/directory/actors/{}", "admin", None),
    ("PUT", "/directory/targets/{}", "admin", {"revision": "r1"}),
]


def test_any_path_id_is_a_uniform_answer(http_world: HttpWorld) -> None:
    @fuzz_settings
    @given(
        route=st.sampled_from(PATH_ROUTES),
        value=st.one_of(hostile_ids, any_text).filter(lambda v: v not in {"", ".", ".."}),
    )
    def prop(route: tuple[str, str, str, Any], value: str) -> None:
        method, template, role, body = route
        segment = quote(value.encode("utf-8", "surrogatepass"), safe="")
        response = send_json(
            http_world.client,
            method,
            API + template.format(segment),
            http_world.headers(role),
            body,
        )
        uniform(response, 200, 404, 405, 422)

    prop()
