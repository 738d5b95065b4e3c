"""Console admin forms on one attempt: resolve, reconcile and acknowledge, each
with the session's CSRF token and the revision the admin saw (a stale form is a
409 in words), and the reveal of the approved preview (recorded first)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from api.console.routes import SessionDep, _attempt_page
from api.console.session import Session, same_secret
from api.http.deps import LedgerDep
from api.http.errors import status_for
from api.http.schemas.attempts import ReconcileIn, ResolveIn
from api.service import attempts, oncall
from api.service.validation import parse
from domain.attempt import Resolution
from domain.errors import LedgerError, NotOutcomeUnknown, StaleRevision

router = APIRouter(prefix="/console", include_in_schema=False)
CSRF_WORDS = "The form's security token did not match. Reload the page and try again."


def _stale_words(ledger: LedgerDep, attempt_id: str, seen: int) -> str:
    """The 409 in words: what the form was for, where the attempt is now."""
    view = attempts.status_view(ledger, attempt_id)
    now_at = view.version if view is not None else "?"
    state = view.data.get("status", "?") if view is not None else "?"
    return (
        f"Conflict (409), nothing was changed: this attempt moved on after the form was "
        f"opened. The form was for revision {seen}; the attempt is now at revision "
        f"{now_at}, status {state}. Read its new state below, and act again only if it "
        "still needs you."
    )


@router.post("/attempts/{attempt_id}/resolve", response_class=HTMLResponse)
def resolve_form(
    request: Request,
    session: SessionDep,
    ledger: LedgerDep,
    attempt_id: str,
    expected_revision: Annotated[int, Form(ge=1)],
    resolution: Annotated[Resolution, Form()],
    reason: Annotated[str, Form(max_length=500)] = "",
    csrf: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    """Settle outcome_unknown (never calls the executor), as the signed-in admin."""
    return _admin_action(
        request,
        session,
        ledger,
        attempt_id,
        expected_revision,
        csrf,
        "resolved",
        lambda: attempts.resolve(
            ledger,
            session.principal,
            attempt_id,
            parse(
                ResolveIn,
                {
                    "expected_revision": expected_revision,
                    "resolution": resolution.value,
                    "reason": reason,
                },
            ),
        ),
    )


@router.post("/attempts/{attempt_id}/reconcile", response_class=HTMLResponse)
def reconcile_form(
    request: Request,
    session: SessionDep,
    ledger: LedgerDep,
    attempt_id: str,
    expected_revision: Annotated[int, Form(ge=1)],
    csrf: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    """Run the registered read-only reconciler again."""
    return _admin_action(
        request,
        session,
        ledger,
        attempt_id,
        expected_revision,
        csrf,
        "reconciled",
        lambda: attempts.reconcile(
            ledger,
            session.principal,
            attempt_id,
            parse(ReconcileIn, {"expected_revision": expected_revision}),
        ),
    )


@router.post("/attempts/{attempt_id}/acknowledge", response_class=HTMLResponse)
def acknowledge_form(
    request: Request,
    session: SessionDep,
    ledger: LedgerDep,
    attempt_id: str,
    expected_revision: Annotated[int, Form(ge=1)],
    note: Annotated[str, Form(max_length=500)] = "",
    csrf: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    """Acknowledge a failed_safe attempt (recorded; it leaves the attention list)."""
    return _admin_action(
        request,
        session,
        ledger,
        attempt_id,
        expected_revision,
        csrf,
        "acknowledged",
        lambda: oncall.acknowledge(ledger, session.principal, attempt_id, expected_revision, note),
    )


@router.post("/attempts/{attempt_id}/reveal", response_class=HTMLResponse)
def reveal_form(
    request: Request,
    session: SessionDep,
    ledger: LedgerDep,
    attempt_id: str,
    csrf: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    """Show the approved preview, once the reveal (who, when, which attempt) is in the log."""
    if not same_secret(csrf, session.csrf):
        return _attempt_page(request, session, ledger, attempt_id, status=403, problem=CSRF_WORDS)
    try:
        preview = oncall.reveal(ledger, session.principal, attempt_id)
    except LedgerError as exc:
        return _attempt_page(
            request, session, ledger, attempt_id, status=status_for(exc), problem=exc.detail
        )
    return _attempt_page(request, session, ledger, attempt_id, preview=preview)


def _admin_action(
    request: Request,
    session: Session,
    ledger: LedgerDep,
    attempt_id: str,
    expected_revision: int,
    csrf: str,
    done: str,
    action: Callable[[], object],
) -> Response:
    """One admin form: check its CSRF token, run the action, explain a stale form
    (409) or any other refusal on the attempt page, else go back to it."""
    if not same_secret(csrf, session.csrf):
        return _attempt_page(
            request,
            session,
            ledger,
            attempt_id,
            status=403,
            problem=CSRF_WORDS,
        )
    try:
        action()
    except (StaleRevision, NotOutcomeUnknown):
        # the service projected the attempt again: the page shows where it is now
        return _attempt_page(
            request,
            session,
            ledger,
            attempt_id,
            status=409,
            problem=_stale_words(ledger, attempt_id, expected_revision),
        )
    except LedgerError as exc:
        return _attempt_page(
            request, session, ledger, attempt_id, status=status_for(exc), problem=exc.detail
        )
    return RedirectResponse(f"/console/attempts/{attempt_id}?done={done}", status_code=303)
