"""Regressions of the second adversarial pass: odd input is a uniform 4xx, never a 5xx.

Each case here answered 500 ``internal_error`` (or was accepted) before its fix.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import jwt
import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger
from adapters.settings import Settings
from api.http.auth import Role, TokenVerifier
from domain.errors import Unauthenticated
from tests.support.http_helpers import API, PROVENANCE, Headers, assert_error, spec
from tests.support.worlds.http_api import HttpWorld, build_world

pytestmark = pytest.mark.usefixtures("hermetic_env")


@pytest.fixture
def http_world(client: TestClient, ledger: Ledger, bearer: Callable[..., Headers]) -> HttpWorld:
    return build_world(client, ledger, bearer)


def signed(settings: Settings, **claims: Any) -> Headers:
    """A correctly signed HS256 token carrying exactly these claims."""
    now = int(time.time())
    body: dict[str, Any] = {"sub": "ops", "role": "admin", "iat": now, "exp": now + 600}
    body.update(claims)
    body = {k: v for k, v in body.items() if v is not None}
    secret = settings.auth_hs256_secret.get_secret_value()
    return {"Authorization": "Bearer " + jwt.encode(body, secret, algorithm="HS256")}


# -- expires_at offsets that overflow on conversion to UTC ---------------------


@pytest.mark.parametrize(
    "expires_at",
    [
        "9999-12-31T23:59:59-01:00",
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:59:59.999999-23:59",
        "0001-01-01T00:00:00+23:59",
    ],
)
def test_an_expiry_that_overflows_in_utc_is_a_uniform_422(
    http_world: HttpWorld, expires_at: str
) -> None:
    response = http_world.client.post(
        f"{API}/proposals",
        headers=http_world.headers("proposer"),
        json={"actor_id": "alice", "spec": spec(expires_at=expires_at)},
    )
    assert_error(response, 422, "invalid_input")
    assert expires_at not in response.text


def test_the_latest_expiry_that_fits_in_utc_is_accepted(http_world: HttpWorld) -> None:
    response = http_world.client.post(
        f"{API}/proposals",
        headers=http_world.headers("proposer"),
        json={"actor_id": "alice", "spec": spec(expires_at="9999-12-31T23:59:59+01:00")},
    )
    assert response.status_code == 201, response.text


# -- claims that would reach an event ------------------------------------------


def _resolve(http_world: HttpWorld, headers: Headers) -> Any:
    attempt_id = http_world.resolvable
    return http_world.client.post(
        f"{API}/execution-attempts/{attempt_id}/resolve",
        headers=headers,
        json={
            "expected_revision": http_world.revision(attempt_id),
            "resolution": "effect_applied",
            "reason": "checked with the provider",
        },
    )


HOSTILE_IDS = {
    "lone_surrogate": "ops\ud800",
    "low_surrogate": "\udfffops",
    "nul": "ops\x00",
    "newline": "ops\nadmin",
    "escape": "ops\x1b[31m",
    "del": "ops\x7f",
    "bidi_override": "ops\u202eevil",
    "bidi_isolate": "\u2066ops\u2069",
    "rtl_mark": "ops\u200f",
    "zero_width_space": "o\u200bps",
    "zero_width_joiner": "o\u200dps",
    "word_joiner": "ops\u2060",
    "bom": "\ufeffops",
    "line_separator": "ops\u2028",
    "private_use": "ops\ue000",
    "unassigned": "ops\U000e0080",
    "too_long": "o" * 257,
    "empty": "",
}


@pytest.mark.parametrize("subject", HOSTILE_IDS.values(), ids=HOSTILE_IDS.keys())
def test_a_signed_admin_token_with_a_hostile_sub_is_a_uniform_401(
    http_world: HttpWorld, settings: Settings, subject: str
) -> None:
    response = _resolve(http_world, signed(settings, sub=subject))
    assert_error(response, 401, "unauthenticated")
    assert response.json()["detail"] == "Invalid or expired bearer token."
    # nothing was written: the attempt still waits for a resolution
    assert _resolve(http_world, http_world.headers("admin")).status_code == 200


@pytest.mark.parametrize(
    "claim", ["actor_id", "identity_binding_id", "channel_binding_id", "conversation_key"]
)
@pytest.mark.parametrize(
    "value",
    ["x\ud800", "C042\u202e", "C\u200b042", "C042\x00"],
    ids=["surrogate", "bidi", "zero_width", "nul"],
)
def test_a_channel_token_with_a_hostile_provenance_claim_is_a_uniform_401(
    http_world: HttpWorld, settings: Settings, claim: str, value: str
) -> None:
    claims: dict[str, Any] = {
        "sub": "chat-backend",
        "role": "channel",
        "actor_id": PROVENANCE.actor_id,
        "identity_binding_id": PROVENANCE.identity_binding_id,
        "channel_binding_id": PROVENANCE.channel_binding_id,
        "conversation_key": PROVENANCE.conversation_key,
    }
    claims[claim] = value
    response = http_world.approve(http_world.token, signed(settings, **claims))
    assert_error(response, 401, "unauthenticated")


@pytest.mark.parametrize("subject", ["ops", "Ops.Team@example", "é-ops", "操作员", "svc:chat/1"])
def test_ordinary_subjects_are_still_accepted(settings: Settings, subject: str) -> None:
    verifier = TokenVerifier.from_settings(settings)
    token = signed(settings, sub=subject)["Authorization"].removeprefix("Bearer ")
    assert verifier.verify(token).subject == subject


# -- hostile ids in bodies and paths -------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["C042\u202e", "C\u200b042", "C042\x00", "C042\n"],
    ids=["bidi", "zero_width", "nul", "newline"],
)
def test_a_hostile_conversation_key_in_a_body_is_a_uniform_422(
    http_world: HttpWorld, value: str
) -> None:
    admin = http_world.headers("admin")
    response = http_world.client.put(
        f"{API}/directory/channel-bindings/cb-x",
        headers=admin,
        json={"conversation_key": value, "channel": "slack", "active": True},
    )
    assert_error(response, 422, "invalid_input")
    response = http_world.client.post(
        f"{API}/proposals/{http_world.proposal_id}/presentations",
        headers=http_world.headers("proposer"),
        json={
            "version": 1,
            "identity_binding_id": PROVENANCE.identity_binding_id,
            "channel_binding_id": PROVENANCE.channel_binding_id,
            "conversation_key": value,
        },
    )
    assert_error(response, 422, "invalid_input")


@pytest.mark.parametrize(
    ("method", "template", "role", "body"),
    [
        ("GET", "/execution-attempts/{id}", "admin", None),
        ("GET", "/execution-attempts/{id}/events", "admin", None),
        ("POST", "/execution-attempts/{id}/reconcile", "admin", {"expected_revision": 1}),
        (
            "POST",
            "/execution-attempts/{id}/resolve",
            "admin",
            {"expected_revision": 1, "resolution": "no_effect", "reason": "checked"},
        ),
        (
            "POST",
            "/proposals/{id}/presentations",
            "proposer",
            {
                "version": 1,
                "identity_binding_id": "ib-x",
                "channel_binding_id": "cb-x",
                "conversation_key": "C1",
            },
        ),
    ],
)
@pytest.mark.parametrize(
    "path_id",
    ["a" * 3000, "att_%E2%80%AE" + "0" * 60, "%00", "%F0%9F%92%A9"],
    ids=["long", "bidi", "nul", "emoji"],
)
def test_a_path_id_that_cannot_exist_is_a_uniform_404(
    http_world: HttpWorld, method: str, template: str, role: str, body: Any, path_id: str
) -> None:
    headers = {**http_world.headers(role), "Content-Type": "application/json"}
    response = http_world.client.request(
        method,
        API + template.format(id=path_id),
        headers=headers,
        content=None if body is None else json.dumps(body).encode(),
    )
    assert_error(response, 404, "not_found")


# -- token lifetimes -----------------------------------------------------------


@pytest.mark.parametrize(
    "claims",
    [
        {"exp": 10**30},
        {"exp": 10**30, "iat": None},
        {"exp": int(time.time()) + 400 * 86400, "iat": None},
        {"iat": int(time.time()) - 10, "exp": int(time.time()) + 8 * 86400},
    ],
    ids=["exp_1e30", "exp_1e30_no_iat", "a_year_no_iat", "eight_days"],
)
def test_a_token_claiming_a_lifetime_beyond_the_cap_is_a_uniform_401(
    http_world: HttpWorld, settings: Settings, claims: dict[str, Any]
) -> None:
    response = http_world.client.get(
        f"{API}/execution-attempts/{http_world.queued}", headers=signed(settings, **claims)
    )
    assert_error(response, 401, "unauthenticated")
    assert response.json()["detail"] == "Invalid or expired bearer token."


def test_the_lifetime_cap_is_a_setting(settings: Settings) -> None:
    now = int(time.time())
    token = signed(settings, iat=now, exp=now + 7200)["Authorization"].removeprefix("Bearer ")
    assert TokenVerifier.from_settings(settings).verify(token).role is Role.ADMIN
    strict = settings.model_copy(update={"auth_max_token_lifetime_seconds": 3600})
    with pytest.raises(Unauthenticated):
        TokenVerifier.from_settings(strict).verify(token)
    token = signed(settings, iat=None, exp=now + 3500)["Authorization"].removeprefix("Bearer ")
    assert TokenVerifier.from_settings(strict).verify(token).role is Role.ADMIN


def test_ledger_token_refuses_a_lifetime_beyond_the_cap_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from typer.testing import CliRunner

    from api.cli import app

    monkeypatch.setenv("LEDGER_AUTH_MAX_TOKEN_LIFETIME_SECONDS", "3600")
    result = CliRunner().invoke(app, ["token", "--sub", "ops", "--role", "admin", "--ttl", "3601"])
    assert result.exit_code == 1
    assert result.stdout.count("\n") <= 1 and "Traceback" not in result.output
    assert "LEDGER_AUTH_MAX_TOKEN_LIFETIME_SECONDS" in result.output
    ok = CliRunner().invoke(app, ["token", "--sub", "ops", "--role", "admin", "--ttl", "3600"])
    assert ok.exit_code == 0, ok.output


# -- bounded presentations -----------------------------------------------------


def test_presentations_beyond_the_bound_are_a_uniform_409(
    http_world: HttpWorld, settings: Settings
) -> None:
    body = {
        "version": 1,
        "identity_binding_id": PROVENANCE.identity_binding_id,
        "channel_binding_id": PROVENANCE.channel_binding_id,
        "conversation_key": PROVENANCE.conversation_key,
    }
    path = f"{API}/proposals/{http_world.proposal_id}/presentations"
    proposer = http_world.headers("proposer")
    for _ in range(settings.max_active_presentations):
        assert http_world.client.post(path, headers=proposer, json=body).status_code == 201
    response = http_world.client.post(path, headers=proposer, json=body)
    assert_error(response, 409, "too_many_presentations")
