"""Console sign-in through OpenID Connect: the authorization code flow with PKCE.

``GET /console/oidc/start`` sends the browser to the provider (its endpoints
come from the issuer's discovery document) with a ``state``, a ``nonce`` and an
S256 code challenge, all derived from one 256-bit flow secret that only the
browser holds, in an HttpOnly cookie scoped to ``/console/oidc``
(SameSite=Lax: the provider's redirect back is a cross-site navigation). The
store keeps ``oidc-flow#<sha256(state)>`` for ten minutes and nothing secret;
the callback deletes it before anything else, so a state (and the code sent
with it) is used once. The callback then checks the state against the cookie,
exchanges the code with the verifier (authlib's client), and checks the ID
token: its signature against the provider's key set (RS256/ES256, cached and
bounded as the API's tokens are), ``iss``, ``aud`` (and ``azp``), ``exp`` by the
ledger's clock with ``LEDGER_AUTH_LEEWAY_SECONDS``, and the
``nonce``. A user whose ``LEDGER_CONSOLE_OIDC_ADMIN_CLAIM`` is (or lists)
``LEDGER_CONSOLE_OIDC_ADMIN_VALUE`` gets a console session from the same
:class:`SessionStore` as a token sign-in (``method="oidc"``); with
``LEDGER_CONSOLE_OIDC_ACTOR_CLAIM`` set, another user whose claim names an
enabled directory actor gets that member's session (their own pending
approvals only). A session expires and
sign-out ends it on the server, and it never outlives the ID token it came
from (its expiry is the earlier of ``LEDGER_CONSOLE_SESSION_SECONDS`` and the
token's ``exp``). Every refusal is one page that says nothing more; the reason
goes to the log, never a token or code.

At the token endpoint the console authenticates as the client the way
``LEDGER_CONSOLE_OIDC_TOKEN_ENDPOINT_AUTH_METHOD`` says, through authlib's
public client API: ``client_secret_basic`` and ``client_secret_post`` send the
secret, ``private_key_jwt`` an assertion good for a minute, signed with the
client's private key (``PrivateKeyJWT``, the key's ``kid`` in its header; RS256
for an RSA key, ES256 for a P-256 one), ``none`` only the client id. The key is loaded when the
app is made, so a key file that does not load stops start-up in one line.

Starting a sign-in writes to the store, so each client address may start
``LEDGER_CONSOLE_OIDC_STARTS_PER_MINUTE`` a minute (:mod:`api.console.ratelimit`);
past that, every start answers the same 429 page until its bucket refills.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import jwt
import requests
from authlib.integrations.requests_client import OAuth2Session, OAuthError
from authlib.oauth2.rfc7523 import PrivateKeyJWT
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import RedirectResponse, Response
from joserfc.jwk import ECKey, RSAKey

from adapters.jwks import ALGORITHMS, JwksCache, JwksError, JwksLimits, http_fetcher
from adapters.settings import Settings, SettingsError
from api.console.ratelimit import RateLimit
from api.console.routes import _page
from api.console.session import COOKIE_PATH, SESSION_COOKIE, SessionStore, set_cookie
from api.console.signin import form_page
from api.http.auth import Role
from api.http.claims import claim_at
from api.http.deps import LedgerDep, SettingsDep
from api.service import ballots
from domain.ports import Commit, Lookup
from domain.timeutil import format_utc

router = APIRouter(prefix="/console/oidc", include_in_schema=False)
logger = logging.getLogger("ledger.console")

OIDC_METHOD = "oidc"
FLOW_COOKIE = "ledger_console_oidc"
FLOW_PATH = COOKIE_PATH + "/oidc"
FLOW_PREFIX = "oidc-flow#"
FLOW_SECONDS = 600
REFUSED = "This sign-in cannot open the console."
UNREACHABLE = "The identity provider cannot be reached now. Try again, or use an admin token."
TOO_MANY = "Too many sign-ins were started from here. Wait a minute, then try again."
TIMEOUT_SECONDS = 5.0
MAX_DOCUMENT_BYTES = 64 * 1024
MAX_CODE_CHARS = 4096
_FLOW_SECRET_CHARS = 43  # token_urlsafe(32)


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


def prepare(app: FastAPI, settings: Settings) -> None:
    """Make the app's client of the configured provider now, so that a client
    key that does not load stops start-up rather than the first sign-in."""
    if settings.console_oidc_issuer is not None:
        app.state.console_oidc = OidcClient(settings)


def _client(request: Request, settings: Settings) -> OidcClient | None:
    """The app's client of the configured provider (None: OIDC sign-in is off)."""
    if settings.console_oidc_issuer is None:
        return None
    client: OidcClient | None = getattr(request.app.state, "console_oidc", None)
    if client is None:
        client = request.app.state.console_oidc = OidcClient(settings)
    return client


def _start_limit(request: Request, settings: Settings) -> RateLimit:
    """The app's limit on sign-in starts per client address."""
    limit: RateLimit | None = getattr(request.app.state, "console_oidc_starts", None)
    if limit is None:
        limit = RateLimit(settings.console_oidc_starts_per_minute, window=60.0)
        request.app.state.console_oidc_starts = limit
    return limit


@router.get("/start")
def start(request: Request, ledger: LedgerDep, settings: SettingsDep) -> Response:
    """Send the browser to the provider, with this sign-in's state, nonce and challenge."""
    client = _client(request, settings)
    if client is None:
        return RedirectResponse("/console/signin", status_code=303)
    limit = _start_limit(request, settings)
    address = request.client.host if request.client else "unknown"
    if not limit.allow(address, ledger.clock.now()):
        refused = form_page(request, settings, TOO_MANY, 429)
        refused.headers["Retry-After"] = str(limit.retry_after())
        return refused
    secret = secrets.token_urlsafe(32)
    flow = Flow.of(secret)
    try:
        url = client.authorization_url(flow)
    except SignInRefused as exc:
        logger.warning("console oidc sign-in unavailable: %s", exc)
        return form_page(request, settings, UNREACHABLE, 502)
    now = ledger.clock.now()
    expires_at = now + timedelta(seconds=FLOW_SECONDS)
    started = {"started_at": format_utc(now)}
    ledger.store.commit(Commit(lookups=[Lookup(flow.key, started, expires_at=expires_at, now=now)]))
    response = RedirectResponse(url, status_code=303)
    response.headers["Cache-Control"] = "no-store"
    response.set_cookie(
        FLOW_COOKIE,
        secret,
        max_age=FLOW_SECONDS,
        httponly=True,
        samesite="lax",
        secure=settings.secure_cookies,
        path=FLOW_PATH,
    )
    return response


@router.get("/callback")
def callback(
    request: Request,
    ledger: LedgerDep,
    settings: SettingsDep,
    state: Annotated[str, Query()] = "",
    code: Annotated[str, Query()] = "",
) -> Response:
    """The provider's answer: a session for an admin, the one refusal page otherwise."""
    client = _client(request, settings)
    if client is None:
        return RedirectResponse("/console/signin", status_code=303)
    now = ledger.clock.now()
    try:
        flow = _consume_flow(ledger, request.cookies.get(FLOW_COOKIE), state, now)
        if not 0 < len(code) <= MAX_CODE_CHARS:
            raise SignInRefused("the provider sent no code (the user declined or it failed)")
        claims = client.claims(code, flow, now)
        subject = claims["sub"]
        if not isinstance(subject, str) or not 1 <= len(subject) <= 256:
            raise SignInRefused("the ID token's sub is not a name")
        admin = client.is_admin(claims)
        member = None if admin else client.member_of(claims, ledger)
        if not admin and member is None:
            raise SignInRefused("the user holds neither the admin claim nor an actor's")
        lifetime = session_lifetime(settings.console_session_seconds, claims["exp"], now)
    except SignInRefused as exc:
        logger.warning("console oidc sign-in refused: %s", exc)
        return _without_flow(form_page(request, settings, REFUSED, 401), settings)
    session_id, _ = SessionStore(ledger.store).start(
        subject=member or subject,
        role=Role.ADMIN if member is None else Role.ACTOR,
        method=OIDC_METHOD,
        now=now,
        expires_at=now + timedelta(seconds=lifetime),
    )
    # A page, not a redirect: the browser arrived from the provider's site, and a
    # SameSite=Strict cookie is sent on the next navigation only if it starts here.
    landing = "/console" if member is None else "/console/inbox"
    response = _page(request, "signed_in.html", {"landing": landing}, 200)
    set_cookie(response, settings, SESSION_COOKIE, session_id, lifetime)
    return _without_flow(response, settings)


def session_lifetime(configured: int, token_exp: float, now: datetime) -> int:
    """Whole seconds a session lives: the configured lifetime, cut at the ID
    token's ``exp`` (a session never outlives the token that made it)."""
    lifetime = min(configured, math.floor(token_exp - now.timestamp()))
    if lifetime < 1:
        raise SignInRefused("the ID token expires before a session could start")
    return lifetime


def _consume_flow(ledger: Any, secret: str | None, state: str, now: datetime) -> Flow:
    """This browser's flow, if the state is its own and not used yet (then it is used)."""
    if not secret or len(secret) != _FLOW_SECRET_CHARS:
        raise SignInRefused("no sign-in was started in this browser")
    flow = Flow.of(secret)
    if not hmac.compare_digest(flow.state.encode(), state.encode()):
        raise SignInRefused("the state is not this browser's sign-in")
    if ledger.store.get_lookup(flow.key, now=now) is None:
        raise SignInRefused("the sign-in was used already or expired")
    ledger.store.delete_lookup(flow.key)
    return flow


def _without_flow(response: Response, settings: Settings) -> Response:
    response.delete_cookie(
        FLOW_COOKIE, path=FLOW_PATH, httponly=True, samesite="lax", secure=settings.secure_cookies
    )
    return response
