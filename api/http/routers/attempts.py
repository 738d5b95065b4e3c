"""Execution attempts: status for the owner, lists, audit, reconcile and resolve for admins."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import PlainTextResponse

from api.http.auth import Caller, Role
from api.http.deps import AdminCaller, AnyCaller, LedgerDep, known_id
from api.http.errors import error_responses
from api.http.schemas.attempts import (
    AttemptEventsOut,
    AttemptListOut,
    AttemptOut,
    ReconcileIn,
    ResolveIn,
)
from domain.attempt import AttemptStatus
from domain.errors import InvalidInput, NotFound
from domain.services.resolution import reconcile, resolve
from projections.audit import audit_stream, mermaid_state_diagram
from projections.ports import ViewRecord
from projections.status import STATUS_VIEW, public_view, status_list_key

router = APIRouter(
    prefix="/execution-attempts",
    tags=["execution-attempts"],
    responses=error_responses(400, 401, 403, 404, 409, 413, 422, 503),
)

def may_see(caller: Caller, owner: str | None) -> bool:
    """The owning actor (directly or through its channel) and admins."""
    if caller.role is Role.ADMIN:
        return True
    if caller.role is Role.ACTOR:
        return caller.subject == owner
    if caller.role is Role.CHANNEL and caller.provenance is not None:
        return caller.provenance.actor_id == owner
    return False


def status_view(ledger: LedgerDep, attempt_id: str) -> ViewRecord | None:
    """The projected view; projected now if the projector has not seen it yet
    (read-your-writes right after an approval)."""
    if ledger.views is None:
        return None
    known_id(attempt_id)
    view = ledger.views.get_view(STATUS_VIEW, attempt_id)
    if view is None and ledger.projector.project_attempt(attempt_id):
        view = ledger.views.get_view(STATUS_VIEW, attempt_id)
    return view


def refreshed(ledger: LedgerDep, attempt_id: str) -> AttemptOut:
    """After an admin change: re-project from the log and answer from the view."""
    ledger.projector.project_attempt(attempt_id)
    view = status_view(ledger, attempt_id)
    if view is None:
        raise NotFound()
    return AttemptOut.model_validate(public_view(view.data))


def encode_cursor(raw: str | None) -> str | None:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=") if raw else None


def decode_cursor(token: str | None) -> str | None:
    if not token:
        return None
    if not re.fullmatch(r"[A-Za-z0-9_\-]+", token):
        raise InvalidInput("cursor: not a cursor this API returned")
    try:
        return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidInput("cursor: not a cursor this API returned") from None


@router.get("")
def list_attempts(
    caller: AdminCaller,
    ledger: LedgerDep,
    status: AttemptStatus,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=400)] = None,
) -> AttemptListOut:
    """Attempts in one status, oldest change first (the attention list for
    ``outcome_unknown``, ``effect_after_no_effect`` and ``failed_safe``); paginated
    from the projection."""
    assert ledger.views is not None
    rows, next_raw = ledger.views.list_views(status_list_key(status.value), limit,
                                             decode_cursor(cursor))
    items = [AttemptOut.model_validate(public_view(r.data)) for r in rows]
    return AttemptListOut(items=items, next_cursor=encode_cursor(next_raw))


@router.get("/{attempt_id}")
def get_attempt(attempt_id: str, caller: AnyCaller, ledger: LedgerDep) -> AttemptOut:
    """The redacted status; anyone else gets the same 404 as for a missing id."""
    view = status_view(ledger, attempt_id)
    if view is None or not may_see(caller, view.data.get("owner_actor_id")):
        raise NotFound()
    return AttemptOut.model_validate(public_view(view.data))


@router.get("/{attempt_id}/events", response_model=None)
def get_attempt_events(
    attempt_id: str,
    caller: AdminCaller,
    ledger: LedgerDep,
    format: Literal["json", "mermaid"] = "json",
) -> AttemptEventsOut | PlainTextResponse:
    """The redacted, hash-verified event history (or a Mermaid state diagram)."""
    view = status_view(ledger, attempt_id)
    if view is None:
        raise NotFound()
    anchor: tuple[int, str] | None = None
    if view.data.get("chain_head"):
        anchor = (view.version, str(view.data["chain_head"]))
    audit: dict[str, Any] = audit_stream(ledger.store, attempt_id, anchor)
    if format == "mermaid":
        return PlainTextResponse(mermaid_state_diagram(audit["events"]))
    return AttemptEventsOut(events=audit["events"], verified=audit["verified"],
                            first_bad_version=audit["first_bad_version"])


@router.post("/{attempt_id}/reconcile")
def reconcile_attempt(
    attempt_id: str, body: ReconcileIn, caller: AdminCaller, ledger: LedgerDep
) -> AttemptOut:
    """Run the registered read-only reconciler for an uncertain attempt."""
    reconcile(ledger.context, attempt_id=known_id(attempt_id),
              expected_revision=body.expected_revision)
    return refreshed(ledger, attempt_id)


@router.post("/{attempt_id}/resolve")
def resolve_attempt(
    attempt_id: str, body: ResolveIn, caller: AdminCaller, ledger: LedgerDep
) -> AttemptOut:
    """Settle ``outcome_unknown`` (or ``effect_after_no_effect``); never calls the
    executor."""
    resolve(
        ledger.context,
        attempt_id=known_id(attempt_id),
        expected_revision=body.expected_revision,
        outcome=body.resolution,
        reason=body.reason,
        resolved_by=caller.subject,
        receipt=dict(body.receipt) if body.receipt is not None else None,
    )
    return refreshed(ledger, attempt_id)
