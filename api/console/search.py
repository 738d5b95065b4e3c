"""Console: find any attempt. Filters by status, capability, actor and creation
time, or an attempt or proposal id prefix; newest first, paged through the find
index (``api.service.find``: one list of the view store per query, never a scan).
A filter that is not well formed is a 400 page that says which, never a trace."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from api.console.routes import ACTOR_ID, PAGE_SIZE, SessionDep, _page, aged
from api.http.deps import LedgerDep
from api.service import find
from domain.attempt import AttemptStatus
from domain.errors import InvalidInput
from domain.timeutil import parse_utc

router = APIRouter(prefix="/console", include_in_schema=False)
FILTERS = ("status", "capability", "actor_id", "since", "until", "id")


def _moment(text: str, what: str) -> datetime | None:
    if not text:
        return None
    try:
        return parse_utc(text if text[-1:] in "zZ" or "+" in text[10:] else text + "Z")
    except ValueError:
        raise InvalidInput(f"{what}: a UTC time such as 2026-01-31T09:00:00Z") from None


@router.get("/attempts", response_class=HTMLResponse)
def search_attempts(
    request: Request,
    session: SessionDep,
    ledger: LedgerDep,
    status: Annotated[str, Query(max_length=40)] = "",
    capability: Annotated[str, Query(max_length=200)] = "",
    actor_id: Annotated[str, Query(max_length=200)] = "",
    since: Annotated[str, Query(max_length=40)] = "",
    until: Annotated[str, Query(max_length=40)] = "",
    id: Annotated[str, Query(max_length=80)] = "",
    cursor: Annotated[str | None, Query(max_length=400)] = None,
) -> Response:
    """Attempts that match every filter given, newest first (by id for an id prefix)."""
    given = {
        "status": status.strip(),
        "capability": capability.strip(),
        "actor_id": actor_id.strip(),
        "since": since.strip(),
        "until": until.strip(),
        "id": id.strip(),
    }
    context: dict[str, Any] = {
        "session": session,
        "active": "attempts",
        "filters": given,
        "statuses": [s.value for s in AttemptStatus],
        "rows": [],
        "more": None,
        "problem": None,
    }
    try:
        if given["status"] and given["status"] not in context["statuses"]:
            raise InvalidInput("status: one of " + ", ".join(context["statuses"]))
        if given["actor_id"] and not ACTOR_ID.fullmatch(given["actor_id"]):
            raise InvalidInput("actor: letters, digits and _.:@- only")
        query = find.Query(
            status=AttemptStatus(given["status"]) if given["status"] else None,
            capability=given["capability"] or None,
            actor_id=given["actor_id"] or None,
            since=_moment(given["since"], "since"),
            until=_moment(given["until"], "until"),
            id_prefix=given["id"] or None,
        )
        rows, next_cursor = find.search(ledger, session.principal, query, PAGE_SIZE, cursor)
    except InvalidInput as exc:
        context["problem"] = f"Nothing was searched. {exc.detail}"
        return _page(request, "attempts.html", context, 400)
    context["rows"] = aged(rows, ledger.clock.now())
    if next_cursor:
        kept = {k: v for k, v in given.items() if v}
        context["more"] = "/console/attempts?" + urlencode({**kept, "cursor": next_cursor})
    return _page(request, "attempts.html", context)
