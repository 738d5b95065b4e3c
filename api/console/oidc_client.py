"""The console's OpenID Connect client: discovery, the code exchange at the token
endpoint (by the configured client authentication method) and the ID token's checks.
The routes that use it are in :mod:`api.console.oidc`, whose docstring describes the flow.

authlib, requests and the key classes are imported where they are used: every
``ledger serve`` imports this module, and most sign in with no provider."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jwt

from adapters.jwks import ALGORITHMS, JwksCache, JwksError, JwksLimits, http_fetcher
from adapters.settings import Settings, SettingsError
from api.http.claims import claim_at
from api.service import ballots

if TYPE_CHECKING:
    from authlib.integrations.requests_client import OAuth2Session
    from joserfc.jwk import ECKey, RSAKey

TIMEOUT_SECONDS = 5.0
MAX_DOCUMENT_BYTES = 64 * 1024
FLOW_PREFIX = "oidc-flow#"


class SignInRefused(Exception):
    """An OIDC sign-in that opens nothing; the message is for the log only."""


@dataclass(frozen=True)
class Provider:
    """What the discovery document says, and the provider's signing keys."""

    authorization_endpoint: str
    token_endpoint: str
    algorithms: tuple[str, ...]
    keys: JwksCache


@dataclass(frozen=True)
class Flow:
    """One sign-in's values, each derived from the browser's flow secret."""

    state: str
    nonce: str
    verifier: str

    @classmethod
    def of(cls, secret: str) -> Flow:
        def derive(label: str) -> str:
            digest = hmac.new(secret.encode(), f"ledger/oidc/{label}".encode(), hashlib.sha256)
            return digest.hexdigest()  # 64 characters: a valid PKCE verifier too

        return cls(derive("state"), derive("nonce"), derive("verifier"))

    @property
    def key(self) -> str:
        return FLOW_PREFIX + hashlib.sha256(self.state.encode()).hexdigest()


KEY_FILE_VARIABLE = "LEDGER_CONSOLE_OIDC_PRIVATE_KEY_FILE"
MIN_RSA_BITS = 2048
ASSERTION_SECONDS = 60  # a private_key_jwt assertion is good for one exchange, not an hour


def assertion_key(path: str) -> tuple[RSAKey | ECKey, str]:
    """The private key that signs ``private_key_jwt`` assertions, and its
    algorithm; a ``SettingsError`` of one line when it cannot be used."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from joserfc.jwk import ECKey, RSAKey

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise SettingsError(
            f"invalid settings: {KEY_FILE_VARIABLE}: cannot read the key file ({exc.strerror})"
        ) from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise SettingsError(
            f"invalid settings: {KEY_FILE_VARIABLE}: not an unencrypted PEM private key"
        ) from None
    if isinstance(key, rsa.RSAPrivateKey) and key.key_size >= MIN_RSA_BITS:
        return RSAKey.import_key(data), "RS256"
    if isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1):
        return ECKey.import_key(data), "ES256"
    raise SettingsError(
        f"invalid settings: {KEY_FILE_VARIABLE}: needs an RSA key of at least "
        f"{MIN_RSA_BITS} bits or an EC P-256 key"
    )


class OidcClient:
    """The relying party of one configured provider (discovered once per process)."""

    def __init__(self, settings: Settings) -> None:
        assert settings.console_oidc_issuer and settings.console_oidc_client_id
        self.settings = settings
        self.issuer = settings.console_oidc_issuer
        self.client_id = settings.console_oidc_client_id
        self.auth_method = settings.console_oidc_token_auth_method
        self._assertion: tuple[RSAKey | ECKey, str] | None = None
        if self.auth_method == "private_key_jwt":
            assert settings.console_oidc_private_key_file
            self._assertion = assertion_key(settings.console_oidc_private_key_file)
        self._limits = JwksLimits(max_bytes=MAX_DOCUMENT_BYTES, timeout_seconds=TIMEOUT_SECONDS)
        self._provider: Provider | None = None
        self._lock = threading.Lock()

    def provider(self) -> Provider:
        """The discovery document's endpoints (fetched on first use; a failure is
        retried by the next sign-in)."""
        with self._lock:
            if self._provider is None:
                self._provider = self._discover()
            return self._provider

    def _discover(self) -> Provider:
        url = self.issuer.rstrip("/") + "/.well-known/openid-configuration"
        try:
            document = json.loads(http_fetcher(url, self._limits)())
        except (JwksError, ValueError) as exc:
            raise SignInRefused(f"discovery failed: {exc}") from None
        if not isinstance(document, dict) or document.get("issuer") != self.issuer:
            raise SignInRefused("the discovery document names another issuer")
        endpoints = [document.get(name) for name in ("authorization_endpoint", "token_endpoint")]
        jwks_uri = document.get("jwks_uri")
        if not all(isinstance(e, str) and e.startswith(("https://", "http://")) for e in endpoints):
            raise SignInRefused("the discovery document lacks its endpoints")
        if not isinstance(jwks_uri, str):
            raise SignInRefused("the discovery document lacks jwks_uri")
        offered = document.get("id_token_signing_alg_values_supported") or ["RS256"]
        algorithms = tuple(a for a in ALGORITHMS if a in offered)
        keys = JwksCache(http_fetcher(jwks_uri, JwksLimits()), JwksLimits())
        return Provider(str(endpoints[0]), str(endpoints[1]), algorithms, keys)

    def _session(self, token_endpoint: str | None = None) -> OAuth2Session:
        """A client session; with ``token_endpoint``, one that authenticates there."""
        from authlib.integrations.requests_client import OAuth2Session
        from authlib.oauth2.rfc7523 import PrivateKeyJWT

        secret = self.settings.console_oidc_client_secret
        credential: str | RSAKey | ECKey | None = secret.get_secret_value() if secret else None
        if self._assertion is not None:
            credential = self._assertion[0]  # authlib's PrivateKeyJWT signs with it
        session = OAuth2Session(
            client_id=self.client_id,
            client_secret=credential,
            token_endpoint_auth_method=self.auth_method,
            scope=self.settings.console_oidc_scope,
            redirect_uri=self.settings.console_oidc_redirect_url,
            code_challenge_method="S256",
        )
        session.max_redirects = 0
        if self._assertion is not None and token_endpoint is not None:
            kid = self.settings.console_oidc_private_key_id
            # the provider checks exp by its own clock, so by the wall clock here; one
            # exchange per session, so the claim is fresh (authlib's default is an hour)
            expires = int(time.time()) + ASSERTION_SECONDS
            session.register_client_auth_method(
                PrivateKeyJWT(
                    token_endpoint,
                    claims={"exp": expires},
                    headers={"kid": kid},
                    alg=self._assertion[1],
                )
            )
        return session

    def authorization_url(self, flow: Flow) -> str:
        with self._session() as session:
            url, _ = session.create_authorization_url(
                self.provider().authorization_endpoint,
                state=flow.state,
                code_verifier=flow.verifier,
                nonce=flow.nonce,
            )
        return str(url)

    def claims(self, code: str, flow: Flow, now: datetime) -> dict[str, Any]:
        """The checked claims of the ID token the code is exchanged for."""
        import requests
        from authlib.integrations.requests_client import OAuthError

        provider = self.provider()
        try:
            with self._session(provider.token_endpoint) as session:
                token = session.fetch_token(
                    provider.token_endpoint,
                    grant_type="authorization_code",
                    code=code,
                    code_verifier=flow.verifier,
                    timeout=TIMEOUT_SECONDS,
                )
        except (OAuthError, requests.RequestException, ValueError) as exc:
            raise SignInRefused(f"the code exchange failed ({type(exc).__name__})") from None
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise SignInRefused("the token response has no ID token")
        return self._verify(id_token, flow, provider, now)

    def _verify(
        self, id_token: str, flow: Flow, provider: Provider, now: datetime
    ) -> dict[str, Any]:
        try:
            header = jwt.get_unverified_header(id_token)
        except jwt.PyJWTError:
            raise SignInRefused("the ID token is malformed") from None
        algorithm, kid = header.get("alg"), header.get("kid")
        if algorithm not in provider.algorithms or not isinstance(kid, str | None):
            raise SignInRefused(f"the ID token's algorithm {algorithm!r} is not accepted")
        for candidate in provider.keys.keys_for(kid, algorithm, may_fetch=True) or []:
            try:
                claims: dict[str, Any] = jwt.decode(
                    id_token,
                    candidate.key,
                    algorithms=[algorithm],
                    audience=self.client_id,
                    issuer=self.issuer,
                    options={
                        "require": ["iss", "aud", "sub", "exp", "iat"],
                        "verify_exp": False,  # by the ledger's clock, below
                        "verify_iat": False,
                        "verify_nbf": False,
                    },
                )
            except jwt.InvalidSignatureError:
                continue
            except jwt.PyJWTError as exc:
                raise SignInRefused(f"the ID token is refused ({type(exc).__name__})") from None
            self._check_times_and_nonce(claims, flow, now)
            return claims
        raise SignInRefused("no key of the provider signed the ID token")

    def _check_times_and_nonce(self, claims: dict[str, Any], flow: Flow, now: datetime) -> None:
        leeway = self.settings.auth_leeway_seconds
        at = now.timestamp()
        exp, iat = claims["exp"], claims["iat"]
        if not isinstance(exp, int | float) or not isinstance(iat, int | float):
            raise SignInRefused("the ID token's exp or iat is not a number")
        if at >= exp + leeway:  # iat is required, not compared: clocks differ by seconds
            raise SignInRefused("the ID token is expired")
        audience = claims["aud"]
        if isinstance(audience, list) and len(audience) > 1 and claims.get("azp") != self.client_id:
            raise SignInRefused("the ID token is for another authorized party")
        nonce = claims.get("nonce")
        if not isinstance(nonce, str) or not hmac.compare_digest(nonce, flow.nonce):
            raise SignInRefused("the ID token's nonce is not this sign-in's")

    def is_admin(self, claims: dict[str, Any]) -> bool:
        value = claim_at(claims, self.settings.console_oidc_admin_claim)
        wanted = self.settings.console_oidc_admin_value
        return value == wanted or (isinstance(value, list) and wanted in value)

    def member_of(self, claims: dict[str, Any], ledger: Any) -> str | None:
        """The enabled directory actor the user's actor claim names (None: no
        claim configured, none in the token, or no such enabled actor)."""
        path = self.settings.console_oidc_actor_claim
        if path is None:
            return None
        value = claim_at(claims, path)
        return value if ballots.is_enabled_actor(ledger, value) else None
