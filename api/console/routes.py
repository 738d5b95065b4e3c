"""Console pages: sign-in, the attention list, attempts by status, one attempt
(the pending approvals are :mod:`api.console.inbox`), and the resolve /
reconcile forms. They call the same services as the JSON routes.

Every page here needs an admin session (see :mod:`api.console.session`);
without one, a page answers 303 to the sign-in form. A member's session (an
actor signed in) opens only their own pending approvals: every other page
sends it there.
Every form carries the session's CSRF token; the resolve and reconcile forms
also carry the revision the admin saw, so a stale form is refused (409) and
the page says why in words. No page shows a token or spec content; the
attempt page shows what the attempt was and, since only admins reach it, its
idempotency key; the approved preview (content included) only behind a
"Reveal" that is recorded in the log first (``api.console.oncall``).
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from api.console.session import SESSION_COOKIE, Session, SessionStore
from api.console.svg import timeline_svg
from api.http.deps import LedgerDep
from api.service import attempts, audit, find, oncall
from api.service.principal import Role
from domain.attempt import AttemptStatus, Resolution
from domain.timeutil import parse_utc
from projections.attention import AttentionReason

PAGE_SIZE = 20
MAX_ID_CHARS = 80
# the directory's actor id (domain.directory.Ident), checked here so a bad one is a page
ACTOR_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@\-]{0,127}")
templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
router = APIRouter(prefix="/console", include_in_schema=False)


class SignInRequired(Exception):
    """No valid console session: the handler answers 303 to the sign-in page."""


class MembersOnlyInbox(Exception):
    """A member's session on an admin page: the handler answers 303 to their inbox."""


def any_session(request: Request, ledger: LedgerDep) -> Session:
    """The request's live session, an admin's or a member's (one store read),
    else the sign-in page."""
    found = SessionStore(ledger.store).find(request.cookies.get(SESSION_COOKIE), ledger.clock.now())
    if found is None or found.role not in (Role.ADMIN, Role.ACTOR):
        raise SignInRequired()
    return found


def current_session(request: Request, ledger: LedgerDep) -> Session:
    """The request's live admin session; a member goes to their inbox, anyone
    else to the sign-in page."""
    found = any_session(request, ledger)
    if found.role is not Role.ADMIN:
        raise MembersOnlyInbox()
    return found


SessionDep = Annotated[Session, Depends(current_session)]
AnySessionDep = Annotated[Session, Depends(any_session)]


def _page(request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
    response = templates.TemplateResponse(request, name, context, status_code=status)
    response.headers["Cache-Control"] = "no-store"
    response.headers["Content-Security-Policy"] = (
        "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    )
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


def _age(text: str | None, now: datetime) -> str:
    if not text:
        return ""
    seconds = max(0, int((now - parse_utc(text)).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def aged(rows: list[dict[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """Rows with the age of their last change."""
    return [{**row, "age": _age(row.get("updated_at"), now)} for row in rows]


# -- pages ---------------------------------------------------------------------


@router.get("", response_class=HTMLResponse)
def attention(
    request: Request,
    session: SessionDep,
    ledger: LedgerDep,
    outcome_unknown_cursor: Annotated[str | None, Query(max_length=400)] = None,
    effect_after_no_effect_cursor: Annotated[str | None, Query(max_length=400)] = None,
    failed_safe_cursor: Annotated[str | None, Query(max_length=400)] = None,
    waiting_for_build_cursor: Annotated[str | None, Query(max_length=400)] = None,
) -> Response:
    """What needs a human, oldest first, with what each attempt was and its age:
    outcome_unknown, effect_after_no_effect, failed_safe not yet acknowledged,
    and the queued attempts waiting for a worker with their build."""
    cursors = {
        AttemptStatus.OUTCOME_UNKNOWN.value: outcome_unknown_cursor,
        AttemptStatus.EFFECT_AFTER_NO_EFFECT.value: effect_after_no_effect_cursor,
        AttemptStatus.FAILED_SAFE.value: failed_safe_cursor,
        AttentionReason.WAITING_FOR_BUILD.value: waiting_for_build_cursor,
    }
    now = ledger.clock.now()
    sections = []
    for reason, cursor in cursors.items():
        rows, next_cursor = find.attention(ledger, session.principal, reason, PAGE_SIZE, cursor)
        if reason == AttentionReason.WAITING_FOR_BUILD.value:
            rows = [{**row, "attention": reason} for row in rows]
        more = f"/console?{urlencode({reason + '_cursor': next_cursor})}" if next_cursor else None
        sections.append({"status": reason, "rows": aged(rows, now), "more": more})
    return _page(
        request, "attention.html", {"session": session, "sections": sections, "active": "attention"}
    )


def _attempt_page(
    request: Request,
    session: Session,
    ledger: LedgerDep,
    attempt_id: str,
    *,
    problem: str | None = None,
    status: int = 200,
    notice: str | None = None,
    preview: tuple[str, bool] | None = None,
) -> Response:
    view = attempts.status_view(ledger, attempt_id) if len(attempt_id) <= MAX_ID_CHARS else None
    if view is None:
        return _page(request, "missing.html", {"session": session, "active": None}, 404)
    shown = attempts.visible(session.principal, view)
    report = audit.attempt_report(ledger, session.principal, attempt_id)
    facts = oncall.describe(ledger, session.principal, attempt_id)
    return _page(
        request,
        "attempt.html",
        {
            "session": session,
            "attempt": shown.model_dump(exclude_none=True),
            "audit": report,
            "active": None,
            "svg": timeline_svg(report["attempt"]["events"]),
            "age": _age(shown.updated_at, ledger.clock.now()),
            "resolutions": [r.value for r in Resolution],
            "problem": problem,
            "notice": notice,
            "facts": facts,
            "preview": preview[0] if preview else None,
            "preview_exact": preview[1] if preview else True,
        },
        status,
    )


@router.get("/attempts/{attempt_id}", response_class=HTMLResponse)
def attempt_page(
    request: Request,
    session: SessionDep,
    ledger: LedgerDep,
    attempt_id: str,
    done: Annotated[str | None, Query(max_length=40)] = None,
) -> Response:
    notice = {
        "resolved": "Resolved.",
        "reconciled": "Reconciliation ran.",
        "acknowledged": "Acknowledged: it left the attention list.",
    }.get(done or "")
    return _attempt_page(request, session, ledger, attempt_id, notice=notice)


@router.get("/static/console.css")
def stylesheet() -> Response:
    css = (Path(__file__).parent / "console.css").read_text()
    return Response(css, media_type="text/css", headers={"Cache-Control": "max-age=300"})


def install_console(app: Any) -> None:
    """Mount the console on an app: its routes and its sign-in redirect (sessions
    live in the ledger's store)."""
    from fastapi import FastAPI

    from api.http.middleware import include

    assert isinstance(app, FastAPI)

    async def to_signin(request: Request, exc: Exception) -> Response:
        response = RedirectResponse("/console/signin", status_code=303)
        response.headers["Cache-Control"] = "no-store"
        return response

    async def to_inbox(request: Request, exc: Exception) -> Response:
        response = RedirectResponse("/console/inbox", status_code=303)
        response.headers["Cache-Control"] = "no-store"
        return response

    app.add_exception_handler(SignInRequired, to_signin)
    app.add_exception_handler(MembersOnlyInbox, to_inbox)
    include(app, router)
    from api.console.actions import router as actions_router
    from api.console.inbox import router as inbox_router
    from api.console.oidc import prepare as prepare_oidc
    from api.console.oidc import router as oidc_router
    from api.console.search import router as search_router
    from api.console.signin import router as signin_router
    from api.console.webhooks import router as webhooks_router

    include(app, search_router)
    include(app, inbox_router)
    include(app, signin_router)
    include(app, oidc_router)
    prepare_oidc(app, app.state.settings)
    include(app, actions_router)
    include(app, webhooks_router)
