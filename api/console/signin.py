"""Console sign-in and sign-out: an admin bearer token exchanged for a session cookie."""

from __future__ import annotations

from typing import Annotated

import jwt
from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from api.console.routes import SessionDep, SignInRequired, _page, _secure, get_signer
from api.console.session import SESSION_COOKIE, SIGNIN_COOKIE, same_secret
from api.http.auth import Role, TokenVerifier
from api.http.deps import LedgerDep, SettingsDep, get_verifier
from domain.errors import Unauthenticated

router = APIRouter(prefix="/console", include_in_schema=False)


@router.get("/signin", response_class=HTMLResponse)
def signin_form(request: Request) -> Response:
    nonce = get_signer(request).signin_nonce()
    response = _page(request, "signin.html", {"nonce": nonce, "error": None})
    response.set_cookie(
        SIGNIN_COOKIE,
        nonce,
        max_age=600,
        httponly=True,
        samesite="strict",
        secure=_secure(request),
        path="/console",
    )
    return response


@router.post("/signin", response_class=HTMLResponse)
def signin(
    request: Request,
    ledger: LedgerDep,
    settings: SettingsDep,
    verifier: Annotated[TokenVerifier, Depends(get_verifier)],
    token: Annotated[str, Form(max_length=8192)] = "",
    csrf: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    """Exchange an admin bearer token for a session cookie (the token is not kept)."""
    if not same_secret(csrf, request.cookies.get(SIGNIN_COOKIE)):
        return _refused_signin(request, "The sign-in form expired. Try again.", 400)
    try:
        caller = verifier.verify(token.strip())
    except Unauthenticated:
        caller = None
    if caller is None or caller.role is not Role.ADMIN:
        # One answer for a bad token and a non-admin one: the console is for admins.
        return _refused_signin(request, "This token cannot open the console.", 401)
    now = int(ledger.clock.now().timestamp())
    expires = now + settings.console_session_seconds
    token_exp = jwt.decode(token.strip(), options={"verify_signature": False}).get("exp")
    if isinstance(token_exp, int):
        expires = min(expires, token_exp)  # never outlive the token it came from
    cookie, _ = get_signer(request).issue(caller.subject, expires)
    response = RedirectResponse("/console", status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=max(1, expires - now),
        httponly=True,
        samesite="strict",
        secure=_secure(request),
        path="/console",
    )
    response.delete_cookie(SIGNIN_COOKIE, path="/console")
    return response


def _refused_signin(request: Request, message: str, status: int) -> Response:
    nonce = get_signer(request).signin_nonce()
    response = _page(request, "signin.html", {"nonce": nonce, "error": message}, status)
    response.set_cookie(
        SIGNIN_COOKIE,
        nonce,
        max_age=600,
        httponly=True,
        samesite="strict",
        secure=_secure(request),
        path="/console",
    )
    return response


@router.post("/signout")
def signout(session: SessionDep, csrf: Annotated[str, Form(max_length=200)] = "") -> Response:
    if not same_secret(csrf, session.csrf):
        raise SignInRequired()
    response = RedirectResponse("/console/signin", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/console")
    return response
