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

import hmac
import logging
import math
import secrets
from datetime import datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import RedirectResponse, Response

from adapters.settings import Settings
from api.console.oidc_client import Flow, OidcClient, SignInRefused
from api.console.ratelimit import RateLimit
from api.console.routes import _page
from api.console.session import COOKIE_PATH, SESSION_COOKIE, SessionStore, set_cookie
from api.console.signin import form_page
from api.http.auth import Role
from api.http.deps import LedgerDep, SettingsDep
from domain.ports import Commit, Lookup
from domain.timeutil import format_utc

router = APIRouter(prefix="/console/oidc", include_in_schema=False)
logger = logging.getLogger("ledger.console")

OIDC_METHOD = "oidc"
FLOW_COOKIE = "ledger_console_oidc"
FLOW_PATH = COOKIE_PATH + "/oidc"
FLOW_SECONDS = 600
REFUSED = "This sign-in cannot open the console."
UNREACHABLE = "The identity provider cannot be reached now. Try again, or use an admin token."
TOO_MANY = "Too many sign-ins were started from here. Wait a minute, then try again."
MAX_CODE_CHARS = 4096
_FLOW_SECRET_CHARS = 43  # token_urlsafe(32)


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
