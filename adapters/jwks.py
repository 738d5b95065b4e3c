"""An identity provider's JSON Web Key Set: fetched, cached and bounded.

The set is fetched when a token names a key (``kid``) the cache lacks and when
the cached set is older than ``cache_seconds``, but never more often than once
per ``min_refresh_seconds``: a flood of tokens naming unknown keys costs the
provider one request per interval, and those tokens fail closed in between.
A document larger than ``max_bytes`` or with more than ``max_keys`` keys is
refused whole; a fetch that fails keeps the keys of the last good one (the
provider being down does not sign anyone out), and a good one replaces them
all (a key the provider withdrew is no longer accepted).

Only signing keys for RS256 (RSA, at least 2048 bits) and ES256 (EC P-256)
are kept, parsed with PyJWT's public ``PyJWK``. Network I/O happens only in
``keys_for(..., may_fetch=True)``; callers on an event loop ask with
``may_fetch=False`` first and fetch on a worker thread when told to.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jwt
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, EllipticCurvePublicKey
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

if TYPE_CHECKING:
    import httpx

ALGORITHMS = ("RS256", "ES256")
MIN_RSA_BITS = 2048
logger = logging.getLogger("ledger.auth")


class JwksError(Exception):
    """The key set could not be fetched or is unusable (a bounded reason, no key material)."""


@dataclass(frozen=True)
class JwksLimits:
    """The bounds of one key set cache (see ``LEDGER_AUTH_JWKS_*``)."""

    max_keys: int = 32
    max_bytes: int = 64 * 1024
    min_refresh_seconds: float = 30.0
    cache_seconds: float = 300.0
    timeout_seconds: float = 5.0


@dataclass(frozen=True)
class JwksKey:
    """One usable signing key of the set."""

    kid: str | None
    algorithm: str
    key: Any


def parse_jwks(document: bytes, limits: JwksLimits) -> list[JwksKey]:
    """The usable signing keys of a JWKS document; JwksError when it is refused."""
    if len(document) > limits.max_bytes:
        raise JwksError(f"the key set is larger than {limits.max_bytes} bytes")
    try:
        data = json.loads(document)
    except (ValueError, RecursionError):
        raise JwksError("the key set is not JSON") from None
    entries = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise JwksError('the key set has no "keys" array')
    if len(entries) > limits.max_keys:
        raise JwksError(f"the key set has more than {limits.max_keys} keys")
    keys = [key for key in map(_usable_key, entries) if key is not None]
    if not keys:
        raise JwksError("the key set has no usable RS256 or ES256 signing key")
    return keys


def _usable_key(entry: Any) -> JwksKey | None:
    if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
        return None
    declared = entry.get("alg")
    if declared is not None and declared not in ALGORITHMS:
        return None
    kid = entry.get("kid")
    if kid is not None and not isinstance(kid, str):
        return None
    try:
        parsed = jwt.PyJWK(entry)
    except (jwt.PyJWTError, ValueError, TypeError, KeyError):
        return None
    key = parsed.key
    if isinstance(key, RSAPublicKey) and key.key_size >= MIN_RSA_BITS:
        algorithm = "RS256"
    elif isinstance(key, EllipticCurvePublicKey) and isinstance(key.curve, SECP256R1):
        algorithm = "ES256"
    else:
        return None  # a private key, a small RSA key, another curve or key type
    if declared is not None and declared != algorithm:
        return None
    return JwksKey(kid=kid, algorithm=algorithm, key=key)


def http_fetcher(
    url: str, limits: JwksLimits, transport: httpx.BaseTransport | None = None
) -> Callable[[], bytes]:
    """A fetch of ``url`` that reads at most ``max_bytes`` and follows no redirect.

    httpx is imported on the first fetch: a server with no key set URL never needs it."""

    def fetch() -> bytes:
        import httpx

        try:
            with (
                httpx.Client(
                    timeout=limits.timeout_seconds, follow_redirects=False, transport=transport
                ) as client,
                client.stream("GET", url, headers={"Accept": "application/json"}) as response,
            ):
                if response.status_code != 200:
                    raise JwksError(f"the key set URL answered HTTP {response.status_code}")
                body = bytearray()
                for chunk in response.iter_bytes():
                    body.extend(chunk)
                    if len(body) > limits.max_bytes:
                        raise JwksError(f"the key set is larger than {limits.max_bytes} bytes")
                return bytes(body)
        except httpx.HTTPError as exc:
            raise JwksError(f"cannot fetch the key set ({type(exc).__name__})") from None

    return fetch


class JwksCache:
    """The keys of one JWKS URL, fetched on demand within the bounds above."""

    def __init__(
        self,
        fetch: Callable[[], bytes],
        limits: JwksLimits,
        *,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self.limits = limits
        self._now = now
        self._keys: list[JwksKey] = []
        self._fetched_at: float | None = None  # the last good document
        self._attempted_at: float | None = None  # the last fetch, good or not
        self._fetching = False
        self._state = threading.Lock()  # held for reads of the state only, never for I/O
        self._fetch_lock = threading.Lock()  # one fetch at a time
        self.fetches = 0

    def keys_for(self, kid: str | None, algorithm: str, *, may_fetch: bool) -> list[JwksKey] | None:
        """The keys that may have signed a token with this ``kid`` and ``alg``.

        ``None`` only with ``may_fetch=False``, when a fetch is due: ask again
        with ``may_fetch=True`` off the event loop. An empty list fails closed.
        """
        with self._state:
            found, due = self._lookup(kid, algorithm)
            if not due:
                return found
            if not may_fetch:
                return None
        with self._fetch_lock:
            with self._state:
                found, due = self._lookup(kid, algorithm)  # another thread may have fetched
                if not due:
                    return found
                self._attempted_at = self._now()
                self._fetching = True
            try:
                self._refresh()
            finally:
                with self._state:
                    self._fetching = False
        with self._state:
            return self._matching(kid, algorithm)

    def _lookup(self, kid: str | None, algorithm: str) -> tuple[list[JwksKey], bool]:
        """(the matching keys, whether a fetch is due first); called under the state lock."""
        found = self._matching(kid, algorithm)
        now = self._now()
        if self._fetching:
            return found, True
        fresh = self._fetched_at is not None and now - self._fetched_at < self.limits.cache_seconds
        if found and fresh:
            return found, False
        allowed = (
            self._attempted_at is None
            or now - self._attempted_at >= self.limits.min_refresh_seconds
        )
        return found, allowed

    def _matching(self, kid: str | None, algorithm: str) -> list[JwksKey]:
        return [
            k
            for k in self._keys
            if k.algorithm == algorithm and (kid is None or k.kid is None or k.kid == kid)
        ]

    def _refresh(self) -> None:
        self.fetches += 1
        try:
            keys = parse_jwks(self._fetch(), self.limits)
        except JwksError as exc:
            logger.warning("jwks refresh failed: %s; the previous keys stay in use", exc)
            return
        with self._state:
            self._keys = keys
            self._fetched_at = self._now()
