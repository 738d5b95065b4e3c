"""Console sign-in and sign-out: a bearer token exchanged for a session
(OpenID Connect sign-in is :mod:`api.console.oidc`). An admin token opens the
console; an actor token of an enabled directory actor opens a member's
session, which reaches only that actor's pending approvals.

The session lives in the store (:mod:`api.console.session`): signing out
deletes it, so a copy of the cookie opens nothing afterwards. Every cookie set
here, the sign-out's expired one included, is HttpOnly, SameSite=Strict and
``Secure`` as the settings say.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

import jwt
from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from adapters.settings import Settings
from api.console.routes import AnySessionDep, SignInRequired, _page
from api.console.session import (
    SESSION_COOKIE,
    SIGNIN_COOKIE,
    SessionStore,
    delete_cookie,
    same_secret,
    set_cookie,
    signin_nonce,
)
from api.http.auth import Role, TokenVerifier
from api.http.deps import LedgerDep, SettingsDep, get_verifier
from api.service import ballots
from domain.errors import Unauthenticated

router = APIRouter(prefix="/console", include_in_schema=False)
SIGNIN_FORM_SECONDS = 600
BEARER_METHOD = "admin_token"
"""How these sessions were signed in (another sign-in records its own)."""
MEMBER_METHOD = "actor_token"
"""A member's session from an actor token."""


@router.get("/signin", response_class=HTMLResponse)
def signinform_page(request: Request, settings: SettingsDep) -> Response:
    return form_page(request, settings, None, 200)


@router.post("/signin", response_class=HTMLResponse)
def signin(
    request: Request,
    ledger: LedgerDep,
    settings: SettingsDep,
    verifier: Annotated[TokenVerifier, Depends(get_verifier)],
    token: Annotated[str, Form(max_length=8192)] = "",
    csrf: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    """Exchange an admin (or a member's actor) bearer token for a session (the
    token is not kept)."""
    if not same_secret(csrf, request.cookies.get(SIGNIN_COOKIE)):
        return form_page(request, settings, "The sign-in form expired. Try again.", 400)
    try:
        caller = verifier.verify(token.strip())
    except Unauthenticated:
        caller = None
    member = (
        caller is not None
        and caller.role is Role.ACTOR
        and ballots.is_enabled_actor(ledger, caller.subject)
    )
    if caller is None or (caller.role is not Role.ADMIN and not member):
        # One answer for a bad token, another role's, and an unknown actor's.
        return form_page(request, settings, "This token cannot open the console.", 401)
    now = ledger.clock.now()
    expires = int(now.timestamp()) + settings.console_session_seconds
    token_exp = jwt.decode(token.strip(), options={"verify_signature": False}).get("exp")
    if isinstance(token_exp, int):
        expires = min(expires, token_exp)  # never outlive the token it came from
    lifetime = max(1, expires - int(now.timestamp()))
    session_id, _ = SessionStore(ledger.store).start(
        subject=caller.subject,
        role=Role.ACTOR if member else Role.ADMIN,
        method=MEMBER_METHOD if member else BEARER_METHOD,
        now=now,
        expires_at=now + timedelta(seconds=lifetime),
    )
    response = RedirectResponse("/console/inbox" if member else "/console", status_code=303)
    set_cookie(response, settings, SESSION_COOKIE, session_id, lifetime)
    delete_cookie(response, settings, SIGNIN_COOKIE)
    return response


def form_page(request: Request, settings: Settings, message: str | None, status: int) -> Response:
    """The sign-in form with a fresh nonce (its double-submit cookie set beside it)."""
    nonce = signin_nonce()
    context = {"nonce": nonce, "error": message, "oidc": settings.console_oidc_issuer is not None}
    response = _page(request, "signin.html", context, status)
    set_cookie(response, settings, SIGNIN_COOKIE, nonce, SIGNIN_FORM_SECONDS)
    return response


@router.post("/signout")
def signout(
    session: AnySessionDep,
    ledger: LedgerDep,
    settings: SettingsDep,
    csrf: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    """End the session on the server (every copy of its cookie), then the cookie."""
    if not same_secret(csrf, session.csrf):
        raise SignInRequired()
    SessionStore(ledger.store).end(session)
    response = RedirectResponse("/console/signin", status_code=303)
    delete_cookie(response, settings, SESSION_COOKIE)
    return response
