"""Console: webhook deliveries by status (failing first), and a redeliver button.

The list shows what ``GET /webhook-deliveries`` shows (never a body or a
secret). The redeliver form carries the session's CSRF token, like every
console form; the delivery goes back to ``pending``, due now, and the page
says so.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from adapters.webhooks.deliverer import DeliveryTrimmed
from api.console import routes
from api.console.routes import SessionDep, _page
from api.console.session import Session, same_secret
from api.http.deps import LedgerDep
from api.service import webhooks
from domain.errors import NotFound
from projections.webhooks import DeliveryStatus

router = APIRouter(prefix="/console", include_in_schema=False)
MAX_ID_CHARS = 80
NOTICES = {
    "redelivered": "The delivery is pending again: it is sent on the next pass.",
    "redelivered_page": "The page's deliveries are pending again: they are sent on the next pass.",
}
"""What a redirect's ``done`` may ask the page to say; any other value says nothing."""


def _deliveries_page(
    request: Request,
    session: Session,
    ledger: LedgerDep,
    status: DeliveryStatus,
    cursor: str | None,
    *,
    notice: str | None = None,
    problem: str | None = None,
    code: int = 200,
) -> Response:
    page = webhooks.list_deliveries(
        ledger, session.principal, status, limit=routes.PAGE_SIZE, cursor=cursor
    )
    more = (
        "/console/webhooks?" + urlencode({"status": status.value, "cursor": page.next_cursor})
        if page.next_cursor
        else None
    )
    context: dict[str, Any] = {
        "session": session,
        "active": "webhooks",
        "status": status.value,
        "statuses": [s.value for s in DeliveryStatus],
        "rows": [item.model_dump() for item in page.items],
        "more": more,
        "notice": notice,
        "problem": problem,
    }
    return _page(request, "webhooks.html", context, code)


@router.get("/webhooks", response_class=HTMLResponse)
def webhook_deliveries(
    request: Request,
    session: SessionDep,
    ledger: LedgerDep,
    status: DeliveryStatus = DeliveryStatus.FAILING,
    cursor: Annotated[str | None, Query(max_length=400)] = None,
    done: Annotated[str | None, Query(max_length=MAX_ID_CHARS)] = None,
) -> Response:
    """Deliveries in one status (by subscription and next try; delivered ones
    oldest first): failing ones with their error class, the receiver's status
    code and the next try. ``done`` picks one of the fixed notices; nothing of
    the query is ever shown."""
    notice = NOTICES.get(done or "")
    return _deliveries_page(request, session, ledger, status, cursor, notice=notice)


@router.post("/webhooks/redeliver", response_class=HTMLResponse)
def redeliver_page(
    request: Request,
    session: SessionDep,
    ledger: LedgerDep,
    delivery_id: Annotated[list[str], Form(max_length=routes.PAGE_SIZE)],
    csrf: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    """Send a page of deliveries again at once (what on-call does after a
    receiver's outage). Every id is checked before any is sent again: one
    unknown or trimmed delivery sends none, and the page says which."""
    if not same_secret(csrf, session.csrf):
        return _deliveries_page(
            request,
            session,
            ledger,
            DeliveryStatus.FAILING,
            None,
            code=403,
            problem="The form's security token did not match. Reload the page and try again.",
        )
    wanted = list(dict.fromkeys(i for i in delivery_id if len(i) <= MAX_ID_CHARS))
    try:
        webhooks.redeliver_many(ledger, session.principal, wanted)
    except (NotFound, DeliveryTrimmed) as exc:
        return _deliveries_page(
            request,
            session,
            ledger,
            DeliveryStatus.FAILING,
            None,
            code=404 if isinstance(exc, NotFound) else 409,
            problem=f"Nothing was sent again: {exc}",
        )
    return RedirectResponse(
        "/console/webhooks?"
        + urlencode({"status": DeliveryStatus.PENDING.value, "done": "redelivered_page"}),
        status_code=303,
    )


@router.post("/webhooks/{delivery_id}/redeliver", response_class=HTMLResponse)
def redeliver_form(
    request: Request,
    session: SessionDep,
    ledger: LedgerDep,
    delivery_id: str,
    csrf: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    """Send one delivery again (a failing one now rather than after its backoff)."""
    if not same_secret(csrf, session.csrf):
        return _deliveries_page(
            request,
            session,
            ledger,
            DeliveryStatus.FAILING,
            None,
            code=403,
            problem="The form's security token did not match. Reload the page and try again.",
        )
    try:
        webhooks.redeliver(ledger, session.principal, delivery_id)
    except NotFound:
        return _deliveries_page(
            request,
            session,
            ledger,
            DeliveryStatus.FAILING,
            None,
            code=404,
            problem="There is no such delivery.",
        )
    except DeliveryTrimmed:
        return _deliveries_page(
            request,
            session,
            ledger,
            DeliveryStatus.FAILING,
            None,
            code=409,
            problem=(
                "That delivery was made and trimmed after the retention: nothing is left "
                "to send. Its fact stays in the log."
            ),
        )
    return RedirectResponse(
        "/console/webhooks?"
        + urlencode({"status": DeliveryStatus.PENDING.value, "done": "redelivered"}),
        status_code=303,
    )
