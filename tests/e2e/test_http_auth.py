"""Bearer JWT authentication and role checks on every directory route."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import APIRouter
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger
from adapters.settings import DEVELOPMENT_SECRET, Settings, SettingsError, load_settings
from api.http.app import create_app
from api.http.auth import Role, mint_token
from api.http.deps import AnyCaller, ChannelCaller
from domain.errors import InvalidInput
from tests.support.http_helpers import DIRECTORY, PROVENANCE, Headers, assert_error

OTHER_SECRET = "another-secret-of-at-least-thirty-two-chars"
ROUTES = [
    ("/actors/alice", {"enabled": True}),
    (
        "/identity-bindings/ib-1",
        {"actor_id": "alice", "channel": "slack", "external_id": "U1", "active": True},
    ),
    ("/channel-bindings/cb-1", {"conversation_key": "C1", "channel": "slack", "active": True}),
    ("/actors/alice/permissions/tasks.write", {"granted": True}),
    (
        "/executor-builds/fake.x/sha256:" + "0" * 64,
        {"delivery_mode": "provider_idempotency", "available": True},
    ),
    ("/targets/task:1", {"revision": "r1"}),
]
ROUTE_CASES = [
    pytest.param(method, path, body, id=f"{method}-{path.split('/')[1]}-{i}")
    for i, (path, body) in enumerate(ROUTES)
    for method in ("PUT", "GET")
]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _raw_token(
    header: dict[str, Any], claims: dict[str, Any], sign: Callable[[bytes], bytes]
) -> str:
    head = _b64(json.dumps(header).encode()) + "." + _b64(json.dumps(claims).encode())
    return head + "." + _b64(sign(head.encode()))


def _claims(**overrides: Any) -> dict[str, Any]:
    claims: dict[str, Any] = {"sub": "root", "role": "admin", "exp": int(time.time()) + 600}
    claims.update(overrides)
    return {k: v for k, v in claims.items() if v is not None}


@pytest.fixture(scope="module")
def rsa_keys() -> tuple[rsa.RSAPrivateKey, rsa.RSAPrivateKey]:
    return (
        rsa.generate_private_key(public_exponent=65537, key_size=2048),
        rsa.generate_private_key(public_exponent=65537, key_size=2048),
    )


def _public_pem(key: rsa.RSAPrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def _bad_credentials(settings: Settings, other_rsa: rsa.RSAPrivateKey) -> dict[str, str | None]:
    secret = settings.auth_hs256_secret.get_secret_value()
    return {
        "no-header": None,
        "basic-scheme": "Basic cm9vdDpyb290",
        "empty-bearer": "Bearer ",
        "garbage": "Bearer not-a-jwt",
        "three-garbage-parts": "Bearer a.b.c",
        "expired": "Bearer " + mint_token(settings, subject="root", role="admin", ttl_seconds=-60),
        "wrong-signature": "Bearer "
        + mint_token(settings, subject="root", role="admin", key=OTHER_SECRET),
        "alg-none": "Bearer " + _raw_token({"alg": "none", "typ": "JWT"}, _claims(), lambda _: b""),
        "alg-none-uppercase": "Bearer " + _raw_token({"alg": "NONE"}, _claims(), lambda _: b""),
        "alg-hs512-not-configured": "Bearer " + jwt.encode(_claims(), secret, algorithm="HS512"),
        "alg-rs256-not-configured": "Bearer " + jwt.encode(_claims(), other_rsa, algorithm="RS256"),
        "missing-exp": "Bearer " + jwt.encode(_claims(exp=None), secret, algorithm="HS256"),
        "missing-sub": "Bearer " + jwt.encode(_claims(sub=None), secret, algorithm="HS256"),
        "missing-role": "Bearer " + jwt.encode(_claims(role=None), secret, algorithm="HS256"),
        "unknown-role": "Bearer " + jwt.encode(_claims(role="root"), secret, algorithm="HS256"),
        "sub-not-a-string": "Bearer " + jwt.encode(_claims(sub=7), secret, algorithm="HS256"),
        "channel-without-provenance": "Bearer "
        + jwt.encode(_claims(role="channel"), secret, algorithm="HS256"),
        "channel-with-bad-actor-id": "Bearer "
        + jwt.encode(
            _claims(
                role="channel",
                actor_id="-x",
                identity_binding_id="ib",
                channel_binding_id="cb",
                conversation_key="c",
            ),
            secret,
            algorithm="HS256",
        ),
        "oversize": "Bearer " + "a" * 9000,
    }


BAD_CREDENTIAL_NAMES = [
    "no-header",
    "basic-scheme",
    "empty-bearer",
    "garbage",
    "three-garbage-parts",
    "expired",
    "wrong-signature",
    "alg-none",
    "alg-none-uppercase",
    "alg-hs512-not-configured",
    "alg-rs256-not-configured",
    "missing-exp",
    "missing-sub",
    "missing-role",
    "unknown-role",
    "sub-not-a-string",
    "channel-without-provenance",
    "channel-with-bad-actor-id",
    "oversize",
]


@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")
@pytest.mark.parametrize("credential", BAD_CREDENTIAL_NAMES)
@pytest.mark.parametrize(("method", "path", "body"), ROUTE_CASES)
def test_bad_credentials_are_401_with_a_bearer_challenge(
    client: TestClient,
    settings: Settings,
    rsa_keys: Any,
    method: str,
    path: str,
    body: dict[str, Any],
    credential: str,
) -> None:
    authorization = _bad_credentials(settings, rsa_keys[1])[credential]
    headers = {} if authorization is None else {"Authorization": authorization}
    json_body = body if method == "PUT" else None
    response = client.request(method, DIRECTORY + path, json=json_body, headers=headers)
    assert_error(response, 401, "unauthenticated")
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("role", ["actor", "channel", "proposer"])
@pytest.mark.parametrize(("method", "path", "body"), ROUTE_CASES)
def test_non_admin_roles_are_403(
    client: TestClient,
    bearer: Callable[..., Headers],
    method: str,
    path: str,
    body: dict[str, Any],
    role: str,
) -> None:
    json_body = body if method == "PUT" else None
    response = client.request(method, DIRECTORY + path, json=json_body, headers=bearer(role))
    assert_error(response, 403, "forbidden")


def test_authentication_is_checked_before_the_body(client: TestClient) -> None:
    response = client.put(DIRECTORY + "/actors/alice", json={"enabled": "yes"})
    assert_error(response, 401, "unauthenticated")


def test_bearer_scheme_is_case_insensitive(client: TestClient, settings: Settings) -> None:
    token = mint_token(settings, subject="root", role="admin")
    response = client.put(
        DIRECTORY + "/actors/alice",
        json={"enabled": True},
        headers={"Authorization": f"bearer {token}"},
    )
    assert response.status_code == 200


@pytest.fixture
def probe_client(settings: Settings, ledger: Ledger) -> Iterator[TestClient]:
    """The app plus two routes showing what the caller dependencies resolve to."""
    app = create_app(settings, ledger=ledger)
    router = APIRouter()

    @router.get("/probe/channel")
    def channel_probe(caller: ChannelCaller) -> dict[str, Any]:
        provenance = caller.require_provenance()
        return {
            "subject": caller.subject,
            "role": caller.role,
            "actor_id": provenance.actor_id,
            "identity_binding_id": provenance.identity_binding_id,
            "channel_binding_id": provenance.channel_binding_id,
            "conversation_key": provenance.conversation_key,
        }

    @router.get("/probe/any")
    def any_probe(caller: AnyCaller) -> dict[str, Any]:
        return {"role": caller.role, "has_provenance": caller.provenance is not None}

    app.include_router(router)
    with TestClient(app) as test_client:
        yield test_client


def test_channel_caller_carries_the_provenance_claims(
    probe_client: TestClient, bearer: Callable[..., Headers]
) -> None:
    response = probe_client.get("/probe/channel", headers=bearer("channel", subject="slack-bot"))
    assert response.status_code == 200
    assert response.json() == {
        "subject": "slack-bot",
        "role": "channel",
        "actor_id": PROVENANCE.actor_id,
        "identity_binding_id": PROVENANCE.identity_binding_id,
        "channel_binding_id": PROVENANCE.channel_binding_id,
        "conversation_key": PROVENANCE.conversation_key,
    }


@pytest.mark.parametrize("role", ["actor", "proposer", "admin"])
def test_other_roles_are_not_channel_callers(
    probe_client: TestClient, bearer: Callable[..., Headers], role: str
) -> None:
    assert_error(probe_client.get("/probe/channel", headers=bearer(role)), 403, "forbidden")
    response = probe_client.get("/probe/any", headers=bearer(role))
    assert response.json() == {"role": role, "has_provenance": False}


def test_provenance_claims_on_another_role_are_ignored(
    probe_client: TestClient, settings: Settings
) -> None:
    token = jwt.encode(
        _claims(
            role="actor",
            actor_id="mallory",
            identity_binding_id="ib",
            channel_binding_id="cb",
            conversation_key="c",
        ),
        settings.auth_hs256_secret.get_secret_value(),
        algorithm="HS256",
    )
    response = probe_client.get("/probe/any", headers={"Authorization": f"Bearer {token}"})
    assert response.json() == {"role": "actor", "has_provenance": False}


def _rs256_client(ledger: Ledger, **overrides: Any) -> TestClient:
    settings = load_settings(store="memory", **overrides)
    return TestClient(create_app(settings, ledger=ledger))


def _put_actor(client: TestClient, token: str) -> Any:
    return client.put(
        DIRECTORY + "/actors/alice",
        json={"enabled": True},
        headers={"Authorization": f"Bearer {token}"},
    )


def test_rs256_tokens_verify_against_the_configured_public_keys(
    ledger: Ledger, rsa_keys: Any
) -> None:
    first, second = rsa_keys
    client = _rs256_client(ledger, auth_rs256_public_key=_public_pem(first))
    settings = load_settings(store="memory")
    assert (
        _put_actor(
            client, mint_token(settings, subject="root", role="admin", key=first, algorithm="RS256")
        ).status_code
        == 200
    )
    assert_error(
        _put_actor(
            client,
            mint_token(settings, subject="root", role="admin", key=second, algorithm="RS256"),
        ),
        401,
        "unauthenticated",
    )
    assert _put_actor(client, mint_token(settings, subject="root", role="admin")).status_code == 200


def test_several_rs256_keys_and_escaped_newlines_are_accepted(
    ledger: Ledger, rsa_keys: Any
) -> None:
    first, second = rsa_keys
    pem = (_public_pem(first) + _public_pem(second)).replace("\n", "\\n")
    client = _rs256_client(ledger, auth_rs256_public_key=pem)
    settings = load_settings(store="memory")
    for key in (first, second):
        token = mint_token(settings, subject="root", role="admin", key=key, algorithm="RS256")
        assert _put_actor(client, token).status_code == 200


def test_the_public_key_is_never_usable_as_an_hmac_secret(ledger: Ledger, rsa_keys: Any) -> None:
    pem = _public_pem(rsa_keys[0])
    client = _rs256_client(ledger, auth_rs256_public_key=pem)
    forged = _raw_token(
        {"alg": "HS256", "typ": "JWT"},
        _claims(),
        lambda data: hmac.new(pem.encode(), data, hashlib.sha256).digest(),
    )
    assert_error(_put_actor(client, forged), 401, "unauthenticated")


def test_production_never_accepts_the_development_secret(ledger: Ledger, rsa_keys: Any) -> None:
    client = _rs256_client(ledger, env="production", auth_rs256_public_key=_public_pem(rsa_keys[0]))
    forged = jwt.encode(_claims(), DEVELOPMENT_SECRET, algorithm="HS256")
    assert_error(_put_actor(client, forged), 401, "unauthenticated")
    token = jwt.encode(_claims(), rsa_keys[0], algorithm="RS256")
    assert _put_actor(client, token).status_code == 200


@pytest.mark.parametrize(
    "pem", ["not a key", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"]
)
def test_an_unusable_public_key_fails_at_start_up(ledger: Ledger, pem: str) -> None:
    settings = load_settings(store="memory", auth_rs256_public_key=pem)
    with pytest.raises(SettingsError, match="LEDGER_AUTH_RS256_PUBLIC_KEY"):
        create_app(settings, ledger=ledger)


def test_mint_token_refuses_claims_the_verifier_would_reject(settings: Settings) -> None:
    with pytest.raises(InvalidInput, match="channel"):
        mint_token(settings, subject="bot", role=Role.CHANNEL)
    with pytest.raises(InvalidInput, match="only for the channel role"):
        mint_token(settings, subject="root", role=Role.ADMIN, provenance=PROVENANCE)
    with pytest.raises(InvalidInput, match="role"):
        mint_token(settings, subject="root", role="superuser")
    with pytest.raises(InvalidInput, match="sub"):
        mint_token(settings, subject="", role="admin")


def test_minted_tokens_carry_exactly_the_expected_claims(settings: Settings) -> None:
    token = mint_token(
        settings, subject="bot", role="channel", provenance=PROVENANCE, ttl_seconds=120
    )
    claims = jwt.decode(token, settings.auth_hs256_secret.get_secret_value(), algorithms=["HS256"])
    assert claims["exp"] - claims["iat"] == 120
    assert {k: v for k, v in claims.items() if k not in {"exp", "iat"}} == {
        "sub": "bot",
        "role": "channel",
        "actor_id": "alice",
        "identity_binding_id": "ib-alice-slack",
        "channel_binding_id": "cb-general",
        "conversation_key": "C042",
    }
