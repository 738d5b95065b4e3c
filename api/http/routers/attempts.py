"""Execution attempts: status for the owner, lists, audit, reconcile and resolve for admins."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import PlainTextResponse

from adapters.view_changes import ViewChanges
from api.http.auth import Caller, Role
from api.http.cursors import decode_cursor, encode_cursor
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
from domain.errors import NotFound
from domain.services.resolution import reconcile, resolve
from projections.attention import AttentionReason, waiting_for_build
from projections.audit import audit_stream, mermaid_state_diagram
from projections.ports import ViewRecord
from projections.status import STATUS_VIEW, public_view, status_list_key

router = APIRouter(
    prefix="/execution-attempts",
    tags=["execution-attempts"],
    responses=error_responses(400, 401, 403, 404, 409, 413, 422, 503),
)

MAX_WAIT_SECONDS = 30
SETTLED = frozenset(
    {
        AttemptStatus.SUCCEEDED.value,
        AttemptStatus.FAILED_SAFE.value,
        AttemptStatus.MANUALLY_RESOLVED.value,
        AttemptStatus.OUTCOME_UNKNOWN.value,
        AttemptStatus.EFFECT_AFTER_NO_EFFECT.value,
    }
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
    (read-your-writes right after an approval, even when another writer
    stores the same version first)."""
    if ledger.views is None:
        return None
    known_id(attempt_id)
    return ledger.projector.current_view(attempt_id)


def refreshed(ledger: LedgerDep, attempt_id: str) -> AttemptOut:
    """After an admin change: re-project from the log and answer from the view."""
    ledger.projector.project_attempt(attempt_id)
    view = status_view(ledger, attempt_id)
    if view is None:
        raise NotFound()
    return AttemptOut.model_validate(public_view(view.data))


@router.get("")
def list_attempts(
    caller: AdminCaller,
    ledger: LedgerDep,
    status: AttemptStatus | AttentionReason,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=400)] = None,
) -> AttemptListOut:
    """Attempts in one status, oldest change first (the attention list for
    ``outcome_unknown``, ``effect_after_no_effect`` and ``failed_safe``); paginated
    from the projection. ``waiting_for_build``: the queued attempts no worker with
    their build has taken for ``LEDGER_WAITING_FOR_BUILD_SECONDS`` (each item is
    its ordinary status view, status ``queued``)."""
    assert ledger.views is not None
    if status is AttentionReason.WAITING_FOR_BUILD:
        rows, next_raw = waiting_for_build(
            ledger.views,
            ledger.clock.now(),
            ledger.settings.waiting_for_build_seconds,
            limit,
            decode_cursor(cursor),
        )
    else:
        rows, next_raw = ledger.views.list_views(
            status_list_key(status.value), limit, decode_cursor(cursor)
        )
    items = [AttemptOut.model_validate(public_view(r.data)) for r in rows]
    return AttemptListOut(items=items, next_cursor=encode_cursor(next_raw))


@router.get("/{attempt_id}")
async def get_attempt(
    attempt_id: str,
    caller: AnyCaller,
    ledger: LedgerDep,
    wait: Annotated[
        int | None,
        Query(
            ge=1,
            le=MAX_WAIT_SECONDS,
            description="Long poll: answer as soon as the attempt is settled (terminal or "
            "outcome_unknown), or after this many seconds with its status then.",
        ),
    ] = None,
) -> AttemptOut:
    """The redacted status; anyone else gets the same 404 as for a missing id.

    With ``wait`` the request waits on this process's view-change notification
    (no store reads while it waits, no connection held)."""
    changes = getattr(ledger.views, "changes", None)
    if wait is None or not isinstance(changes, ViewChanges):
        view = await run_in_threadpool(status_view, ledger, attempt_id)
        return _visible(caller, view)
    with changes.watch(STATUS_VIEW, attempt_id) as waiter:
        view = await run_in_threadpool(status_view, ledger, attempt_id)
        answer = _visible(caller, view)
        deadline = time.monotonic() + wait
        while answer.status not in SETTLED:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not await waiter.wait(remaining):
                break
            # the row as the projector just wrote it; read back only when not carried
            view = waiter.take() or await run_in_threadpool(status_view, ledger, attempt_id)
            answer = _visible(caller, view)
    return answer


def _visible(caller: Caller, view: ViewRecord | None) -> AttemptOut:
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
    return AttemptEventsOut(
        events=audit["events"],
        verified=audit["verified"],
        first_bad_version=audit["first_bad_version"],
    )


@router.post("/{attempt_id}/reconcile")
def reconcile_attempt(
    attempt_id: str, body: ReconcileIn, caller: AdminCaller, ledger: LedgerDep
) -> AttemptOut:
    """Run the registered read-only reconciler for an uncertain attempt."""
    reconcile(
        ledger.context, attempt_id=known_id(attempt_id), expected_revision=body.expected_revision
    )
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
