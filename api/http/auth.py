"""Bearer JWT authentication: who is calling, in which role, through what.

Tokens are HS256 (``LEDGER_AUTH_HS256_SECRET``), RS256 with configured PEM
public keys (``LEDGER_AUTH_RS256_PUBLIC_KEY``), or RS256 and ES256 signed by
an identity provider whose key set is at ``LEDGER_AUTH_JWKS_URL``
(``adapters.jwks``: cached, bounded, refreshed on an unknown ``kid`` at most
once per interval). Only the configured algorithms are accepted; ``none``
never is. Every token must carry ``exp``, a subject and a role (which claims
hold them: ``api.http.claims``); with ``LEDGER_AUTH_ISSUER`` and
``LEDGER_AUTH_AUDIENCE`` set (required with a JWKS), every token must carry
exactly that ``iss`` and ``aud``. ``exp``, ``nbf`` and ``iat`` are judged with
``LEDGER_AUTH_LEEWAY_SECONDS`` of clock skew. A ``channel`` token carries the
provenance of an approval in its claims, or is a channel service's (see
``api.http.claims``). Every refusal is the same 401.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from adapters.jwks import ALGORITHMS as JWKS_ALGORITHMS
from adapters.jwks import JwksCache, JwksLimits, http_fetcher
from adapters.settings import (
    DEFAULT_MAX_TOKEN_LIFETIME_SECONDS,
    Environment,
    Settings,
    SettingsError,
)
from api.http.claims import (
    MAX_CONVERSATION_KEY_CHARS,
    MAX_SUBJECT_CHARS,
    PROVENANCE_CLAIMS,
    ClaimRules,
    caller_from_claims,
    put_claim,
)
from api.service.principal import Principal, Role
from api.service.roles import DEFAULT_TTL_SECONDS
from domain.errors import InvalidInput, Unauthenticated
from domain.services.approval import Provenance

MAX_TOKEN_CHARS = 8192
VERIFIED_CACHE_SIZE = 4096

_MISSING = "Missing bearer token."
_INVALID = "Invalid or expired bearer token."
_PEM_BLOCK = re.compile(
    r"-----BEGIN (?:RSA )?PUBLIC KEY-----.+?-----END (?:RSA )?PUBLIC KEY-----", re.DOTALL
)


__all__ = [
    "DEFAULT_TTL_SECONDS",
    "MAX_CONVERSATION_KEY_CHARS",
    "MAX_SUBJECT_CHARS",
    "PROVENANCE_CLAIMS",
    "Caller",
    "ClaimRules",
    "Principal",
    "Role",
    "TokenRules",
    "TokenVerifier",
    "caller_from_claims",
    "claimed_lifetime",
    "load_rs256_keys",
    "mint_token",
]

Caller = Principal
"""The HTTP name of the principal a verified bearer token proves (``api.service``)."""


class TokenRules:
    """What every token must say besides its signature: issuer, audience, skew, claims."""

    def __init__(
        self,
        *,
        issuer: str | None = None,
        audience: str | None = None,
        leeway_seconds: int = 0,
        claims: ClaimRules | None = None,
    ) -> None:
        self.issuer = issuer
        self.audience = audience
        self.leeway_seconds = leeway_seconds
        self.claims = claims or ClaimRules()

    @classmethod
    def from_settings(cls, settings: Settings) -> TokenRules:
        return cls(
            issuer=settings.auth_issuer,
            audience=settings.auth_audience,
            leeway_seconds=settings.auth_leeway_seconds,
            claims=ClaimRules(
                role_claim=settings.auth_role_claim,
                subject_claim=settings.auth_subject_claim,
                channel_claim=settings.auth_channel_claim,
                channel_services=settings.channel_services,
            ),
        )

    @property
    def required(self) -> list[str]:
        return ["exp"] + (["iss"] if self.issuer else []) + (["aud"] if self.audience else [])


def load_rs256_keys(pem_text: str) -> list[RSAPublicKey]:
    """Parse one or more PEM RSA public keys (``\\n`` escapes allowed, as env vars often have)."""
    blocks = _PEM_BLOCK.findall(pem_text.replace("\\n", "\n"))
    keys: list[RSAPublicKey] = []
    for block in blocks:
        try:
            key = load_pem_public_key(block.encode())
        except ValueError:
            key = None
        if not isinstance(key, RSAPublicKey):
            raise SettingsError("LEDGER_AUTH_RS256_PUBLIC_KEY: not a valid PEM RSA public key")
        keys.append(key)
    if not keys:
        raise SettingsError("LEDGER_AUTH_RS256_PUBLIC_KEY: no PEM public key found")
    return keys


def claimed_lifetime(claims: dict[str, Any], now: float) -> float:
    """Seconds the token claims to live: ``exp - iat``, or ``exp - now`` without ``iat``.

    Called after the library checked that both are numbers.
    """
    start = claims.get("iat")
    return float(claims["exp"]) - (float(start) if start is not None else now)


class TokenVerifier:
    """Verifies bearer tokens against the configured algorithms and keys only.

    A token that claims to live longer than ``max_lifetime_seconds`` is refused
    like any other invalid token, so a leaked long-lived token is not forever.
    """

    def __init__(
        self,
        keys: dict[str, list[Any]],
        max_lifetime_seconds: int = DEFAULT_MAX_TOKEN_LIFETIME_SECONDS,
        *,
        now: Callable[[], float] = time.time,
        cache_size: int = VERIFIED_CACHE_SIZE,
        jwks: JwksCache | None = None,
        rules: TokenRules | None = None,
    ) -> None:
        self._keys = {alg: list(found) for alg, found in keys.items() if found}
        self.max_lifetime_seconds = max_lifetime_seconds
        self.jwks = jwks
        self.rules = rules or TokenRules()
        # Tokens verified before, by their SHA-256 (the token itself is not kept),
        # with their expiry: the signature check and PyJWT's parsing are most of
        # the CPU of a status read, and a client sends the same token many times.
        # Only tokens that passed every check get in; each use re-checks ``exp``.
        self._now = now
        self._cache_size = cache_size
        self._verified: OrderedDict[bytes, tuple[Caller, float]] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> TokenVerifier:
        """HS256 unless production still has the development secret; RS256 PEM
        keys and a JWKS when configured.

        Raises SettingsError for an unusable public key, so start-up fails clearly.
        """
        keys: dict[str, list[Any]] = {}
        dev_secret_in_production = (
            settings.env is Environment.PRODUCTION and settings.uses_development_secret
        )
        if not dev_secret_in_production:
            keys["HS256"] = [settings.auth_hs256_secret.get_secret_value()]
        if settings.auth_rs256_public_key:
            keys["RS256"] = list(load_rs256_keys(settings.auth_rs256_public_key))
        jwks = None
        if settings.auth_jwks_url:
            limits = JwksLimits(
                max_keys=settings.auth_jwks_max_keys,
                max_bytes=settings.auth_jwks_max_bytes,
                min_refresh_seconds=settings.auth_jwks_min_refresh_seconds,
                cache_seconds=settings.auth_jwks_cache_seconds,
                timeout_seconds=settings.auth_jwks_timeout_seconds,
            )
            jwks = JwksCache(http_fetcher(settings.auth_jwks_url, limits), limits)
        return cls(
            keys,
            max_lifetime_seconds=settings.auth_max_token_lifetime_seconds,
            jwks=jwks,
            rules=TokenRules.from_settings(settings),
        )

    @property
    def algorithms(self) -> tuple[str, ...]:
        found = list(self._keys)
        if self.jwks is not None:
            found += [alg for alg in JWKS_ALGORITHMS if alg not in found]
        return tuple(found)

    def verify(self, token: str | None) -> Caller:
        """The caller a token proves, or Unauthenticated (never says which check failed).

        May fetch the identity provider's key set (blocking): on an event loop,
        call :meth:`verify_cached` first."""
        caller = self._verify_token(token, may_fetch=True)
        assert caller is not None  # only may_fetch=False answers None
        return caller

    def verify_cached(self, token: str | None) -> Caller | None:
        """As :meth:`verify` without any network I/O: None when the key set must
        be fetched first (then call :meth:`verify` off the event loop)."""
        return self._verify_token(token, may_fetch=False)

    def _verify_token(self, token: str | None, *, may_fetch: bool) -> Caller | None:
        if not token:
            raise Unauthenticated(_MISSING)
        if len(token) > MAX_TOKEN_CHARS:
            raise Unauthenticated(_INVALID)
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        with self._lock:
            known = self._verified.get(digest)
            if known is not None:
                if self._now() < known[1]:
                    self._verified.move_to_end(digest)
                    return known[0]
                del self._verified[digest]
        verified = self._verify(token, may_fetch=may_fetch)
        if verified is None:
            return None
        caller, expires = verified
        with self._lock:
            self._verified[digest] = (caller, expires)
            while len(self._verified) > self._cache_size:
                self._verified.popitem(last=False)
        return caller

    def _verify(self, token: str, *, may_fetch: bool) -> tuple[Caller, float] | None:
        """Every check, and the caller with its expiry (Unauthenticated otherwise);
        None when a key set fetch is needed and ``may_fetch`` is False."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Unauthenticated(_INVALID) from None
        algorithm = header.get("alg")
        kid = header.get("kid")
        if not isinstance(algorithm, str) or (kid is not None and not isinstance(kid, str)):
            raise Unauthenticated(_INVALID)
        for key in self._keys.get(algorithm, []):
            claims = self._decode(token, key, algorithm)
            if claims is not None:
                return self._accept(claims)
        if self.jwks is None or algorithm not in JWKS_ALGORITHMS:
            raise Unauthenticated(_INVALID)
        found = self.jwks.keys_for(kid, algorithm, may_fetch=may_fetch)
        if found is None:
            return None
        for candidate in found:
            claims = self._decode(token, candidate.key, algorithm)
            if claims is not None:
                return self._accept(claims)
        raise Unauthenticated(_INVALID)

    def _decode(self, token: str, key: Any, algorithm: str) -> dict[str, Any] | None:
        """The claims when ``key`` signed the token and every registered claim
        holds; None for another key's signature; Unauthenticated otherwise."""
        rules = self.rules
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                issuer=rules.issuer,
                audience=rules.audience,
                leeway=rules.leeway_seconds,
                options={"require": rules.required},
            )
        except jwt.InvalidSignatureError:
            return None
        except jwt.PyJWTError:
            raise Unauthenticated(_INVALID) from None
        return claims

    def _accept(self, claims: dict[str, Any]) -> tuple[Caller, float]:
        now = self._now()
        expires = float(claims["exp"]) + self.rules.leeway_seconds
        if claimed_lifetime(claims, now) > self.max_lifetime_seconds or now >= expires:
            raise Unauthenticated(_INVALID)  # the remembered path's rule too
        try:
            return caller_from_claims(claims, self.rules.claims), expires
        except InvalidInput:
            raise Unauthenticated(_INVALID) from None


def mint_token(
    settings: Settings,
    *,
    subject: str,
    role: Role | str,
    provenance: Provenance | None = None,
    channel: str | None = None,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    now: datetime | None = None,
    key: Any = None,
    algorithm: str = "HS256",
    headers: dict[str, Any] | None = None,
) -> str:
    """Sign a token the API accepts (HS256 with the configured secret by default).

    The claims go where the settings read them (``LEDGER_AUTH_*_CLAIM``), with
    the configured ``iss`` and ``aud``. A channel token carries a provenance, a
    channel (a channel service's token), or both; no other role may. Raises
    InvalidInput for claims the verifier would refuse, a lifetime beyond
    ``LEDGER_AUTH_MAX_TOKEN_LIFETIME_SECONDS`` included.
    """
    if ttl_seconds > settings.auth_max_token_lifetime_seconds:
        raise InvalidInput(
            f"the lifetime is limited to {settings.auth_max_token_lifetime_seconds} "
            "seconds (LEDGER_AUTH_MAX_TOKEN_LIFETIME_SECONDS)"
        )
    rules = TokenRules.from_settings(settings)
    claims: dict[str, Any] = {"sub": subject}
    put_claim(claims, rules.claims.subject_claim, subject)
    put_claim(claims, rules.claims.role_claim, str(role))
    if provenance is not None:
        claims.update({name: getattr(provenance, name) for name in PROVENANCE_CLAIMS})
    if channel is not None:
        put_claim(claims, rules.claims.channel_claim, channel)
    caller = caller_from_claims(claims, rules.claims)
    if (provenance is not None or channel is not None) and caller.role is not Role.CHANNEL:
        raise InvalidInput("provenance and channel claims are only for the channel role")
    if rules.issuer:
        claims["iss"] = rules.issuer
    if rules.audience:
        claims["aud"] = rules.audience
    issued = now or datetime.now(UTC)
    claims["iat"] = int(issued.timestamp())
    claims["exp"] = int((issued + timedelta(seconds=ttl_seconds)).timestamp())
    signing_key = settings.auth_hs256_secret.get_secret_value() if key is None else key
    return jwt.encode(claims, signing_key, algorithm=algorithm, headers=headers)
