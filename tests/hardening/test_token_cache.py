"""The verifier remembers tokens it verified (by hash, until their ``exp``): a
remembered token is still refused once it expires, only tokens that passed
every check are remembered, and the memory is bounded."""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest

from adapters.settings import load_settings
from api.http.auth import Role, TokenVerifier
from domain.errors import Unauthenticated

SECRET = "s" * 32


def token(**claims: Any) -> str:
    now = int(time.time())
    body: dict[str, Any] = {"sub": "ops", "role": "admin", "iat": now, "exp": now + 600}
    body.update(claims)
    return jwt.encode(body, SECRET, algorithm="HS256")


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def test_a_remembered_token_is_refused_once_it_expires() -> None:
    clock = Clock()
    verifier = TokenVerifier({"HS256": [SECRET]}, now=clock)
    exp = int(time.time()) + 600
    good = token(exp=exp)
    assert verifier.verify(good).role is Role.ADMIN
    assert verifier.verify(good).role is Role.ADMIN  # from memory

    clock.now = exp  # PyJWT's rule: valid while now < exp
    with pytest.raises(Unauthenticated):
        verifier.verify(good)


def test_a_refused_token_is_not_remembered_and_stays_refused() -> None:
    verifier = TokenVerifier({"HS256": [SECRET]})
    forged = jwt.encode(
        {"sub": "ops", "role": "admin", "exp": int(time.time()) + 600}, "x" * 32, algorithm="HS256"
    )
    for _ in range(3):
        with pytest.raises(Unauthenticated):
            verifier.verify(forged)
    assert len(verifier._verified) == 0


def test_the_memory_of_verified_tokens_is_bounded() -> None:
    verifier = TokenVerifier({"HS256": [SECRET]}, cache_size=8)
    for n in range(50):
        assert verifier.verify(token(sub=f"user{n}")).subject == f"user{n}"
    assert len(verifier._verified) == 8
    assert verifier.verify(token(sub="user0")).subject == "user0"  # verified again


def test_the_token_itself_is_not_kept() -> None:
    verifier = TokenVerifier.from_settings(load_settings(store="memory", env="test"))
    secret = load_settings(store="memory", env="test").auth_hs256_secret.get_secret_value()
    raw = jwt.encode(
        {"sub": "ops", "role": "admin", "exp": int(time.time()) + 600}, secret, algorithm="HS256"
    )
    verifier.verify(raw)
    assert all(isinstance(k, bytes) and len(k) == 32 for k in verifier._verified)
    assert raw not in repr(verifier._verified)
