"""Execution attempts: the redacted status for its owner (and the wait for it
to settle), lists, the audit timeline, reconcile and resolve for admins.

Status reads are read-your-writes: an attempt the projector has not seen yet
is projected on the read, so the answer right after an approval is never a
NotFound. After an admin change the view is projected again before the answer.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from anyio import to_thread

from adapters.bootstrap import Ledger
from adapters.view_changes import ViewChanges
from api.http.schemas.attempts import (
    AttemptEventsOut,
    AttemptListOut,
    AttemptOut,
    ReconcileIn,
    ResolveIn,
)
from api.service.cursors import DEFAULT_PAGE, decode_cursor, encode_cursor, page_size
from api.service.principal import Principal, Role, known_id, require_role
from domain.attempt import AttemptStatus
from domain.errors import NotFound, NotOutcomeUnknown, StaleRevision
from domain.services import resolution
from projections.attention import AttentionReason, waiting_for_build
from projections.audit import audit_stream, mermaid_state_diagram
from projections.ports import ViewRecord
from projections.status import STATUS_VIEW, public_view, status_list_key

SETTLED = frozenset(
    {
        AttemptStatus.SUCCEEDED.value,
        AttemptStatus.FAILED_SAFE.value,
        AttemptStatus.MANUALLY_RESOLVED.value,
        AttemptStatus.OUTCOME_UNKNOWN.value,
        AttemptStatus.EFFECT_AFTER_NO_EFFECT.value,
    }
)
"""Where a wait ends: terminal, or waiting for a human."""


def may_see(principal: Principal, owner: str | None) -> bool:
    """The owning actor (directly or through its channel) and admins."""
    if principal.role is Role.ADMIN:
        return True
    if principal.role is Role.ACTOR:
        return principal.subject == owner
    if principal.role is Role.CHANNEL and principal.provenance is not None:
        return principal.provenance.actor_id == owner
    return False


def status_view(ledger: Ledger, attempt_id: str) -> ViewRecord | None:
    """The projected view; projected now if the projector has not seen it yet
    (read-your-writes right after an approval, even when another writer
    stores the same version first)."""
    known_id(attempt_id)
    return ledger.projector.current_view(attempt_id)


def visible(principal: Principal, view: ViewRecord | None) -> AttemptOut:
    """The public view for a caller who may see it; NotFound for anyone else."""
    if view is None or not may_see(principal, view.data.get("owner_actor_id")):
        raise NotFound()
    return AttemptOut.model_validate(public_view(view.data))


def get_attempt(ledger: Ledger, principal: Principal, attempt_id: str) -> AttemptOut:
    """The redacted status; anyone else gets the same NotFound as for a missing id."""
    return visible(principal, status_view(ledger, attempt_id))


def wait_attempt(
    ledger: Ledger, principal: Principal, attempt_id: str, seconds: float
) -> AttemptOut:
    """The status as soon as the attempt is settled (terminal or
    ``outcome_unknown``), or after ``seconds`` with its status then.

    Blocks the calling thread on this process's view-change notification (no
    store reads while it waits): it ends early only for writes this process
    makes (its worker and projector)."""
    changes = _changes(ledger)
    if changes is None:
        return get_attempt(ledger, principal, attempt_id)
    with changes.watch_blocking(STATUS_VIEW, attempt_id) as waiter:
        answer = get_attempt(ledger, principal, attempt_id)
        deadline = time.monotonic() + seconds
        while answer.status not in SETTLED:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not waiter.wait(remaining):
                break
            # the row as the projector just wrote it; read back only when not carried
            answer = visible(principal, waiter.take() or status_view(ledger, attempt_id))
            if changes.closed:
                break  # the process is stopping: answer what the row says now
    return answer


async def wait_attempt_async(
    ledger: Ledger, principal: Principal, attempt_id: str, seconds: float
) -> AttemptOut:
    """:func:`wait_attempt` for an event loop: the wait holds no thread and no
    connection; the store reads run on the thread pool."""
    changes = _changes(ledger)
    if changes is None:
        return await to_thread.run_sync(get_attempt, ledger, principal, attempt_id)
    with changes.watch(STATUS_VIEW, attempt_id) as waiter:
        answer = await to_thread.run_sync(get_attempt, ledger, principal, attempt_id)
        deadline = time.monotonic() + seconds
        while answer.status not in SETTLED:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not await waiter.wait(remaining):
                break
            view = waiter.take() or await to_thread.run_sync(status_view, ledger, attempt_id)
            answer = visible(principal, view)
            if changes.closed:
                break  # the process is stopping: answer what the row says now
    return answer


def end_waits(ledger: Ledger) -> None:
    """Answer every long poll of this process now, and every later one at once
    (a stopping ``ledger serve``: its waits must not hold the graceful stop)."""
    changes = _changes(ledger)
    if changes is not None:
        changes.close()


def _changes(ledger: Ledger) -> ViewChanges | None:
    """The view-change hub of this process's view store (None: a store that
    signals nothing, so a wait answers at once)."""
    changes = getattr(ledger.views, "changes", None)
    return changes if isinstance(changes, ViewChanges) else None


def list_attempts(
    ledger: Ledger,
    principal: Principal,
    status: AttemptStatus | AttentionReason,
    *,
    limit: int = DEFAULT_PAGE,
    cursor: str | None = None,
) -> AttemptListOut:
    """Attempts in one status, oldest change first (the attention list for
    ``outcome_unknown``, ``effect_after_no_effect`` and ``failed_safe``);
    paginated from the projection. ``waiting_for_build``: the queued attempts no
    worker with their build has taken for ``LEDGER_WAITING_FOR_BUILD_SECONDS``
    (each item is its ordinary status view, status ``queued``). Admins only."""
    require_role(principal, Role.ADMIN)
    if status is AttentionReason.WAITING_FOR_BUILD:
        rows, next_raw = waiting_for_build(
            ledger.views,
            ledger.clock.now(),
            ledger.settings.waiting_for_build_seconds,
            page_size(limit),
            decode_cursor(cursor),
        )
    else:
        rows, next_raw = ledger.views.list_views(
            status_list_key(status.value), page_size(limit), decode_cursor(cursor)
        )
    items = [AttemptOut.model_validate(public_view(r.data)) for r in rows]
    return AttemptListOut(items=items, next_cursor=encode_cursor(next_raw))


def attempt_events(ledger: Ledger, principal: Principal, attempt_id: str) -> AttemptEventsOut:
    """The redacted, hash-verified event history of one attempt. Admins only."""
    audit = _audit(ledger, principal, attempt_id)
    return AttemptEventsOut(
        events=audit["events"],
        verified=audit["verified"],
        first_bad_version=audit["first_bad_version"],
    )


def attempt_diagram(ledger: Ledger, principal: Principal, attempt_id: str) -> str:
    """The attempt's history as a Mermaid state diagram. Admins only."""
    return mermaid_state_diagram(_audit(ledger, principal, attempt_id)["events"])


def _audit(ledger: Ledger, principal: Principal, attempt_id: str) -> dict[str, Any]:
    require_role(principal, Role.ADMIN)
    view = status_view(ledger, attempt_id)
    if view is None:
        raise NotFound()
    anchor: tuple[int, str] | None = None
    if view.data.get("chain_head"):
        anchor = (view.version, str(view.data["chain_head"]))
    return audit_stream(ledger.store, attempt_id, anchor)


def reconcile(
    ledger: Ledger, principal: Principal, attempt_id: str, body: ReconcileIn
) -> AttemptOut:
    """Run the registered read-only reconciler for an uncertain attempt. Admins only."""
    require_role(principal, Role.ADMIN)
    with _refreshed_on_conflict(ledger, attempt_id):
        resolution.reconcile(
            ledger.context,
            attempt_id=known_id(attempt_id),
            expected_revision=body.expected_revision,
        )
    return refreshed(ledger, attempt_id)


def resolve(ledger: Ledger, principal: Principal, attempt_id: str, body: ResolveIn) -> AttemptOut:
    """Settle ``outcome_unknown`` (or ``effect_after_no_effect``) as the calling
    admin; never calls the executor."""
    require_role(principal, Role.ADMIN)
    with _refreshed_on_conflict(ledger, attempt_id):
        resolution.resolve(
            ledger.context,
            attempt_id=known_id(attempt_id),
            expected_revision=body.expected_revision,
            outcome=body.resolution,
            reason=body.reason,
            resolved_by=principal.subject,
            receipt=dict(body.receipt) if body.receipt is not None else None,
        )
    return refreshed(ledger, attempt_id)


def refreshed(ledger: Ledger, attempt_id: str) -> AttemptOut:
    """After an admin change: re-project from the log and answer from the view."""
    ledger.projector.project_attempt(attempt_id)
    view = status_view(ledger, attempt_id)
    if view is None:
        raise NotFound()
    return AttemptOut.model_validate(public_view(view.data))


@contextmanager
def _refreshed_on_conflict(ledger: Ledger, attempt_id: str) -> Iterator[None]:
    """A stale revision or a settled attempt: the view shows where the attempt
    is now before the refusal is raised (the caller reads it next)."""
    try:
        yield
    except (StaleRevision, NotOutcomeUnknown):
        ledger.projector.project_attempt(attempt_id)
        raise
