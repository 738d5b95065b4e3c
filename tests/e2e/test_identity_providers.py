"""Tokens from an identity provider: RS256 and ES256 checked against its JWKS
(served on loopback), with the required iss and aud, bounded clock skew,
configurable role and subject claims, key rotation, and a key set cache that
stays bounded in size and in refresh rate under a flood of unknown key ids."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from fastapi.testclient import TestClient

from adapters.jwks import JwksCache, JwksLimits, http_fetcher
from adapters.settings import Settings, SettingsError, load_settings
from api.http.app import create_app
from api.http.auth import Role, TokenRules, TokenVerifier
from api.http.claims import ClaimRules
from domain.errors import Unauthenticated
from tests.support.clocks import FixedClock
from tests.support.http_helpers import FIXED_NOW, assert_error
from tests.support.identity_provider import IdentityProvider, SigningKey

ISSUER = "https://idp.test/realms/acme"
AUDIENCE = "execution-ledger"


class Monotonic:
    """The JWKS cache's clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def idp() -> Iterator[IdentityProvider]:
    with IdentityProvider(ISSUER, AUDIENCE) as provider:
        yield provider


def verifier_for(
    idp: IdentityProvider,
    clock: Monotonic,
    *,
    limits: JwksLimits | None = None,
    claims: ClaimRules | None = None,
    leeway: int = 0,
) -> TokenVerifier:
    bounds = limits or JwksLimits(min_refresh_seconds=30, cache_seconds=300, timeout_seconds=2)
    cache = JwksCache(http_fetcher(idp.jwks_url, bounds), bounds, now=clock)
    rules = TokenRules(issuer=ISSUER, audience=AUDIENCE, leeway_seconds=leeway, claims=claims)
    return TokenVerifier({}, jwks=cache, rules=rules)


def refused(verifier: TokenVerifier, token: str) -> bool:
    try:
        verifier.verify(token)
    except Unauthenticated as exc:
        assert exc.detail == "Invalid or expired bearer token."  # one answer for every reason
        return True
    return False


def test_rs256_and_es256_tokens_of_the_key_set_are_accepted(idp: IdentityProvider) -> None:
    verifier = verifier_for(idp, Monotonic())
    rsa_key, ec_key = idp.keys
    by_rsa = verifier.verify(idp.token("ops", "admin", key=rsa_key))
    by_ec = verifier.verify(idp.token("assistant", "proposer", key=ec_key))
    assert (by_rsa.subject, by_rsa.role) == ("ops", Role.ADMIN)
    assert (by_ec.subject, by_ec.role) == ("assistant", Role.PROPOSER)
    assert idp.jwks_requests == 1  # one fetch served both keys


def test_a_rotated_key_is_fetched_on_its_first_token_and_a_retired_one_stops_working(
    idp: IdentityProvider,
) -> None:
    clock = Monotonic()
    verifier = verifier_for(idp, clock)
    old = idp.keys[0]
    assert verifier.verify(idp.token("ops", key=old)).subject == "ops"
    new = idp.rotate("rsa-2")
    clock.now += 31  # past the refresh interval since the first fetch
    assert verifier.verify(idp.token("ops-2", key=new)).subject == "ops-2"
    assert idp.jwks_requests == 2
    assert verifier.verify(idp.token("ops-3", key=old)).subject == "ops-3"  # both published
    idp.retire(old.kid)
    clock.now += 301  # the cached set is too old: the next token refreshes it
    assert refused(verifier, idp.token("ops-4", key=old))
    assert verifier.verify(idp.token("ops-5", key=new)).subject == "ops-5"
    assert idp.jwks_requests == 3


def test_a_flood_of_unknown_key_ids_costs_the_provider_one_fetch_per_interval(
    idp: IdentityProvider,
) -> None:
    clock = Monotonic()
    verifier = verifier_for(idp, clock)
    assert verifier.verify(idp.token("ops")).subject == "ops"
    strangers = [SigningKey(f"unknown-{n}") for n in range(3)]
    for n in range(300):
        assert refused(verifier, strangers[n % 3].sign(idp.claims(f"x{n}", "admin")))
    assert idp.jwks_requests == 1  # within the interval: refused without a fetch
    # A key the provider really rotated in waits for the interval, then works.
    new = idp.rotate("rsa-2")
    assert refused(verifier, idp.token("early", key=new))
    clock.now += 30
    assert verifier.verify(idp.token("on-time", key=new)).subject == "on-time"
    for n in range(100):
        assert refused(verifier, strangers[0].sign(idp.claims(f"y{n}", "admin")))
    assert idp.jwks_requests == 2


@pytest.mark.parametrize(
    ("case", "claims"),
    [
        ("wrong issuer", {"iss": "https://evil.test/realms/acme"}),
        ("no issuer", {"iss": None}),
        ("wrong audience", {"aud": "another-app"}),
        ("no audience", {"aud": None}),
        ("expired", {"exp": -120}),  # seconds from now, beyond the 30 s leeway
        ("not yet valid", {"nbf": 120}),
        ("two ledger roles", {"role": ["admin", "proposer"]}),
        ("unknown role", {"role": "root"}),
        ("no subject", {"sub": None}),
    ],
)
def test_a_token_that_breaks_a_rule_gets_the_uniform_refusal(
    idp: IdentityProvider, case: str, claims: dict[str, Any]
) -> None:
    verifier = verifier_for(idp, Monotonic(), leeway=30)
    base = idp.claims("ops", "admin")
    now = int(time.time())
    base.update({k: now + v if k in ("exp", "nbf") else v for k, v in claims.items()})
    token = idp.keys[0].sign({k: v for k, v in base.items() if v is not None})
    assert refused(verifier, token), case


def test_clock_skew_within_the_leeway_is_tolerated(idp: IdentityProvider) -> None:
    verifier = verifier_for(idp, Monotonic(), leeway=30)
    token = idp.keys[0].sign(idp.claims("ops", "admin", exp=int(time.time()) - 10))
    assert verifier.verify(token).subject == "ops"
    strict = verifier_for(idp, Monotonic(), leeway=0)
    assert refused(strict, token)


def test_an_audience_list_that_names_the_ledger_is_accepted(idp: IdentityProvider) -> None:
    verifier = verifier_for(idp, Monotonic())
    token = idp.token("ops", aud=[AUDIENCE, "https://idp.test/userinfo"])
    assert verifier.verify(token).role is Role.ADMIN


def test_the_role_and_subject_come_from_configured_claims(idp: IdentityProvider) -> None:
    rules = ClaimRules(role_claim="realm_access.roles", subject_claim="azp")
    verifier = verifier_for(idp, Monotonic(), claims=rules)
    token = idp.token(
        "user-uuid",
        None,
        azp="assistant-backend",
        realm_access={"roles": ["offline_access", "proposer"]},
    )
    caller = verifier.verify(token)
    assert (caller.subject, caller.role) == ("assistant-backend", Role.PROPOSER)
    namespaced = ClaimRules(role_claim="https://ledger.example/role")
    verifier = verifier_for(idp, Monotonic(), claims=namespaced)
    token = idp.token("ops", None, **{"https://ledger.example/role": "admin"})
    assert verifier.verify(token).role is Role.ADMIN


def test_an_oversized_or_overfull_key_set_is_refused_and_the_last_good_one_kept(
    idp: IdentityProvider,
) -> None:
    clock = Monotonic()
    limits = JwksLimits(max_keys=3, max_bytes=4096, min_refresh_seconds=10, cache_seconds=10)
    verifier = verifier_for(idp, clock, limits=limits)
    assert verifier.verify(idp.token("ops")).subject == "ops"
    for n, document in enumerate(
        (
            json.dumps({"keys": [idp.keys[0].jwk] * 4}).encode(),  # more than max_keys
            json.dumps({"keys": [idp.keys[0].jwk], "pad": "x" * 5000}).encode(),  # > max_bytes
            b"not json",
        )
    ):
        idp.document = document
        clock.now += 11
        assert verifier.verify(idp.token(f"still-ok-{n}")).subject == f"still-ok-{n}"
    assert idp.jwks_requests == 4
    idp.document = None
    new = idp.rotate("rsa-2")
    clock.now += 11
    assert verifier.verify(idp.token("rotated", key=new)).subject == "rotated"


def test_keys_that_cannot_sign_these_tokens_are_left_out(idp: IdentityProvider) -> None:
    small = SigningKey("small")
    encrypting = SigningKey("enc")
    encrypting.jwk["use"] = "enc"
    from cryptography.hazmat.primitives.asymmetric import rsa
    from jwt.algorithms import RSAAlgorithm

    small.private = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    small.jwk = {**json.loads(RSAAlgorithm.to_jwk(small.private.public_key())), "kid": "small"}
    usable = idp.keys[0]
    idp.keys = [small, encrypting, *idp.keys]
    verifier = verifier_for(idp, Monotonic())
    with pytest.warns(jwt.warnings.InsecureKeyLengthWarning):  # PyJWT says so too
        weak = small.sign(idp.claims("ops", "admin"))
    assert refused(verifier, weak)
    assert refused(verifier, encrypting.sign(idp.claims("ops", "admin")))
    assert verifier.verify(idp.token("ops", key=usable)).subject == "ops"


def test_an_hs256_token_signed_with_a_public_key_is_refused(idp: IdentityProvider) -> None:
    verifier = verifier_for(idp, Monotonic())
    verifier.verify(idp.token("ops"))
    forged = jwt.encode(idp.claims("ops", "admin"), "x" * 64, algorithm="HS256")
    assert refused(verifier, forged)
    unsigned = jwt.encode(idp.claims("ops", "admin"), None, algorithm="none")
    assert refused(verifier, unsigned)


def test_the_event_loop_never_waits_for_the_key_set(idp: IdentityProvider) -> None:
    verifier = verifier_for(idp, Monotonic())
    token = idp.token("ops")
    assert verifier.verify_cached(token) is None  # a fetch is due: not on the loop
    assert idp.jwks_requests == 0
    assert verifier.verify(token).subject == "ops"
    assert verifier.verify_cached(idp.token("ops-2")) is not None


# -- through the app, from settings ---------------------------------------------


def jwks_settings(idp: IdentityProvider, **more: Any) -> Settings:
    return load_settings(
        store="memory",
        env="test",
        auth_jwks_url=idp.jwks_url,
        auth_issuer=ISSUER,
        auth_audience=AUDIENCE,
        **more,
    )


def test_the_api_accepts_the_providers_tokens_and_refuses_others_alike(
    idp: IdentityProvider,
) -> None:
    from adapters.bootstrap import build_ledger

    settings = jwks_settings(idp, auth_leeway_seconds=30)
    ledger = build_ledger(settings, clock=FixedClock(FIXED_NOW))
    with TestClient(create_app(settings, ledger=ledger)) as client:
        url = "/api/conversational/directory/actors/alice"
        ok = client.get(url, headers={"Authorization": f"Bearer {idp.token('ops')}"})
        assert ok.status_code == 404, ok.text  # authenticated: the actor is just not there
        for token in (
            idp.token("ops", aud="someone-else"),
            idp.token("ops", iss="https://evil.test"),
            idp.token("ops", exp=int(time.time()) - 600),
            SigningKey("stranger").sign(idp.claims("ops", "admin")),
        ):
            assert_error(
                client.get(url, headers={"Authorization": f"Bearer {token}"}),
                401,
                "unauthenticated",
            )
    ledger.close()


def test_concurrent_requests_with_a_new_key_fetch_once(idp: IdentityProvider) -> None:
    from adapters.bootstrap import build_ledger
    from api.http.deps import current_caller

    settings = jwks_settings(idp)
    ledger = build_ledger(settings, clock=FixedClock(FIXED_NOW))
    verifier = TokenVerifier.from_settings(settings)
    from fastapi.security import HTTPAuthorizationCredentials

    async def many() -> list[Any]:
        tokens = [idp.token(f"ops-{n}") for n in range(20)]
        return await asyncio.gather(
            *(
                current_caller(
                    verifier, HTTPAuthorizationCredentials(scheme="Bearer", credentials=t)
                )
                for t in tokens
            )
        )

    callers = asyncio.run(many())
    assert sorted(c.subject for c in callers) == sorted(f"ops-{n}" for n in range(20))
    assert idp.jwks_requests == 1
    ledger.close()


def test_a_jwks_without_issuer_and_audience_does_not_start() -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(store="memory", auth_jwks_url="https://idp.example/jwks.json")
    assert "LEDGER_AUTH_JWKS_URL needs LEDGER_AUTH_ISSUER and LEDGER_AUTH_AUDIENCE" in str(
        caught.value
    )


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("ftp://idp.example/jwks.json", "needs an http:// or https:// scheme"),
        ("https://idp.example:99999/jwks.json", "the port must be a number from 1 to 65535"),
        ("https://idp.ex\u0430mple/jwks.json", "the host must be ASCII"),
        ("http://idp.example/jwks.json", "LEDGER_ENV=production needs https://"),
    ],
)
def test_an_unusable_jwks_url_is_one_line_at_start_up(url: str, fragment: str) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(
            env="production",
            auth_jwks_url=url,
            auth_issuer=ISSUER,
            auth_audience=AUDIENCE,
        )
    message = str(caught.value)
    assert fragment in message and "\n" not in message


def test_production_with_a_jwks_needs_no_shared_secret() -> None:
    settings = load_settings(
        env="production",
        auth_jwks_url="https://idp.example/jwks.json",
        auth_issuer=ISSUER,
        auth_audience=AUDIENCE,
    )
    verifier = TokenVerifier.from_settings(settings)
    assert verifier.algorithms == ("RS256", "ES256")  # the development secret is off


def test_threads_racing_on_a_rotated_key_share_one_fetch(idp: IdentityProvider) -> None:
    import threading

    clock = Monotonic()
    verifier = verifier_for(idp, clock)
    verifier.verify(idp.token("warm-up"))
    for round_ in range(3):
        new = idp.rotate(f"rsa-round-{round_}")
        clock.now += 31
        before = idp.jwks_requests
        barrier = threading.Barrier(16)
        subjects: list[str] = []

        def verify(
            n: int, key: SigningKey, r: int, gate: threading.Barrier, out: list[str]
        ) -> None:
            token = idp.token(f"t{r}-{n}", key=key)
            gate.wait()
            out.append(verifier.verify(token).subject)

        threads = [
            threading.Thread(target=verify, args=(n, new, round_, barrier, subjects))
            for n in range(16)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(subjects) == sorted(f"t{round_}-{n}" for n in range(16))
        assert idp.jwks_requests == before + 1
