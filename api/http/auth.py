"""Bearer JWT authentication: who is calling, in which role, through what.

Tokens are HS256 (``LEDGER_AUTH_HS256_SECRET``) or RS256
(``LEDGER_AUTH_RS256_PUBLIC_KEY``, one or more PEM public keys). Only the
configured algorithms are accepted; ``none`` never is. Every token must carry
``exp``, ``sub`` and ``role``; a ``channel`` token also carries the trusted
provenance of an approval (actor, identity binding, channel binding,
conversation), which is taken from here and never from a request body.
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

from adapters.settings import (
    DEFAULT_MAX_TOKEN_LIFETIME_SECONDS,
    Environment,
    Settings,
    SettingsError,
)
from api.service.principal import Principal, Role
from domain.directory import validate_ident
from domain.errors import InvalidInput, Unauthenticated
from domain.services.approval import Provenance
from domain.spec import hidden_character

MAX_TOKEN_CHARS = 8192
MAX_SUBJECT_CHARS = 256
MAX_CONVERSATION_KEY_CHARS = 256
DEFAULT_TTL_SECONDS = 3600
PROVENANCE_CLAIMS = ("actor_id", "identity_binding_id", "channel_binding_id", "conversation_key")
REQUIRED_CLAIMS = ("exp", "sub", "role")
VERIFIED_CACHE_SIZE = 4096

_MISSING = "Missing bearer token."
_INVALID = "Invalid or expired bearer token."
_PEM_BLOCK = re.compile(
    r"-----BEGIN (?:RSA )?PUBLIC KEY-----.+?-----END (?:RSA )?PUBLIC KEY-----", re.DOTALL
)


__all__ = [
    "Caller",
    "Principal",
    "Role",
    "TokenVerifier",
    "caller_from_claims",
    "claimed_lifetime",
    "load_rs256_keys",
    "mint_token",
]

Caller = Principal
"""The HTTP name of the principal a verified bearer token proves (``api.service``)."""


def _plain_claim(claims: dict[str, Any], name: str, max_chars: int) -> str:
    """A string claim that may reach an event, a view or a log line: 1..max_chars
    of valid Unicode with no control, bidi, zero-width or unassigned character."""
    value = claims.get(name)
    if not isinstance(value, str) or not 1 <= len(value) <= max_chars:
        raise InvalidInput(f"{name}: must be 1..{max_chars} characters")
    if hidden_character(value):  # also catches lone surrogates (category Cs)
        raise InvalidInput(f"{name}: must not contain control, bidi or zero-width characters")
    return value


def _check_provenance(claims: dict[str, Any]) -> Provenance:
    """Validate the four provenance claims; raises InvalidInput naming the claim."""
    missing = [name for name in PROVENANCE_CLAIMS if claims.get(name) is None]
    if missing:
        raise InvalidInput(f"a channel token needs {', '.join(missing)}")
    return Provenance(
        actor_id=validate_ident(claims["actor_id"], "actor_id"),
        identity_binding_id=validate_ident(claims["identity_binding_id"], "identity_binding_id"),
        channel_binding_id=validate_ident(claims["channel_binding_id"], "channel_binding_id"),
        conversation_key=_plain_claim(claims, "conversation_key", MAX_CONVERSATION_KEY_CHARS),
    )


def caller_from_claims(claims: dict[str, Any]) -> Caller:
    """Build a caller from verified claims; raises InvalidInput when they are unusable."""
    subject = _plain_claim(claims, "sub", MAX_SUBJECT_CHARS)
    role_claim = claims.get("role")
    if not isinstance(role_claim, str) or role_claim not in {r.value for r in Role}:
        raise InvalidInput(f"role: must be one of {', '.join(Role)}")
    role = Role(role_claim)
    if role is Role.CHANNEL:
        return Caller(subject=subject, role=role, provenance=_check_provenance(claims))
    return Caller(subject=subject, role=role)


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
    ) -> None:
        self._keys = {alg: list(found) for alg, found in keys.items() if found}
        self.max_lifetime_seconds = max_lifetime_seconds
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
        """HS256 unless production still has the development secret; RS256 when configured.

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
        return cls(keys, max_lifetime_seconds=settings.auth_max_token_lifetime_seconds)

    @property
    def algorithms(self) -> tuple[str, ...]:
        return tuple(self._keys)

    def verify(self, token: str | None) -> Caller:
        """The caller a token proves, or Unauthenticated (never says which check failed)."""
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
        caller, expires = self._verify(token)
        with self._lock:
            self._verified[digest] = (caller, expires)
            while len(self._verified) > self._cache_size:
                self._verified.popitem(last=False)
        return caller

    def _verify(self, token: str) -> tuple[Caller, float]:
        """Every check, and the caller with its expiry (Unauthenticated otherwise)."""
        try:
            header_alg = jwt.get_unverified_header(token).get("alg")
        except jwt.PyJWTError:
            raise Unauthenticated(_INVALID) from None
        if not isinstance(header_alg, str) or header_alg not in self._keys:
            raise Unauthenticated(_INVALID)
        algorithm: str = header_alg
        for key in self._keys[algorithm]:
            try:
                claims = jwt.decode(
                    token, key, algorithms=[algorithm], options={"require": list(REQUIRED_CLAIMS)}
                )
            except jwt.InvalidSignatureError:
                continue
            except jwt.PyJWTError:
                raise Unauthenticated(_INVALID) from None
            now = self._now()
            if claimed_lifetime(claims, now) > self.max_lifetime_seconds or now >= float(
                claims["exp"]
            ):  # the remembered path's rule too
                raise Unauthenticated(_INVALID)
            try:
                return caller_from_claims(claims), float(claims["exp"])
            except InvalidInput:
                raise Unauthenticated(_INVALID) from None
        raise Unauthenticated(_INVALID)


def mint_token(
    settings: Settings,
    *,
    subject: str,
    role: Role | str,
    provenance: Provenance | None = None,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    now: datetime | None = None,
    key: Any = None,
    algorithm: str = "HS256",
) -> str:
    """Sign a token the API accepts (HS256 with the configured secret by default).

    A channel token must carry a provenance and no other role may. Raises
    InvalidInput for claims the verifier would refuse, a lifetime beyond
    ``LEDGER_AUTH_MAX_TOKEN_LIFETIME_SECONDS`` included.
    """
    if ttl_seconds > settings.auth_max_token_lifetime_seconds:
        raise InvalidInput(
            f"the lifetime is limited to {settings.auth_max_token_lifetime_seconds} "
            "seconds (LEDGER_AUTH_MAX_TOKEN_LIFETIME_SECONDS)"
        )
    claims: dict[str, Any] = {"sub": subject, "role": str(role)}
    if provenance is not None:
        claims.update({name: getattr(provenance, name) for name in PROVENANCE_CLAIMS})
    caller = caller_from_claims(claims)
    if provenance is not None and caller.role is not Role.CHANNEL:
        raise InvalidInput("provenance claims are only for the channel role")
    issued = now or datetime.now(UTC)
    claims["iat"] = int(issued.timestamp())
    claims["exp"] = int((issued + timedelta(seconds=ttl_seconds)).timestamp())
    signing_key = settings.auth_hs256_secret.get_secret_value() if key is None else key
    return jwt.encode(claims, signing_key, algorithm=algorithm)
